"""Two builds of esgraph side by side: the same workloads timed in alternating subprocesses (one
per build per round, the order swapped each round), so that the machine's load drifts over both
alike. Per build and workload: the median over rounds of each round's median; the ratio
after/before; and the noise, the largest spread (max/min) of one build's round medians.

    .venv/bin/python bench/before_after.py --before /tmp/before/build/default --after build/default [--rounds 5]
        [--only NAME-PART ...]
"""
import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


class Cycle:
    """A workload's input sets, one per call in turn (each set its own shapes)."""

    def __init__(self, sets):
        self.sets = sets


def workloads(only=None):
    """name -> (graph, inputs, compile options): built here, in the worker, against its build;
    those whose name contains a part of `only` when it is given."""
    import numpy as np

    import esgraph
    from esgraph import ops

    import models
    from elementwise_chain import chain

    rng = np.random.default_rng(0)

    def graph_of(name, fn, *arrays):
        with esgraph.GraphBuilder(name) as b:
            out = fn(*[b.input(f"x{i}", esgraph.f32, list(a.shape)) for i, a in enumerate(arrays)])
        return b.build([out]), list(arrays)

    def conv(x_shape, filters, kernel, groups):
        w = (rng.standard_normal((filters, x_shape[1] // groups, kernel, kernel)) * 0.1).astype(np.float32)
        b = rng.standard_normal(filters).astype(np.float32)
        x = rng.standard_normal(x_shape).astype(np.float32)
        return graph_of("conv", lambda t: ops.relu(ops.conv2d(t, w, bias=b, pads=[kernel // 2] * 4, groups=groups)), x)

    def tiny_chain(ops_count):
        x = rng.standard_normal(4).astype(np.float32)
        bias = np.full(4, 0.5, np.float32)

        def fn(t):
            for _ in range(ops_count // 4):
                t = ops.sigmoid(ops.relu((t + bias) * bias))
            return t
        return graph_of("tiny_chain", fn, x)

    def symbolic_mlp():
        w1, w2 = (rng.standard_normal((256, 256)) * 0.05).astype(np.float32), (rng.standard_normal((256, 64)) * 0.05).astype(np.float32)
        with esgraph.GraphBuilder("symbolic_mlp") as b:
            x = b.input("x", esgraph.f32, ["batch", 256])
            y = ops.relu(x @ w1) @ w2
        return b.build([y])

    def recurrent(kind):
        """nn.GRU(128, 256) or a 2-layer nn.LSTM, batch 8, 64 steps: exported by PyTorch (opset
        17), imported from ONNX, as bench/imported_models.py's."""
        import io

        import torch

        import esgraph.onnx
        torch.manual_seed(0)
        layer = torch.nn.GRU(128, 256, batch_first=True) if kind == "gru" else torch.nn.LSTM(128, 256, num_layers=2, batch_first=True)
        x = torch.randn(8, 64, 128)
        buffer = io.BytesIO()
        torch.onnx.export(layer.eval(), (x,), buffer, input_names=["x"], opset_version=17)
        return esgraph.onnx.load(buffer.getvalue()), [x.numpy()], {}

    def batches(*sizes):
        return Cycle([[rng.standard_normal((n, 256)).astype(np.float32)] for n in sizes])

    mlp_graph, _, mlp_x = models.mlp()
    encoder_graph, _, encoder_x = models.encoder()
    out = {
        "mlp 8x784": (mlp_graph, [mlp_x], {}),
        "encoder layer 8x128x512": (encoder_graph, [encoder_x], {}),
        "elementwise chain 4M": (*graph_of("chain", chain, rng.standard_normal(1 << 22).astype(np.float32)), {}),
        "layer_norm 1024x512": (*graph_of("ln", ops.layer_norm, rng.standard_normal((1024, 512)).astype(np.float32)), {}),
        "softmax 8192x128": (*graph_of("sm", ops.softmax, rng.standard_normal((8192, 128)).astype(np.float32)), {}),
        "conv 3x3 8x64x56x56 + relu": (*conv((8, 64, 56, 56), 64, 3, 1), {}),
        "depthwise 3x3 8x64x56x56 + relu": (*conv((8, 64, 56, 56), 64, 3, 64), {}),
        "1000 tiny ops unfused (per launch)": (*tiny_chain(1000), {"fusion": False}),
        # The plan cache: runs that miss the plan run last (found by shapes), and runs that bind
        # their size class's symbolic plan to a new size each time (17 sizes, 16 bindings kept).
        "symbolic mlp, 2 batches alternating": (symbolic_mlp(), batches(24, 40), {}),
        "symbolic mlp, a binding every run": (symbolic_mlp(), batches(*range(33, 50)), {}),
    }
    def wanted(name):
        return only is None or any(part in name for part in only)
    for name, kind in (("GRU h256 b8 s64 (ONNX)", "gru"), ("LSTM 2 layers h256 b8 s64 (ONNX)", "lstm")):
        if wanted(name):  # an export takes seconds: made only when asked for
            out[name] = recurrent(kind)
    return {name: w for name, w in out.items() if wanted(name)}


def worker(runs, only):
    sys.path.insert(0, HERE)
    import numpy as np

    import esgraph
    from timing import median_ms

    result = {}
    for name, (graph, inputs, options) in workloads(only).items():
        model = esgraph.compile(graph, **options)
        calls = inputs.sets if isinstance(inputs, Cycle) else [inputs]
        # The output buffers every timed run writes into, one set per input set.
        outs = [[np.empty_like(o) for o in model.run(c)] for c in calls]
        turn = itertools.cycle(range(len(calls)))
        result[name] = median_ms(lambda: (lambda i: model.run(calls[i], out=outs[i]))(next(turn)), runs)
    print(json.dumps(result))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the build tree of the baseline (its python/ holds esgraph, its c_api/ libesgraph)")
    ap.add_argument("--after", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=7, help="timed calls per workload per round (median)")
    ap.add_argument("--only", nargs="+", help="the workloads whose names contain one of these")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.runs, args.only)
    builds = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    rounds = {b: [] for b in builds}
    for r in range(args.rounds):
        for b in (["before", "after"] if r % 2 == 0 else ["after", "before"]):
            # Its own library too: a build tree's module finds libesgraph by an absolute path
            # into the tree it was built in, which a copied tree would still point at.
            env = dict(os.environ, PYTHONPATH=os.path.join(builds[b], "python"),
                       LD_LIBRARY_PATH=os.pathsep.join(filter(None, [os.path.join(builds[b], "c_api"), os.environ.get("LD_LIBRARY_PATH")])))
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--before", "-", "--after", "-", "--worker", "--runs",
                                   str(args.runs)] + (["--only", *args.only] if args.only else []),
                                  env=env, capture_output=True, text=True, check=True)
            rounds[b].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"{'workload':<36} {'before ms':>10} {'after ms':>10} {'after/before':>12} {'noise':>6}")
    for name in rounds["before"][0]:
        med = {b: statistics.median(r[name] for r in rounds[b]) for b in builds}
        noise = max(max(r[name] for r in rounds[b]) / min(r[name] for r in rounds[b]) for b in builds)
        print(f"{name:<36} {med['before']:>10.3f} {med['after']:>10.3f} {med['after'] / med['before']:>11.3f}x {noise:>5.2f}x")


if __name__ == "__main__":
    main()
