"""Streams: a graph of 4 independent equal branches (matmul, tanh, matmul, … on 256x256 f32),
joined by a sum, compiled with 1, 2 and 4 streams on this machine's 2 cores (threads=2, so the
1-stream run gives its GEMMs and large elementwise kernels both cores; inside streams each
kernel runs on its stream's thread), and 1 stream on 1 thread for scale; medians of several
runs, side by side in one run, results checked against each other.

    PYTHONPATH=build/default/python .venv/bin/python bench/streams.py [--runs 21]
"""
import argparse

import numpy as np

import esgraph
from esgraph import ops

from timing import median_ms  # bench/timing.py


def branches(x, n_branches, depth):
    total = None
    for b in range(n_branches):
        y = x * float(b + 1)
        for _ in range(depth):
            y = ops.tanh(ops.matmul(y, x) * 0.01)
        total = y if total is None else total + y
    return total



def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--depth", type=int, default=8)
    args = ap.parse_args()
    n = args.size
    x = (np.random.default_rng(0).standard_normal((n, n)) * 0.1).astype(np.float32)
    with esgraph.GraphBuilder("branches") as b:
        y = branches(b.input("x", esgraph.f32, [n, n]), 4, args.depth)
    graph = b.build([y])
    out = np.empty_like(x)
    results = {}
    want = None
    for name, options in {"1 stream, 1 thread": dict(streams=1, threads=1), "1 stream": dict(streams=1, threads=2),
                          "2 streams": dict(streams=2, threads=2), "4 streams": dict(streams=4, threads=2)}.items():
        model = esgraph.compile(graph, **options)
        got = model(x)
        want = got if want is None else want
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)  # GEMM's sums split differently per thread count
        results[name] = median_ms(lambda: model.run([x], out=[out]), args.runs)
    print(f"4 branches x {args.depth} x (matmul {n}x{n}, tanh), threads=2 unless said")
    for name, ms in results.items():
        print(f"  {name:<20} {ms:8.3f} ms   speed-up over 1 stream {results['1 stream'] / ms:5.2f}x")
    print("  (4 streams need 4 free threads to run at once; with 2 they run in order)")


if __name__ == "__main__":
    main()
