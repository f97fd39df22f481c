"""Graph-building throughput from Python, side by side in one run: esgraph (shape inference
on, at every call) vs onnx.helper (no inference, then with onnx.shape_inference) vs torch.fx
symbolic tracing (no shapes). The same chain of N nodes, medians of several runs.

    PYTHONPATH=build/default/python .venv/bin/python bench/build_throughput.py [--runs 5]
"""
import argparse
import statistics
import time

import esgraph
from esgraph import ops

CYCLE = 4  # add, mul, relu, sigmoid


def build_esgraph(n):
    with esgraph.GraphBuilder("chain") as b:
        x = b.input("x", esgraph.f32, ["batch", 64])
        bias = b.input("bias", esgraph.f32, [64])
        for _ in range(n // CYCLE):
            x = ops.sigmoid(ops.relu((x + bias) * bias))
    return b.build([x])


def build_esgraph_keywords(n):
    """Ops called with keyword options, the calls where binding arguments costs most."""
    with esgraph.GraphBuilder("keywords") as b:
        x = b.input("x", esgraph.f32, ["batch", 64])
        for _ in range(n // 2):
            x = ops.softmax(ops.leaky_relu(x, alpha=0.1), axis=-1)
    return b.build([x])


def build_onnx(n, infer):
    import onnx
    from onnx import TensorProto, helper
    nodes, prev = [], "x"
    for i in range(n // CYCLE):
        for k, (op, ins) in enumerate((("Add", [prev, "bias"]), ("Mul", None), ("Relu", None), ("Sigmoid", None))):
            out = f"t{i}_{k}"
            nodes.append(helper.make_node(op, ins or ([prev, "bias"] if op == "Mul" else [prev]), [out]))
            prev = out
    graph = helper.make_graph(
        nodes, "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64]),
         helper.make_tensor_value_info("bias", TensorProto.FLOAT, [64])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)])
    model = helper.make_model(graph)
    if infer:
        model = onnx.shape_inference.infer_shapes(model)
    return model


def build_fx(n):
    import torch
    import torch.fx

    class Chain(torch.nn.Module):
        def forward(self, x, bias):
            for _ in range(n // CYCLE):
                x = torch.sigmoid(torch.relu((x + bias) * bias))
            return x

    return torch.fx.symbolic_trace(Chain())


def median_rate(fn, n, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(n)
        times.append(time.perf_counter() - t0)
    return n / statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--esgraph-only", action="store_true", help="the esgraph rows only (to compare two builds)")
    args = ap.parse_args()
    if args.esgraph_only:
        for n in args.sizes:
            for name, fn in (("esgraph chain", build_esgraph), ("esgraph keyword options", build_esgraph_keywords)):
                print(f"{name:30} {n:7d} {median_rate(fn, n, args.runs):12,.0f} nodes/s")
        return
    peers = {
        "esgraph (Python)": build_esgraph,
        "onnx.helper": lambda n: build_onnx(n, infer=False),
        "onnx.helper + infer_shapes": lambda n: build_onnx(n, infer=True),
        "torch.fx symbolic_trace": build_fx,
    }
    print(f"{'builder':30} {'nodes':>7} {'nodes/s':>12} {'esgraph x':>10}")
    for n in args.sizes:
        rates = {name: median_rate(fn, n, args.runs) for name, fn in peers.items()}
        ours = rates["esgraph (Python)"]
        for name, rate in rates.items():
            print(f"{name:30} {n:7d} {rate:12,.0f} {ours / rate:9.1f}x")


if __name__ == "__main__":
    main()
