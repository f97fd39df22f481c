"""quantized_add (ONNX Runtime's QLinearAdd; a residual connection's DequantizeLinear → Add (→
Relu or Clip) → QuantizeLinear) against numpy's f32 emulation of the QDQ graph: each dequantized
value, their sum and the division rounded to f32, half to even, saturated. Bit for bit, on the
CPU's f32 rows and on the reference kernel (every operand constant: it folds), over u8 and i8
operands and results, folded Relu and Clip bounds, broadcasting and per-channel parameters.
The compile pass makes it of the QDQ pattern (and leaves a dequantize that others read); ONNX:
com.microsoft QLinearAdd imported and checked against ONNX Runtime, quantized_add exported as
QDQ nodes (or elementwise arithmetic for per-channel parameters) that ONNX Runtime runs to the
same values."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import esgraph
import esgraph.onnx
from esgraph import ops

from numerics import rng_for

U8, I8, F32 = np.uint8, np.int8, np.float32
ONNX_TYPE = {U8: TensorProto.UINT8, I8: TensorProto.INT8}


def qdq_sum(a, sa, za, b, sb, zb, sy, zy, low=-np.inf, high=np.inf):
    """The QDQ graph's result in numpy's f32 arithmetic."""
    da = ((a.astype(F32) - F32(za)) * F32(sa)).astype(F32)
    db = ((b.astype(F32) - F32(zb)) * F32(sb)).astype(F32)
    s = np.clip((da + db).astype(F32), F32(low), F32(high))
    q = np.round((s / F32(sy)).astype(F32)) + F32(zy)
    info = np.iinfo(np.asarray(zy).dtype)
    return np.clip(q, info.min, info.max).astype(np.asarray(zy).dtype)


def full(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


CASES = [  # a, b and y dtypes; the shapes of b and of the parameters; the folded bounds
    (U8, U8, U8, (2, 16, 9, 9), (), (-np.inf, np.inf)),
    (U8, U8, U8, (2, 16, 9, 9), (), (0.0, np.inf)),
    (I8, I8, I8, (2, 16, 9, 9), (), (-1.0, 3.0)),
    (U8, I8, U8, (16, 1, 1), (), (0.0, 6.0)),
    (I8, U8, I8, (2, 16, 9, 9), (16, 1, 1), (-np.inf, np.inf)),
]


@pytest.mark.parametrize("a_type, b_type, y_type, b_shape, parameter_shape, bounds", CASES)
def test_bit_for_bit_the_qdq_graphs_f32_arithmetic(a_type, b_type, y_type, b_shape, parameter_shape, bounds):
    rng = rng_for("quantized_add", str(a_type), str(b_shape), str(parameter_shape), str(bounds))
    a, b = full(rng, (2, 16, 9, 9), a_type), full(rng, b_shape, b_type)
    scale = lambda: rng.uniform(0.01, 0.1, parameter_shape).astype(F32)  # noqa: E731
    sa, sb, sy = scale(), scale(), scale()
    za, zb, zy = full(rng, parameter_shape, a_type), full(rng, parameter_shape, b_type), full(rng, parameter_shape, y_type)
    want = qdq_sum(a, sa, za, b, sb, zb, sy, zy, *bounds)
    for constant_operands in (False, True):  # the CPU's f32 rows; folded on the reference kernel
        with esgraph.GraphBuilder("sum") as g:
            c = g.constant
            x = c(a) if constant_operands else g.input("a", a_type, list(a.shape))
            w = c(b) if constant_operands else g.input("b", b_type, list(b.shape))
            y = ops.quantized_add(x, c(sa), c(za), w, c(sb), c(zb), c(sy), c(zy), min=bounds[0], max=bounds[1])
            model = esgraph.compile(g.build([y]))
        got = model.run([] if constant_operands else [a, b])[0]
        assert got.dtype == y_type and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        stats = model.stats()
        assert stats["reference_kernels"] == 0
        assert stats["launches"] == (0 if constant_operands else 1)


def test_bad_operands_are_esgraph_errors():
    with esgraph.GraphBuilder("bad") as g:
        a, c = g.input("a", U8, [4]), g.constant
        with pytest.raises(esgraph.DTypeError, match="inputs of type A must share one dtype, got u8 and i8"):
            ops.quantized_add(a, c(F32(1)), c(I8(0)), a, c(F32(1)), c(U8(0)), c(F32(1)), c(U8(0)))
        with pytest.raises(esgraph.ShapeError):
            ops.quantized_add(a, c(F32(1)), c(U8(0)), g.input("b", U8, [3]), c(F32(1)), c(U8(0)), c(F32(1)), c(U8(0)))
        with pytest.raises(esgraph.DTypeError):
            ops.quantized_add(a, c(F32(1)), c(U8(0)), a, c(F32(1)), c(U8(0)), c(F32(1)), c(np.int32(0)))


def qdq_residual(rng, relu, shared_dequantize=False):
    """x (u8) and a second u8 input, each dequantized, added, (Relu), quantized; with
    `shared_dequantize`, x's dequantized value is an output too."""
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["dx"]),
             helper.make_node("DequantizeLinear", ["r", "rs", "rz"], ["dr"]),
             helper.make_node("Add", ["dx", "dr"], ["sum"])]
    last = "sum"
    if relu:
        nodes.append(helper.make_node("Relu", ["sum"], ["relu"]))
        last = "relu"
    nodes.append(helper.make_node("QuantizeLinear", [last, "ys", "yz"], ["y"]))
    params = {"xs": F32(0.05), "xz": U8(120), "rs": F32(0.03), "rz": U8(131), "ys": F32(0.07), "yz": U8(9)}
    outputs = [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 8, 5, 5])]
    if shared_dequantize:
        outputs.append(helper.make_tensor_value_info("dx", TensorProto.FLOAT, [1, 8, 5, 5]))
    graph = helper.make_graph(nodes, "residual", [helper.make_tensor_value_info(n, TensorProto.UINT8, [1, 8, 5, 5]) for n in ("x", "r")],
                              outputs, [numpy_helper.from_array(np.asarray(v), k) for k, v in params.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), params


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("shared", [False, True])
def test_the_qdq_residual_becomes_one_quantized_add(relu, shared):
    rng = rng_for("residual", relu, shared)
    model, p = qdq_residual(rng, relu, shared)
    x, r = full(rng, (1, 8, 5, 5), U8), full(rng, (1, 8, 5, 5), U8)
    compiled = esgraph.compile(esgraph.onnx.load(model))
    dot = compiled.to_dot()
    assert dot.count('label="quantized_add') == 1 and "add\\n" not in dot.replace("quantized_add", "")
    got = compiled.run([x, r])
    np.testing.assert_array_equal(got[0], qdq_sum(x, p["xs"], p["xz"], r, p["rs"], p["rz"], p["ys"], p["yz"], 0 if relu else -np.inf))
    if shared:  # the dequantized x another reader takes is still computed
        np.testing.assert_array_equal(got[1], ((x.astype(F32) - F32(120)) * F32(0.05)).astype(F32))


def test_onnx_runtimes_qlinear_add_imports_and_agrees_with_it():
    ort = pytest.importorskip("onnxruntime")
    rng = rng_for("QLinearAdd")
    params = {"as": F32(0.04), "az": U8(100), "bs": F32(0.02), "bz": U8(140), "cs": F32(0.05), "cz": U8(7)}
    node = helper.make_node("QLinearAdd", ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["c"], domain="com.microsoft")
    graph = helper.make_graph([node], "qlinear_add", [helper.make_tensor_value_info(n, TensorProto.UINT8, [3, 70]) for n in "ab"],
                              [helper.make_tensor_value_info("c", TensorProto.UINT8, [3, 70])],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in params.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    a, b = full(rng, (3, 70), U8), full(rng, (3, 70), U8)
    got = esgraph.compile(esgraph.onnx.load(model.SerializeToString())).run([a, b])[0]
    np.testing.assert_array_equal(got, qdq_sum(a, params["as"], params["az"], b, params["bs"], params["bz"], params["cs"], params["cz"]))
    theirs = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": a, "b": b})[0]
    assert np.abs(got.astype(int) - theirs).max() <= 1  # ORT's kernel rounds by a table of its own: one step at most


@pytest.mark.parametrize("per_channel", [False, True])
def test_export_runs_on_onnx_runtime(per_channel, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    rng = rng_for("export quantized_add", per_channel)
    shape = (16, 1, 1) if per_channel else ()
    sa, sb, sy = (rng.uniform(0.01, 0.1, shape).astype(F32) for _ in range(3))
    za, zb, zy = (full(rng, shape, U8) for _ in range(3))
    with esgraph.GraphBuilder("exported") as g:
        c = g.constant
        y = ops.quantized_add(g.input("a", U8, [2, 16, 4, 4]), c(sa), c(za), g.input("b", U8, [2, 16, 4, 4]), c(sb), c(zb), c(sy), c(zy),
                              min=0.0)
        graph = g.build([y])
    path = str(tmp_path / "sum.onnx")
    esgraph.onnx.save(graph, path)
    onnx.checker.check_model(onnx.load(path))
    a, b = full(rng, (2, 16, 4, 4), U8), full(rng, (2, 16, 4, 4), U8)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # its QDQ nodes, not its fused QLinearAdd
    got = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"]).run(None, {"a": a, "b": b})[0]
    np.testing.assert_array_equal(got, qdq_sum(a, sa, za, b, sb, zb, sy, zy, 0.0))
