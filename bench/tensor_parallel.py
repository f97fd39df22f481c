"""The tensor-parallel transformer block of samples/tensor_parallel.py over the ranks of an MPI job:
its time with compute and collectives overlapped, against the larger of its compute alone (the
same graph with each all_reduce left out) and its collectives alone (the same all_reduces, nothing
else). The batch runs as `micro` independent micro-batches in one graph, so that one's all_reduce
can run while the next one computes.

    mpirun -np 2 .venv/bin/python bench/tensor_parallel.py

Rank 0 prints medians of 7 blocks of runs (the slower rank's), measured side by side in one run.
"""
import time

import numpy as np

import esgraph
from esgraph import ops, parallel

BATCH, SEQ, MODEL, HEADS, FF = 8, 128, 512, 8, 2048
size, rank = esgraph.world()
rng = np.random.default_rng(0)


def weight(*shape):
    return (rng.standard_normal(shape) * 0.05).astype(np.float32)


W = {name: weight(*shape) for name, shape in [("q", (MODEL, MODEL)), ("k", (MODEL, MODEL)), ("v", (MODEL, MODEL)),
                                               ("o", (MODEL, MODEL)), ("bo", (MODEL,)), ("fc1", (MODEL, FF)),
                                               ("b1", (FF,)), ("fc2", (FF, MODEL)), ("b2", (MODEL,))]}
GAMMA, BETA = np.ones(MODEL, np.float32), weight(MODEL)


class ComputeOnly(parallel.Group):
    """The same shards, no all_reduce: the block's compute alone."""

    def all_reduce(self, x):
        return x


def block(x, group):
    attention = parallel.ParallelAttention(W["q"], W["k"], W["v"], W["o"], HEADS, bo=W["bo"], group=group)
    mlp = parallel.ParallelMLP(W["fc1"], W["b1"], W["fc2"], W["b2"], group=group)
    h = ops.layer_norm(x + attention(x), scale=GAMMA, bias=BETA)
    return ops.layer_norm(h + mlp(h), scale=GAMMA, bias=BETA)


def blocks(group, micro):
    with esgraph.GraphBuilder("tp") as b:
        x = b.input("x", esgraph.f32, [BATCH, SEQ, MODEL])
        pieces = ops.split(x, sizes=[BATCH // micro] * micro, axis=0) if micro > 1 else [x]
        outs = [block(p, group) for p in pieces]
    return esgraph.compile(b.build(outs))


def collectives_alone(micro):
    with esgraph.GraphBuilder("allreduce") as b:
        xs = [b.input(f"x{i}", esgraph.f32, [BATCH // micro, SEQ, MODEL]) for i in range(2 * micro)]
        outs = [ops.all_reduce(x) for x in xs]
    return esgraph.compile(b.build(outs))


def median_ms(model, feeds, runs):
    model.run(feeds)
    times = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(runs):
            model.run(feeds)
        times.append((time.perf_counter() - t) / runs)
    return sorted(times)[3] * 1e3


def slowest(value):
    """The largest value over the ranks (a block ends when its slowest rank does)."""
    with esgraph.GraphBuilder("max") as b:
        v = b.input("v", esgraph.f64, [1])
        out = ops.all_reduce(v, op="max")
    return float(esgraph.compile(b.build([out])).run({"v": np.array([value])})[0][0])


x = rng.standard_normal((BATCH, SEQ, MODEL)).astype(np.float32)
group = parallel.Group()
if rank == 0:
    print(f"{size} ranks; block batch {BATCH}, seq {SEQ}, model {MODEL}, {HEADS} heads, ff {FF}; median ms of 7 blocks")
    print(f"{'micro-batches':>14} {'overlapped':>11} {'compute':>9} {'collectives':>12} {'ratio':>6}")
for micro in (1, 2, 4):
    both = slowest(median_ms(blocks(group, micro), {"x": x}, 5))
    compute = slowest(median_ms(blocks(ComputeOnly(), micro), {"x": x}, 5))
    feeds = {f"x{i}": x[: BATCH // micro] for i in range(2 * micro)}
    comm = slowest(median_ms(collectives_alone(micro), feeds, 5))
    if rank == 0:
        print(f"{micro:>14} {both:>11.2f} {compute:>9.2f} {comm:>12.2f} {both / max(compute, comm):>6.2f}", flush=True)
