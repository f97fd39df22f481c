"""A BERT-base-like encoder (PyTorch's TransformerEncoder: hidden 768, 12 heads, feed-forward
3072, random weights) dynamically quantized the way ONNX Runtime's `quantize_dynamic` lays it
out, run by esgraph and ONNX Runtime side by side on `--threads` threads each (bench/timing.py's
method), with esgraph's and ORT's f32 times on the float model beside.

The quantized file is made here (ORT's own tool needs an `onnx` newer than Debian's): every
MatMul with a constant weight becomes DynamicQuantizeLinear(x) → MatMulInteger(x_q, w_s8,
x_zero_point) → Cast → Mul(x_scale · w_scale), with s8 weights, one scale for the tensor and
zero point 0 (ORT's defaults: QInt8 weights, per tensor, no reduce_range); the activations'
products (attention's scores and context) stay in f32, as they do there.

Accuracy: each side against the quantized graph's own semantics (ORT with its optimizations
off running it with each MatMulInteger computed exactly in f64: ORT's own saturates without
VNNI), as the largest difference over the output's range.

    PYTHONPATH=build/default/python:bench .venv/bin/python bench/int8_encoder.py [--layers 12]
        [--tokens 128] [--batch 1] [--runs 9] [--rounds 3]
"""
import argparse
import os
import tempfile
import warnings

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper

import esgraph

import peers  # bench/peers.py
from int8_models import largest_error  # bench/int8_models.py
from timing import side_by_side  # bench/timing.py


def encoder(layers, hidden=768, heads=12, feed_forward=3072):
    layer = torch.nn.TransformerEncoderLayer(hidden, heads, feed_forward, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()
    # The layers are copies of one: weights of their own, or the exporter keeps one set for all.
    for p in model.parameters():
        if p.dim() == 2:
            torch.nn.init.xavier_uniform_(p)
    return model


def quantize_dynamic(model):
    """`model` with each MatMul of a constant 2-D weight in ORT's dynamic form (module docstring)."""
    graph = model.graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    new_inits, nodes = [], []

    def add_init(name, value):
        new_inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    for node in graph.node:
        w = inits.get(node.input[1]) if node.op_type == "MatMul" else None
        if w is None or w.ndim != 2:
            nodes.append(node)
            continue
        x, name, out = node.input[0], node.input[1], node.output[0]
        scale = np.float32(np.abs(w).max() / 127.0 or 1.0)
        add_init(f"{name}_s8", np.clip(np.rint(w / scale), -127, 127).astype(np.int8))
        add_init(f"{name}_zero", np.int8(0))
        add_init(f"{name}_scale", scale)
        nodes += [
            helper.make_node("DynamicQuantizeLinear", [x], [f"{out}_xq", f"{out}_xs", f"{out}_xz"]),
            helper.make_node("MatMulInteger", [f"{out}_xq", f"{name}_s8", f"{out}_xz", f"{name}_zero"], [f"{out}_i32"]),
            helper.make_node("Cast", [f"{out}_i32"], [f"{out}_f32"], to=onnx.TensorProto.FLOAT),
            helper.make_node("Mul", [f"{out}_xs", f"{name}_scale"], [f"{out}_scale"]),
            helper.make_node("Mul", [f"{out}_f32", f"{out}_scale"], [out]),
        ]
    used = {i for n in nodes for i in n.input}
    kept = [i for i in graph.initializer if i.name in used]
    q_graph = helper.make_graph(nodes, graph.name + "_dynamic", list(graph.input), list(graph.output), kept + new_inits)
    q_model = helper.make_model(q_graph, opset_imports=list(model.opset_import))
    onnx.checker.check_model(q_model)
    return q_model


def exact_reference(model):
    """`model` with each MatMulInteger computed in f64 (exact for these sums) and cast to int32:
    ONNX Runtime's own MatMulInteger saturates pairs of u8 x s8 products in 16 bits on CPUs
    without VNNI (docs/quantization.md), so it cannot serve as the reference there."""
    nodes = []
    for node in model.graph.node:
        if node.op_type != "MatMulInteger":
            nodes.append(node)
            continue
        a, b, a_zero, b_zero = node.input
        out = node.output[0]
        wide = {}
        for name in (a, b, a_zero, b_zero):
            wide[name] = f"{out}_{name}_f64"
            nodes.append(helper.make_node("Cast", [name], [wide[name]], to=onnx.TensorProto.DOUBLE))
        nodes += [
            helper.make_node("Sub", [wide[a], wide[a_zero]], [f"{out}_a_f64"]),
            helper.make_node("Sub", [wide[b], wide[b_zero]], [f"{out}_b_f64"]),
            helper.make_node("MatMul", [f"{out}_a_f64", f"{out}_b_f64"], [f"{out}_f64"]),
            helper.make_node("Cast", [f"{out}_f64"], [out], to=onnx.TensorProto.INT32),
        ]
    graph = helper.make_graph(nodes, model.graph.name, list(model.graph.input), list(model.graph.output),
                              list(model.graph.initializer))
    return helper.make_model(graph, opset_imports=list(model.opset_import))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=peers.THREADS)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    args = ap.parse_args()
    torch.manual_seed(0)
    x = torch.randn(args.batch, args.tokens, 768)
    print(f"{args.threads} threads on every side; {peers.versions()}; {args.layers} layers, "
          f"{args.batch} x {args.tokens} tokens")
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f32_path, int8_path = os.path.join(d, "f32.onnx"), os.path.join(d, "int8.onnx")
        torch.onnx.export(encoder(args.layers), (x,), f32_path, dynamo=False, opset_version=13, input_names=["x"])
        q_model = quantize_dynamic(onnx.load(f32_path))
        onnx.save(q_model, int8_path)
        quantized = sum(n.op_type == "MatMulInteger" for n in q_model.graph.node)
        xn = x.numpy()
        feeds = {"x": xn}
        int8 = esgraph.compile(int8_path, threads=args.threads)
        f32 = esgraph.compile(f32_path, threads=args.threads)
        ort_int8 = peers.ort_runner(int8_path, [xn], args.threads)
        ort_f32 = peers.ort_runner(f32_path, [xn], args.threads)
        options = peers.onnxruntime.SessionOptions()
        options.graph_optimization_level = peers.onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        reference = peers.onnxruntime.InferenceSession(exact_reference(q_model).SerializeToString(), options,
                                                       providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        errors = largest_error(int8.run(feeds)[0], reference), largest_error(ort_int8()[0], reference)
        times = side_by_side({"int8": lambda: int8.run(feeds), "ORT int8": ort_int8,
                              "f32": lambda: f32.run(feeds), "ORT f32": ort_f32}, rounds=args.rounds, runs=args.runs)
    print(f"{quantized} quantized products; {int8.stats()['launches']} launches")
    print(f"{'esg int8':>9} {'ORT int8':>9} {'esg f32':>9} {'ORT f32':>9} {'esg/ORT int8':>12} {'int8/f32':>8} "
          f"{'esg err':>8} {'ORT err':>8}  (ms; err: of the output's range)")
    print(f"{times['int8']:9.2f} {times['ORT int8']:9.2f} {times['f32']:9.2f} {times['ORT f32']:9.2f} "
          f"{times['int8'] / times['ORT int8']:12.2f} {times['int8'] / times['f32']:8.2f} {errors[0]:8.4f} {errors[1]:8.4f}")


if __name__ == "__main__":
    main()
