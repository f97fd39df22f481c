"""A transformer block split over the ranks of an MPI job, Megatron-style (esgraph.parallel):
each rank keeps its share of the attention heads and of the MLP's hidden units, and the block
needs two all_reduces. Every rank builds it from the same full weights, runs it, and compares
it with the whole block on this one rank.

    mpirun -np 2 .venv/bin/python samples/tensor_parallel.py

(On one process, without mpirun, the world has one rank and both blocks are the same.)
"""
import time

import numpy as np

import esgraph
from esgraph import ops, parallel

BATCH, SEQ, MODEL, HEADS, FF = 2, 64, 256, 8, 1024
size, rank = esgraph.world()
rng = np.random.default_rng(0)  # the same seed on every rank: the same full weights


def weight(*shape):
    return (rng.standard_normal(shape) * 0.05).astype(np.float32)


w = {name: weight(*shape) for name, shape in [("q", (MODEL, MODEL)), ("k", (MODEL, MODEL)), ("v", (MODEL, MODEL)),
                                               ("o", (MODEL, MODEL)), ("bo", (MODEL,)), ("fc1", (MODEL, FF)),
                                               ("b1", (FF,)), ("fc2", (FF, MODEL)), ("b2", (MODEL,))]}
gamma, beta = np.ones(MODEL, np.float32), weight(MODEL)


def block(x, attention, mlp):
    h = ops.layer_norm(x + attention(x), scale=gamma, bias=beta)
    return ops.layer_norm(h + mlp(h), scale=gamma, bias=beta)


def whole_attention(x):
    ctx = ops.attention(x @ w["q"], x @ w["k"], x @ w["v"], num_heads=HEADS)
    return ctx @ w["o"] + w["bo"]


def whole_mlp(x):
    return ops.gelu(x @ w["fc1"] + w["b1"]) @ w["fc2"] + w["b2"]


def build(split):
    with esgraph.GraphBuilder("tensor_parallel" if split else "one_rank") as b:
        x = b.input("x", esgraph.f32, [BATCH, SEQ, MODEL])
        if split:
            attention = parallel.ParallelAttention(w["q"], w["k"], w["v"], w["o"], HEADS, bo=w["bo"])
            mlp = parallel.ParallelMLP(w["fc1"], w["b1"], w["fc2"], w["b2"])
            y = block(x, attention, mlp)
        else:
            y = block(x, whole_attention, whole_mlp)
    return esgraph.compile(b.build([y]))


def timed(model, feeds, runs=20):
    model.run(feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        model.run(feeds)
        times.append(time.perf_counter() - t)
    return sorted(times)[runs // 2]


x = rng.standard_normal((BATCH, SEQ, MODEL)).astype(np.float32)  # the same input on every rank
split, whole = build(True), build(False)
got = split.run({"x": x})[0]
want = whole.run({"x": x})[0]
diff = float(np.abs(got - want).max())
stats = split.stats()
print(f"rank {rank} of {size}: {stats['collectives']} all_reduces of {stats['collective_bytes']} bytes, "
      f"largest difference from the whole block {diff:.2e}; median run {timed(split, {'x': x}) * 1e3:.2f} ms split, "
      f"{timed(whole, {'x': x}) * 1e3:.2f} ms whole", flush=True)
if diff > 1e-4:
    raise SystemExit(f"rank {rank}: the split block differs from the whole one by {diff}")
