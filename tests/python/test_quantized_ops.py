"""Quantized values as typed ops (quantize_linear, dequantize_linear) against numpy's and ONNX's
reference (ONNX Runtime runs the exported files): rounding half to even in f32, saturation, NaN, per-channel parameters; fused with
the f32 ops around them into one launch; imported from and exported to ONNX's QDQ form."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import esgraph
import esgraph.onnx
from esgraph import ops

from numerics import run


def quantize_ref(x, scale, zero_point):
    """ONNX's QuantizeLinear: x / scale in f32, rounded half to even, plus the zero point,
    saturated to the zero point's dtype (NaN to 0)."""
    info = np.iinfo(zero_point.dtype)
    q = np.rint((x / scale).astype(np.float32)) + zero_point.astype(np.float32)
    return np.nan_to_num(np.clip(q, info.min, info.max), nan=0).astype(zero_point.dtype)


def dequantize_ref(q, scale, zero_point):
    return (q.astype(np.float32) - zero_point.astype(np.float32)) * scale


TIES = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 1e9, -1e9, np.nan, np.inf, -np.inf], np.float32)


@pytest.mark.parametrize("dtype, zero", [(np.uint8, 128), (np.int8, 0), (np.int8, -7)])
def test_quantize_rounds_half_to_even_and_saturates(dtype, zero):
    zero_point = np.array(zero, dtype)
    scale = np.array(1.0, np.float32)
    got = run(lambda x, s, z: ops.quantize_linear(x, s, z), TIES, scale, zero_point)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, quantize_ref(TIES, scale, zero_point))


def test_quantize_divides_in_f32():
    # 3 / 3.0000002 is just below 1 in double but rounds to 1 in f32: both round to 1; a scale
    # whose f32 quotient is a tie (0.5 exactly) while the double one is not shows the f32 division.
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(4096) * 40).astype(np.float32)
    scale = np.array(0.1, np.float32)  # not exact in binary: quotients land near ties
    zero_point = np.array(3, np.uint8)
    np.testing.assert_array_equal(run(ops.quantize_linear, x, scale, zero_point), quantize_ref(x, scale, zero_point))


def test_per_channel_round_trip():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((2, 3, 4, 5)) * 20).astype(np.float32)
    scale = np.array([0.1, 0.2, 0.05], np.float32).reshape(3, 1, 1)
    zero_point = np.array([128, 100, 3], np.uint8).reshape(3, 1, 1)
    q, d = run(lambda a, s, z: (ops.quantize_linear(a, s, z), ops.dequantize_linear(ops.quantize_linear(a, s, z), s, z)),
               x, scale, zero_point)
    np.testing.assert_array_equal(q, quantize_ref(x, scale, zero_point))
    np.testing.assert_array_equal(d, dequantize_ref(q, scale, zero_point))


def test_dequantize_i8_extremes():
    q = np.array([-128, -1, 0, 1, 127], np.int8)
    scale, zero_point = np.array(0.75, np.float32), np.array(127, np.int8)
    np.testing.assert_array_equal(run(ops.dequantize_linear, q, scale, zero_point), dequantize_ref(q, scale, zero_point))


def test_float_to_8_bit_cast_saturates():
    x = np.array([300.7, -5.5, 255.9, 1e10, -1e10, np.nan], np.float32)
    np.testing.assert_array_equal(run(lambda t: ops.cast(t, to=esgraph.u8), x), [255, 0, 255, 255, 0, 0])
    np.testing.assert_array_equal(run(lambda t: ops.cast(t, to=esgraph.i8), x), [127, -5, 127, 127, -128, 0])
    np.testing.assert_array_equal(run(lambda t: ops.cast(t, to=esgraph.i32), x),
                                  [300, -5, 255, 2147483647, -2147483648, 0])


def _qdq_relu(b, x, scale, zero_point):
    s, z = b.constant(scale), b.constant(zero_point)
    return ops.quantize_linear(ops.relu(ops.dequantize_linear(x, s, z)) * 2.0, s, z)


