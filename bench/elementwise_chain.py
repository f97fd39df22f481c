"""A chain of 8 elementwise ops on N floats, side by side in one run: esgraph fused and
unfused, PyTorch eager, numpy, and the machine's copy bandwidth as STREAM's copy measures it
(N floats copied into a preallocated array: by numpy on one thread, and by PyTorch's copy_ on
all cores). Medians of several runs.

    PYTHONPATH=build/default/python .venv/bin/python bench/elementwise_chain.py [--n 16777216]
"""
import argparse
import os

import numpy as np

import esgraph
from esgraph import ops

from timing import median_ms  # bench/timing.py


def chain(x):
    # 8 ops: mul, add, tanh, mul, sub, sigmoid, mul, add
    y = x * 1.5 + 0.25
    y = ops.tanh(y) * 0.5 - 0.125 if isinstance(y, esgraph.Tensor) else np.tanh(y) * 0.5 - 0.125
    return (ops.sigmoid(y) if isinstance(y, esgraph.Tensor) else 1 / (1 + np.exp(-y))) * 2.0 + x



def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1 << 22)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    x = np.random.default_rng(0).standard_normal(args.n).astype(np.float32)
    with esgraph.GraphBuilder("chain") as b:
        y = chain(b.input("x", esgraph.f32, [args.n]))
    graph = b.build([y])
    fused, unfused = esgraph.compile(graph), esgraph.compile(graph, fusion=False)
    fused_1t = esgraph.compile(graph, threads=1)
    assert np.allclose(fused(x), chain(x), rtol=1e-5, atol=1e-6)
    # Into a preallocated output, as the copy below writes into one: what the kernels cost. The
    # rows marked "new" allocate their result (numpy, torch, and esgraph's plain call): on this
    # machine a fresh 64 MB array costs its page faults on every run.
    y = np.empty_like(x)
    results = {
        "esgraph fused": 1e-3 * median_ms(lambda: fused.run([x], out=[y]), args.runs),
        "esgraph fused 1 thread": 1e-3 * median_ms(lambda: fused_1t.run([x], out=[y]), args.runs),
        "esgraph unfused": 1e-3 * median_ms(lambda: unfused.run([x], out=[y]), args.runs),
        "esgraph fused, new": 1e-3 * median_ms(lambda: fused(x), args.runs),
        "numpy, new": 1e-3 * median_ms(lambda: chain(x), args.runs),
    }
    try:
        import torch
        torch.set_num_threads(os.cpu_count())  # Debian's build starts with one
        tx, a, b = torch.from_numpy(x), torch.empty(args.n), torch.empty(args.n)

        def torch_in_place():  # the same kernels into preallocated tensors: no page faults
            torch.mul(tx, 1.5, out=a), a.add_(0.25), a.tanh_(), a.mul_(0.5), a.sub_(0.125), a.sigmoid_(), a.mul_(2.0)
            torch.add(a, tx, out=b)

        results["torch eager, in place"] = 1e-3 * median_ms(torch_in_place, args.runs)
        results["torch eager, new"] = 1e-3 * median_ms(lambda: (torch.sigmoid(torch.tanh(tx * 1.5 + 0.25) * 0.5 - 0.125) * 2.0 + tx), args.runs)
    except ImportError:
        pass
    dst = np.empty_like(x)
    copies = {"1 thread": 1e-3 * median_ms(lambda: np.copyto(dst, x), args.runs)}
    if "torch eager, in place" in results:
        copies[f"{os.cpu_count()} threads"] = 1e-3 * median_ms(lambda: b.copy_(tx), args.runs)
    rates = ", ".join(f"{2 * x.nbytes / s / 1e9:.1f} GB/s on {name}" for name, s in copies.items())
    print(f"N = {args.n} floats; copy bandwidth (read + write) {rates}")
    fused_gbs = 2 * x.nbytes / results["esgraph fused"] / 1e9
    print("esgraph fused moves " + ", ".join(f"{100 * fused_gbs / (2 * x.nbytes / s / 1e9):.0f}% of the copy's bytes per second on {name}"
                                             for name, s in copies.items()))
    print(f"{'':24} {'ms':>9} {'GB/s':>7} {'vs fused':>9}")
    for name, s in results.items():
        print(f"{name:24} {s * 1e3:9.2f} {2 * x.nbytes / s / 1e9:7.2f} {s / results['esgraph fused']:8.2f}x")


if __name__ == "__main__":
    main()
