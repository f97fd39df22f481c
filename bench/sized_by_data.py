"""Sizes the data decides, measured side by side with PyTorch (eager) and ONNX Runtime (CPU):

  rows:  the rows of x [n, 256] whose mean passes 0.5 (about half), projected by a 256x256
         matrix and softmaxed: nonzero in the middle, so esgraph runs two stages with the
         nonzero on the host between them; torch runs torch.nonzero, ORT its NonZero.
  nms:   non_max_suppression of n boxes of one class (at most 100 kept, IoU 0.5): esgraph's
         kernel, torchvision.ops.nms, ORT's NonMaxSuppression.
  counts: 500 runs of `rows` at n = 1024 whose counts all differ: plans compiled, bindings,
         and how the process's resident memory grew.

Each time is the median of --runs calls after a warm-up; esgraph, then torch, then ORT are
measured in phases of their own, so that one's idle threads do not compete with the other's,
every one on esgraph's thread count (every core); the ratios are esgraph / peer.

  PYTHONPATH=build/default/python .venv/bin/python bench/sized_by_data.py [--runs 30]
"""
import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402
from timing import median_ms, resident_mib  # noqa: E402

import esgraph  # noqa: E402
import esgraph.onnx  # noqa: E402
from esgraph import ops  # noqa: E402

WIDTH = 256
RNG = np.random.default_rng(0)


def rows_graph():
    w = (RNG.standard_normal((WIDTH, WIDTH)) / 16).astype(np.float32)
    bias = RNG.standard_normal(WIDTH).astype(np.float32)
    with esgraph.GraphBuilder("rows") as b:
        x = b.input("x", esgraph.f32, ["n", WIDTH])
        keep = ops.squeeze(ops.nonzero(ops.reduce_mean(x, axes=[1]) > 0.5), axes=[0])
        y = ops.softmax(ops.gather(x, keep) @ w + bias, axis=-1)
    return b.build([y]), w, bias


def nms_graph(n):
    with esgraph.GraphBuilder("nms") as b:
        boxes = b.input("boxes", esgraph.f32, [1, n, 4])
        scores = b.input("scores", esgraph.f32, [1, 1, n])
        kept = ops.non_max_suppression(boxes, scores, 100, iou_threshold=0.5)
    return b.build([kept])


def ort_ms(graph, inputs, runs):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.onnx")
        esgraph.onnx.save(graph, path)
        run = peers.runner("ORT", path, inputs)
        return median_ms(run, runs) if run else None


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def bench_rows(torch, runs):
    graph, w, bias = rows_graph()
    model = esgraph.compile(graph)
    tw, tb = torch.from_numpy(w), torch.from_numpy(bias)

    def torch_rows(x):
        with torch.no_grad():
            keep = torch.nonzero(x.mean(1) > 0.5).squeeze(1)
            return torch.softmax(x[keep] @ tw + tb, -1)

    sizes = [256, 2048, 16384]
    xs = [(RNG.random((n, WIDTH)) + RNG.standard_normal((n, 1)) * 0.02).astype(np.float32) for n in sizes]
    for x in xs:
        np.testing.assert_allclose(model(x), torch_rows(torch.from_numpy(x)).numpy(), rtol=1e-4, atol=1e-5)
    # Each library in a phase of its own, so that one's idle threads never compete with the other's.
    ours = [median_ms(lambda: model(x), runs) for x in xs]
    theirs = [median_ms(lambda: torch_rows(torch.from_numpy(x)), runs) for x in xs]
    onnx = [ort_ms(graph, x, runs) for x in xs]
    print("rows: n, esgraph ms, torch ms, ORT ms, esgraph/torch, esgraph/ORT")
    for n, a, t, o in zip(sizes, ours, theirs, onnx):
        print(f"  {n}, {a:.3f}, {t:.3f}, {o if o is None else round(o, 3)}, {ratio(a, t)}, {ratio(a, o)}")


def bench_nms(torch, runs):
    import torchvision.ops
    sizes = [200, 1000, 4000]
    cases = []
    for n in sizes:
        corner = RNG.random((n, 2)) * 100
        size = RNG.random((n, 2)) * 20 + 1
        boxes = np.concatenate([corner, corner + size], 1).astype(np.float32)[None]  # (y1, x1, y2, x2)
        scores = RNG.random((1, 1, n)).astype(np.float32)
        graph = nms_graph(n)
        model = esgraph.compile(graph)
        xyxy = torch.from_numpy(boxes[0][:, [1, 0, 3, 2]].copy())
        ts = torch.from_numpy(scores[0, 0])
        np.testing.assert_array_equal(model(boxes, scores)[:, 2], torchvision.ops.nms(xyxy, ts, 0.5)[:100].numpy())
        cases.append((graph, model, boxes, scores, xyxy, ts))
    ours = [median_ms(lambda: c[1](c[2], c[3]), runs) for c in cases]
    theirs = [median_ms(lambda: torchvision.ops.nms(c[4], c[5], 0.5)[:100], runs) for c in cases]
    onnx = [ort_ms(c[0], [c[2], c[3]], runs) for c in cases]
    print("nms: n, esgraph ms, torchvision ms, ORT ms, esgraph/torchvision, esgraph/ORT")
    for n, a, t, o in zip(sizes, ours, theirs, onnx):
        print(f"  {n}, {a:.3f}, {t:.3f}, {o if o is None else round(o, 3)}, {ratio(a, t)}, {ratio(a, o)}")


def bench_counts():
    graph, _, _ = rows_graph()
    model = esgraph.compile(graph)
    x = RNG.random((1024, WIDTH)).astype(np.float32)
    model(x)
    before = resident_mib()
    counts = set()
    for k in range(500):
        x[:, 0] = 0  # rows [0, 100 + k) pass, the rest do not
        x[: 100 + k, 0] = WIDTH
        x[100 + k:, 0] = -WIDTH
        counts.add(model(x).shape[0])
    stats = model.stats()
    print(f"counts: {len(counts)} distinct counts, plans {stats['plans']}, bindings {stats['bindings']}, "
          f"stages {stats['stages']}, resident +{resident_mib() - before:.1f} MiB")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    import torch
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    bench_rows(torch, args.runs)
    bench_nms(torch, args.runs)
    bench_counts()


if __name__ == "__main__":
    main()
