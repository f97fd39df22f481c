"""A model on a shared machine: a GPT-style decoder step (4 layers, width 256, 4 heads, a KV
cache of 64 positions, batch 1), or ONNX models (`--onnx`, each with ONNX Runtime beside it, on
esgraph's default thread count), run with one thread and with the default thread count, first on an idle machine and then while
another process keeps one core busy. Reports the median and the 90th percentile of single runs
(what a loaded machine does to a model is in the tail), and the CPU time the process burns in
the second after its last run (threads left spinning would show there).

    PYTHONPATH=build/default/python .venv/bin/python bench/loaded.py [--runs 200] [--onnx a.onnx,b.onnx]
"""
import argparse
import multiprocessing
import os
import statistics
import time

import numpy as np

import esgraph
import esgraph.onnx
import peers  # bench/peers.py
from timing import median_ms  # bench/timing.py
from esgraph import ops

rng = np.random.default_rng(0)


def w(*shape):
    return (rng.standard_normal(shape) * 0.05).astype(np.float32)


def decoder_step(layers=4, dm=256, heads=4, past=64):
    dh = dm // heads
    with esgraph.GraphBuilder("decoder_step") as b:
        x = b.input("x", esgraph.f32, [1, 1, dm])
        past_k = [b.input(f"k{i}", esgraph.f32, [1, heads, past, dh]) for i in range(layers)]
        past_v = [b.input(f"v{i}", esgraph.f32, [1, heads, past, dh]) for i in range(layers)]

        def split(t):
            return ops.transpose(ops.reshape(t, [1, 1, heads, dh]), perm=[0, 2, 1, 3])

        h = x
        for i in range(layers):
            n = ops.layer_norm(h)
            q, k, v = split(n @ w(dm, dm)), split(n @ w(dm, dm)), split(n @ w(dm, dm))
            k, v = ops.concat([past_k[i], k], 2), ops.concat([past_v[i], v], 2)
            a = ops.softmax(ops.matmul(q, k, transpose_b=True) * (1 / np.sqrt(dh)))
            h = h + ops.reshape(ops.transpose(a @ v, perm=[0, 2, 1, 3]), [1, 1, dm]) @ w(dm, dm)
            h = h + ops.gelu(ops.layer_norm(h) @ w(dm, 4 * dm) + w(4 * dm)) @ w(4 * dm, dm)
    inputs = [w(1, 1, dm)] + [w(1, heads, past, dh) for _ in range(2 * layers)]
    return b.build([h]), inputs


def spin():
    while True:
        pass


def times_ms(model, inputs, runs):
    for _ in range(10):
        model.run(inputs)
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        model.run(inputs)
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out), sorted(out)[int(0.9 * len(out))]


def idle_cpu_ms():
    """The CPU time this process burns in one second of doing nothing (after a run)."""
    start = time.process_time()
    time.sleep(1.0)
    return (time.process_time() - start) * 1e3


def measure(name, graph, inputs, runs, onnx_path=None):
    models = {"threads=1": esgraph.compile(graph, threads=1), "default threads": esgraph.compile(graph)}
    print(f"{name}, {models['threads=1'].stats()['launches']} launches; median / p90 of {runs} runs, ms")
    print(f"{'':18} {'idle':>16} {'one core busy':>16}")
    rows = {label: [times_ms(m, inputs, runs)] for label, m in models.items()}
    idle = idle_cpu_ms()
    in_ort = peers.runner("ORT", onnx_path, inputs) if onnx_path else None
    if in_ort:
        rows["ONNX Runtime"] = [(median_ms(in_ort, runs), float("nan"))]
    busy = multiprocessing.Process(target=spin, daemon=True)
    busy.start()
    try:
        time.sleep(0.2)
        for label, m in models.items():
            rows[label].append(times_ms(m, inputs, runs))
        if in_ort:
            rows["ONNX Runtime"].append((median_ms(in_ort, runs), float("nan")))
    finally:
        busy.terminate()
    for label, cells in rows.items():
        print(f"{label:18} " + " ".join(f"{med:7.2f} / {p90:6.2f}" for med, p90 in cells))
    print(f"CPU burnt in the idle second after the runs: {idle:.1f} ms")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--onnx", default="", help="comma-separated ONNX files (one f32 input [1, 3, 224, 224])")
    args = ap.parse_args()
    if not args.onnx:
        graph, inputs = decoder_step()
        measure("decoder step", graph, inputs, args.runs)
    for path in filter(None, args.onnx.split(",")):
        graph = esgraph.onnx.load(path)
        x = np.random.default_rng(0).random((1, 3, 224, 224)).astype(np.float32)
        measure(os.path.basename(path), graph, [x], args.runs, path)


if __name__ == "__main__":
    main()
