"""conv2d (NCHW, f32) as esgraph compiles it (im2col + oneDNN GEMM) vs PyTorch's CPU conv (oneDNN's
direct convolution) on ResNet-like shapes, both on all cores, side by side in one run; medians
of 11 runs; results checked against PyTorch's.

    PYTHONPATH=build/default/python .venv/bin/python bench/conv.py
"""
import os

import numpy as np
import torch

import esgraph
from esgraph import ops

from timing import median_ms  # bench/timing.py

# (batch, channels, size, filters, kernel, groups, stride)
SHAPES = [(8, 64, 56, 64, 3, 1, 1), (8, 128, 28, 128, 3, 1, 2), (8, 256, 14, 256, 1, 1, 1), (8, 64, 56, 64, 3, 64, 1)]



def main():
    torch.set_num_threads(os.cpu_count())
    rng = np.random.default_rng(0)
    for n, c, h, o, k, groups, stride in SHAPES:
        x = rng.standard_normal((n, c, h, h)).astype(np.float32)
        w = (rng.standard_normal((o, c // groups, k, k)) * 0.1).astype(np.float32)
        b = rng.standard_normal(o).astype(np.float32)
        pad = k // 2
        with esgraph.GraphBuilder("conv") as gb:
            y = ops.conv2d(gb.input("x", esgraph.f32, list(x.shape)), w, bias=b, strides=[stride, stride], pads=[pad] * 4,
                           groups=groups)
        model = esgraph.compile(gb.build([y]))
        tx, tw, tb = map(torch.from_numpy, (x, w, b))

        def theirs():
            return torch.nn.functional.conv2d(tx, tw, tb, stride=stride, padding=pad, groups=groups)

        out = model(x)
        np.testing.assert_allclose(out, theirs().numpy(), rtol=1e-4, atol=1e-4)
        ours = median_ms(lambda: model.run([x], out=[out]), 11)
        torch_ms = median_ms(theirs, 11)
        print(f"x{list(x.shape)} w{list(w.shape)} stride {stride} groups {groups:>2}: esgraph {ours:7.2f} ms"
              f"  torch {torch_ms:7.2f} ms  esgraph/torch {ours / torch_ms:4.2f}x")


if __name__ == "__main__":
    main()