def test_dequantize_relu_quantize_is_one_launch():
    """u8 in, u8 out, the f32 math between them in registers: one fused group, and the values
    of the unfused reference, saturation of the intermediate included."""
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (4, 1000)).astype(np.uint8)
    scale, zero_point = np.array(0.02, np.float32), np.array(100, np.uint8)
    with esgraph.GraphBuilder("qdq") as b:
        y = _qdq_relu(b, b.input("x", esgraph.u8, [4, 1000]), scale, zero_point)
        graph = b.build([y])
    model = esgraph.compile(graph)
    facts = model.stats()
    assert facts["launches"] == 1 and facts["fused_groups"] == 1
    got = model.run({"x": x})[0]
    want = quantize_ref(np.maximum(dequantize_ref(x, scale, zero_point), 0) * np.float32(2), scale, zero_point)
    np.testing.assert_array_equal(got, want)


def test_wrong_dtypes_are_refused():
    with esgraph.GraphBuilder() as b:
        x = b.input("x", esgraph.f32, [4])
        with pytest.raises(esgraph.DTypeError, match="quantize_linear"):
            ops.quantize_linear(x, b.constant(np.float32(1)), b.constant(np.int32(0)))
        with pytest.raises(esgraph.DTypeError, match="dequantize_linear"):
            ops.dequantize_linear(x, b.constant(np.float32(1)), b.constant(np.uint8(0)))


def _qdq_model(axis_scale):
    scale = numpy_helper.from_array(axis_scale, "s")
    zero = numpy_helper.from_array(np.full(axis_scale.shape, 7, np.int8), "z")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5])],
                              [helper.make_tensor_value_info("q", TensorProto.INT8, [2, 3, 5]),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 5])], [scale, zero])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("scale", [np.array(0.05, np.float32), np.array([0.05, 0.1, 0.3], np.float32)], ids=["tensor", "axis"])
def test_onnx_qdq_import_and_export(scale):
    model = _qdq_model(scale)
    x = (np.random.default_rng(5).standard_normal((2, 3, 5)) * 4).astype(np.float32)
    s = scale.reshape(-1, 1) if scale.ndim else scale
    q = quantize_ref(x, s, np.full(s.shape, 7, np.int8))
    want = [q, dequantize_ref(q, s, np.full(s.shape, 7, np.int8))]
    compiled = esgraph.compile(esgraph.onnx.load(model))
    for got, ref in zip(compiled.run({"x": x}), want):
        np.testing.assert_array_equal(got, ref)
    # exported back as QuantizeLinear / DequantizeLinear nodes, which ONNX Runtime runs alike
    exported = esgraph.onnx.to_model(esgraph.onnx.load(model))
    onnx.checker.check_model(exported)
    assert {n.op_type for n in exported.graph.node} >= {"QuantizeLinear", "DequantizeLinear"}
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    for got, ref in zip(session.run(None, {"x": x}), want):
        np.testing.assert_array_equal(got, ref)


def test_export_of_parameters_no_onnx_node_takes():
    """A scale that varies along two axes is no QuantizeLinear: exported as its arithmetic."""
    x = np.linspace(-9, 9, 24, dtype=np.float32).reshape(4, 6)
    scale = np.linspace(0.5, 2, 24, dtype=np.float32).reshape(4, 6)
    zero_point = np.array(5, np.uint8)
    with esgraph.GraphBuilder() as b:
        y = ops.quantize_linear(b.input("x", esgraph.f32, [4, 6]), b.constant(scale), b.constant(zero_point))
        graph = b.build([ops.dequantize_linear(y, b.constant(scale), b.constant(zero_point)), y])
    exported = esgraph.onnx.to_model(graph)
    assert "QuantizeLinear" not in {n.op_type for n in exported.graph.node}
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    q = quantize_ref(x, scale, zero_point)
    for got, ref in zip(session.run(None, {"x": x}), [dequantize_ref(q, scale, zero_point), q]):
        np.testing.assert_array_equal(got, ref)
