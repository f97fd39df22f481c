"""torchvision's CNNs (random weights, no download) in ONNX Runtime's static QDQ layout, run by
esgraph and ONNX Runtime side by side on `--threads` threads each (bench/timing.py's method), and
esgraph's own f32 time on the float model beside.

The QDQ file is made here the way ORT's static quantizer lays it out (its own tool needs an
`onnx` newer than Debian's): every activation a Conv, Gemm, Add, MaxPool or GlobalAveragePool reads is quantized to u8 with
one scale and zero point from min-max calibration (ORT on a few random images), each filter to s8
with one scale per output channel and zero point 0, each bias to int32 with the scale x_scale ·
w_scale, as QuantizeLinear → DequantizeLinear pairs around the float ops.

`--reduce-range` quantizes the filters to 7 bits ([-64, 64]), as ORT's `reduce_range` does for
CPUs without VNNI: there neither side's int8 products saturate, and esgraph needs no split
filters (docs/quantization.md).

Accuracy: every side against the QDQ graph's own f32 semantics (ORT with its optimizations off,
which runs the Q/DQ pairs as written), as the largest difference over the output's range.

    PYTHONPATH=build/default/python .venv/bin/python bench/int8_models.py [--models resnet18,mobilenet_v2]
        [--batches 1] [--runs 9] [--rounds 3] [--reduce-range]
"""
import argparse
import os
import tempfile
import warnings

import numpy as np
import onnx
import torch
import torchvision.models as tvm
from onnx import helper, numpy_helper

import esgraph
import esgraph.onnx

import peers  # bench/peers.py
from timing import side_by_side  # bench/timing.py

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0"]
READERS = {"Conv": [0], "Gemm": [0], "Add": [0, 1], "MaxPool": [0], "GlobalAveragePool": [0]}  # what gets Q/DQ


