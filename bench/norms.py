"""layer_norm and softmax over the last axis, alone: esgraph's compiled kernels vs PyTorch's own
fused CPU kernels, on the encoder's shapes (tokens x width, and attention scores), side by side
in one run; medians of several runs, results checked against PyTorch's. Both are measured on
one thread and on two (this machine's cores); ratios compare like with like.

    PYTHONPATH=build/default/python .venv/bin/python bench/norms.py [--runs 21]
"""
import argparse

import numpy as np
import torch

import esgraph
from esgraph import ops

from timing import median_ms  # bench/timing.py

SHAPES = {"tokens 1024x512": (1024, 512), "scores 8192x128": (8192, 128)}
OPS = {
    "layer_norm": (ops.layer_norm, lambda t: torch.nn.functional.layer_norm(t, t.shape[-1:])),
    "softmax": (ops.softmax, lambda t: torch.softmax(t, dim=-1)),
}



def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    print(f"{'op':<11} {'shape':<17} {'esgraph 1t':>10} {'torch 1t':>9} {'ratio':>6} {'esgraph 2t':>10} {'torch 2t':>9} {'ratio':>6}  (ms)")
    for op_name, (ours, theirs) in OPS.items():
        for shape_name, shape in SHAPES.items():
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            with esgraph.GraphBuilder(op_name) as b:
                y = ours(b.input("x", esgraph.f32, list(shape)))
            graph = b.build([y])
            model_1t, model_2t = esgraph.compile(graph, threads=1), esgraph.compile(graph, threads=2)
            xt, out = torch.from_numpy(x), np.empty_like(x)
            np.testing.assert_allclose(model_2t(x), theirs(xt).numpy(), rtol=1e-4, atol=1e-5)
            ours_1t = median_ms(lambda: model_1t.run([x], out=[out]), args.runs)
            ours_2t = median_ms(lambda: model_2t.run([x], out=[out]), args.runs)
            torch.set_num_threads(1)
            torch_1t = median_ms(lambda: theirs(xt), args.runs)
            torch.set_num_threads(2)
            torch_2t = median_ms(lambda: theirs(xt), args.runs)
            print(f"{op_name:<11} {shape_name:<17} {ours_1t:>10.3f} {torch_1t:>9.3f} {ours_1t / torch_1t:>5.2f}x "
                  f"{ours_2t:>10.3f} {torch_2t:>9.3f} {ours_2t / torch_2t:>5.2f}x")


if __name__ == "__main__":
    main()
