"""Products with constant weights by the rows of a call, esgraph against ONNX Runtime on the same
ONNX file, every side on `--threads` threads (bench/timing.py's side by side). The model chains
`--steps` products of one weight matrix, each through tanh, as a recurrent layer's steps do:
y = tanh(y @ W), y [rows, width], W [width, width]. The kernel column is what esgraph ran the
products on (where oneDNN has only its gemm, AVX2 without AVX-512, calls of 2 to 32 rows run on
esgraph's packed GEMM and the others on oneDNN's gemm reading the constant in place).

    PYTHONPATH=build/default/python .venv/bin/python bench/products_by_rows.py [--rows 1,2,8,32,64,256] [--width 512]
"""
import argparse
import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import esgraph
import esgraph.onnx

import peers  # bench/peers.py
from timing import side_by_side  # bench/timing.py


def chained_products(path, rows, width, steps, weights):
    nodes, y = [], "x"
    for i in range(steps):
        nodes += [helper.make_node("MatMul", [y, "w"], [f"p{i}"]), helper.make_node("Tanh", [f"p{i}"], [f"y{i}"])]
        y = f"y{i}"
    graph = helper.make_graph(nodes, "products", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, width])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, [rows, width])],
                              [numpy_helper.from_array(weights, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def kernel_of(model):
    stats = model.stats()
    rows = stats.get("packed_matmuls", []) + stats.get("onednn_matmuls", []) + stats.get("row_matmuls", [])
    return ", ".join(sorted({r["implementation"] for r in rows})) + (" in place" if stats.get("weights_in_place") else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="1,2,8,32,64,256")
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=peers.THREADS)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    weights = (rng.standard_normal((args.width, args.width)) / np.sqrt(args.width)).astype(np.float32)
    print(f"{args.threads} threads on every side; {peers.versions()}; {args.steps} products of "
          f"{args.width}x{args.width} weights ({weights.nbytes >> 10} KiB) through tanh")
    print(f"{'rows':>5} {'esgraph ms':>11} {'ORT ms':>8} {'esg/ORT':>8}  kernel")
    for rows in [int(r) for r in args.rows.split(",")]:
        x = rng.standard_normal((rows, args.width)).astype(np.float32)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "products.onnx")
            chained_products(path, rows, args.width, args.steps, weights)
            model = esgraph.compile(esgraph.onnx.load(path), threads=args.threads)
            ort = peers.runner("ORT", path, [x], args.threads)
            want = x.astype(np.float64)
            for _ in range(args.steps):
                want = np.tanh(want @ weights.astype(np.float64))
            for got in [model.run([x])[0]] + ([ort()[0]] if ort else []):
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
            ms = side_by_side({"esgraph": lambda: model.run([x]), "ORT": ort}, args.rounds, args.runs)
        t_ort = ms.get("ORT")
        ratio = f"{ms['esgraph'] / t_ort:7.2f}x" if t_ort else f"{'-':>8}"
        print(f"{rows:5d} {ms['esgraph']:11.3f} {t_ort or float('nan'):8.3f} {ratio}  {kernel_of(model)}", flush=True)


if __name__ == "__main__":
    main()