def calibrate(model, images):
    """Each tensor's min and max over `images`, from ORT running the f32 model with every
    node output exposed."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    known = {o.name for o in probe.graph.output}
    for node in probe.graph.node:
        for name in node.output:
            if name and name not in known:
                probe.graph.output.append(helper.make_empty_tensor_value_info(name))
    session = peers.ort_session(probe.SerializeToString())
    names = [o.name for o in session.get_outputs()]
    ranges = {}
    for image in images:
        feeds = {session.get_inputs()[0].name: image}
        for name, value in zip(names, session.run(None, feeds)):
            lo, hi = float(value.min()), float(value.max())
            old = ranges.get(name, (lo, hi))
            ranges[name] = (min(lo, old[0]), max(hi, old[1]))
    ranges[session.get_inputs()[0].name] = (min(float(i.min()) for i in images), max(float(i.max()) for i in images))
    return ranges


def u8_parameters(lo, hi):
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = np.float32((hi - lo) / 255.0 or 1.0)
    return scale, np.uint8(np.clip(np.rint(-lo / scale), 0, 255))


def quantize(model, ranges, weight_max=127):
    """The f32 model in QDQ form (module docstring)."""
    graph = model.graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    new_inits, new_nodes, quantized, scales = [], [], {}, {}

    def add_init(name, value):
        new_inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def activation(name):
        """The name of `name` quantized and dequantized (once per tensor)."""
        if name not in quantized:
            scale, zero = u8_parameters(*ranges[name])
            scales[name] = scale
            s, z = add_init(f"{name}_scale", scale), add_init(f"{name}_zero", zero)
            new_nodes.append(helper.make_node("QuantizeLinear", [name, s, z], [f"{name}_q"]))
            new_nodes.append(helper.make_node("DequantizeLinear", [f"{name}_q", s, z], [f"{name}_dq"]))
            quantized[name] = f"{name}_dq"
        return quantized[name]

    def weights(node, name, axis):
        w = inits[name]
        if node.op_type == "Gemm" and any(a.name == "transB" and a.i for a in node.attribute):
            axis = 0
        moved = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
        scale = (np.abs(moved).max(axis=1) / weight_max).astype(np.float32)
        scale[scale == 0] = 1.0
        q = np.clip(np.rint(w / scale.reshape([-1 if d == axis else 1 for d in range(w.ndim)])), -weight_max, weight_max).astype(np.int8)
        s, z = add_init(f"{name}_scale", scale), add_init(f"{name}_zero", np.zeros(len(scale), np.int8))
        add_init(f"{name}_int8", q)
        new_nodes.append(helper.make_node("DequantizeLinear", [f"{name}_int8", s, z], [f"{name}_dq"], axis=axis))
        return f"{name}_dq", scale

    for node in graph.node:
        if node.op_type in READERS and all(i in ranges for k, i in enumerate(node.input) if k in READERS[node.op_type]):
            inputs = list(node.input)
            for k in READERS[node.op_type]:
                inputs[k] = activation(inputs[k])
            if node.op_type in ("Conv", "Gemm") and inputs[1] in inits:
                inputs[1], w_scale = weights(node, node.input[1], 0 if node.op_type == "Conv" else 1)
                if len(inputs) > 2 and inputs[2] in inits:
                    b_scale = (scales[node.input[0]] * w_scale).astype(np.float32)
                    b = np.clip(np.rint(inits[node.input[2]] / b_scale), -2**31, 2**31 - 1).astype(np.int32)
                    add_init(f"{node.input[2]}_int32", b), add_init(f"{node.input[2]}_scale", b_scale)
                    new_nodes.append(helper.make_node("DequantizeLinear", [f"{node.input[2]}_int32", f"{node.input[2]}_scale"],
                                                      [f"{node.input[2]}_dq"], axis=0))
                    inputs[2] = f"{node.input[2]}_dq"
            node = helper.make_node(node.op_type, inputs, list(node.output), name=node.name, **{
                a.name: helper.get_attribute_value(a) for a in node.attribute})
        new_nodes.append(node)
    # Q/DQ nodes come right after the node producing their input: sort topologically.
    produced_by = {o: k for k, n in enumerate(new_nodes) for o in n.output}
    order, seen = [], set()

    def visit(k):
        if k in seen:
            return
        seen.add(k)
        for i in new_nodes[k].input:
            if i in produced_by:
                visit(produced_by[i])
        order.append(new_nodes[k])

    for k in range(len(new_nodes)):
        visit(k)
    used = {i for n in order for i in n.input}
    kept = [i for i in graph.initializer if i.name in used]
    q_graph = helper.make_graph(order, graph.name + "_qdq", list(graph.input), list(graph.output), kept + new_inits)
    q_model = helper.make_model(q_graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(q_model)
    return q_model


def largest_error(got, want):
    return float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=peers.THREADS)
    ap.add_argument("--batches", default="1")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--reduce-range", action="store_true", help="7-bit filters")
    args = ap.parse_args()
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    print(f"{args.threads} threads on every side; {peers.versions()}; filters in {7 if args.reduce_range else 8} bits")
    print(f"{'model':16} {'batch':>5} {'esg int8':>9} {'ORT int8':>9} {'esg f32':>9} {'esg/ORT':>8} {'int8/f32':>8} "
          f"{'esg err':>8} {'ORT err':>8} {'int8 convs':>10} {'launches':>8}  (ms; err: of the output's range)")
    for name in args.models.split(","):
        module = getattr(tvm, name)().eval()
        for batch in map(int, args.batches.split(",")):
            x = torch.randn(batch, 3, 224, 224)
            with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                f32_path, qdq_path = os.path.join(d, "f32.onnx"), os.path.join(d, "qdq.onnx")
                torch.onnx.export(module, (x,), f32_path, dynamo=False, opset_version=13)
                f32_model = onnx.load(f32_path)
                images = [rng.standard_normal((batch, 3, 224, 224)).astype(np.float32) for _ in range(4)]
                onnx.save(quantize(f32_model, calibrate(f32_model, images), 64 if args.reduce_range else 127), qdq_path)
                xn = images[0]
                int8 = esgraph.compile(qdq_path, threads=args.threads)
                f32 = esgraph.compile(f32_path, threads=args.threads)
                ort = peers.ort_runner(qdq_path, [xn], args.threads)
                feeds = {onnx.load(qdq_path).graph.input[0].name: xn}
                options = peers.onnxruntime.SessionOptions()
                options.graph_optimization_level = peers.onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
                reference = peers.onnxruntime.InferenceSession(qdq_path, options, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
                errors = largest_error(int8.run(feeds)[0], reference), largest_error(ort()[0], reference)
                times = side_by_side({"int8": lambda: int8.run(feeds), "ORT": ort, "f32": lambda: f32.run(feeds)},
                                     rounds=args.rounds, runs=args.runs)
                facts = int8.stats()
                convs = sum(c["count"] for c in facts.get("onednn_convolutions", []) if c["precision"].startswith("int8"))
                print(f"{name:16} {batch:5} {times['int8']:9.2f} {times['ORT']:9.2f} {times['f32']:9.2f} "
                      f"{times['int8'] / times['ORT']:8.2f} {times['int8'] / times['f32']:8.2f} {errors[0]:8.4f} {errors[1]:8.4f} "
                      f"{convs:10} {facts['launches']:8}", flush=True)


if __name__ == "__main__":
    main()
