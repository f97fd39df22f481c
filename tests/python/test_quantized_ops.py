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


def qconv_ref(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias, strides=(1, 1), pads=(0, 0, 0, 0),
              dilations=(1, 1), groups=1, clip=(-np.inf, np.inf), with_scaled=False):
    """QLinearConv in numpy: exact int64 sums of the zero-point-free values, requantized as ONNX
    Runtime does (the f32 multiplier x_scale · w_scale / y_scale, half to even)."""
    xs = np.pad(x.astype(np.int64) - int(x_zp), [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])])
    O, CG, KH, KW = w.shape
    ws = w.astype(np.int64) - np.asarray(w_zp, np.int64).reshape(-1, 1, 1, 1)
    N, _, H, W = xs.shape
    OH = (H - dilations[0] * (KH - 1) - 1) // strides[0] + 1
    OW = (W - dilations[1] * (KW - 1) - 1) // strides[1] + 1
    acc = np.zeros((N, O, OH, OW), np.int64)
    for o in range(O):
        g = o // (O // groups)
        for kh in range(KH):
            for kw in range(KW):
                patch = xs[:, g * CG:(g + 1) * CG, kh * dilations[0]:kh * dilations[0] + strides[0] * (OH - 1) + 1:strides[0],
                           kw * dilations[1]:kw * dilations[1] + strides[1] * (OW - 1) + 1:strides[1]]
                acc[:, o] += np.einsum("nchw,c->nhw", patch, ws[o, :, kh, kw])
    if bias is not None:
        acc += bias.reshape(1, -1, 1, 1)
    multiplier = ((np.float32(x_scale) * np.asarray(w_scale, np.float32)) / np.float32(y_scale)).astype(np.float32)
    scaled = acc.astype(np.float32) * multiplier.reshape(1, -1, 1, 1)
    q = np.rint(scaled) + np.float32(y_zp)
    info = np.iinfo(np.asarray(y_zp).dtype)
    q = np.clip(q, info.min, info.max)
    # a clip of the real result before quantizing: its bounds quantized (quantizing is monotone)
    low, high = (np.clip(np.rint(np.float32(c) / np.float32(y_scale)) + float(y_zp), info.min, info.max) for c in clip)
    q = np.clip(q, low, high).astype(np.asarray(y_zp).dtype)
    return (q, scaled) if with_scaled else q


# (x dtype, groups, per-channel, clip, strides, pads, dilations, bias): full-range filters, which
# oneDNN's int8 kernels without VNNI would saturate on.
NONE, RELU, RELU6 = (-np.inf, np.inf), (0.0, np.inf), (0.0, 6.0)
QCONV_CASES = [
    (np.uint8, 1, True, NONE, (1, 1), (1, 1, 1, 1), (1, 1), True),
    (np.uint8, 1, False, RELU, (2, 2), (0, 1, 2, 0), (1, 1), False),
    (np.int8, 1, True, RELU, (1, 1), (1, 1, 1, 1), (2, 2), True),
    (np.uint8, 4, True, RELU6, (1, 2), (1, 0, 1, 0), (1, 1), True),
    (np.uint8, 16, True, RELU6, (1, 1), (1, 1, 1, 1), (1, 1), True),  # depthwise
    (np.int8, 16, False, (-4.5, 3.25), (2, 2), (1, 1, 1, 1), (1, 1), True),
]


@pytest.mark.parametrize("on_primitive", [True, False], ids=["primitive", "reference"])
@pytest.mark.parametrize("x_type, groups, per_channel, clip, strides, pads, dilations, with_bias", QCONV_CASES)
def test_quantized_conv2d_against_numpy(x_type, groups, per_channel, clip, strides, pads, dilations, with_bias, on_primitive):
    """The reference kernel (a scale given at run time) gives numpy's integer arithmetic's values
    bit for bit; oneDNN's primitive (constant scales) too, but where the scaled sum lies within
    float rounding of a tie (x.5): its multiply rounds otherwise, one step either way."""
    rng = np.random.default_rng(groups * 10 + len(strides))
    info = np.iinfo(x_type)
    x = rng.integers(info.min, info.max + 1, (2, 16, 20, 19)).astype(x_type)
    out = 16 if groups == 16 else 32  # oneDNN's depthwise kernels take one filter per channel
    w = rng.integers(-128, 128, (out, 16 // groups, 3, 3)).astype(np.int8)
    w[0, 0, 0, :2] = [127, 127] if groups != 16 else w[0, 0, 0, :2]  # a pair that saturates 16 bits against 255s
    x[0, :2] = info.max
    x_scale, x_zp = np.float32(0.02), x_type(info.min + 100)
    w_scale = (rng.random(out).astype(np.float32) * 0.02 + 0.001) if per_channel else np.float32(0.01)
    y_scale, y_zp = np.float32(0.3), np.uint8(90)
    bias = rng.integers(-5000, 5000, out).astype(np.int32) if with_bias else None
    with esgraph.GraphBuilder() as b:
        xi = b.input("x", x_type, list(x.shape))
        xs = b.constant(x_scale) if on_primitive else b.input("xs", esgraph.f32, [])
        y = ops.quantized_conv2d(xi, xs, b.constant(x_zp), b.constant(w), b.constant(w_scale), b.constant(np.int8(0)),
                                 b.constant(y_scale), b.constant(y_zp), bias=b.constant(bias) if with_bias else None,
                                 strides=list(strides), pads=list(pads), dilations=list(dilations), groups=groups, min=clip[0], max=clip[1])
        model = esgraph.compile(b.build([y]))
    facts = model.stats()
    if on_primitive:
        assert facts["onednn_convolutions"][0]["precision"].startswith("int8")
    else:
        assert facts["reference_convolutions"][0]["reason"] == "its scales and zero points are not constants"
    got = model.run({"x": x} if on_primitive else {"x": x, "xs": x_scale})[0]
    want, scaled = qconv_ref(x, x_scale, x_zp, w, w_scale, np.zeros(out, np.int64), y_scale, y_zp, bias, strides, pads, dilations,
                             groups, clip, with_scaled=True)
    if not on_primitive:
        np.testing.assert_array_equal(got, want)
        return
    differ = got != want
    assert np.abs(got.astype(int) - want.astype(int)).max(initial=0) <= 1
    near_tie = np.abs(np.abs(scaled - np.floor(scaled)) - 0.5) <= 1e-6 * np.maximum(1, np.abs(scaled))
    assert not (differ & ~near_tie).any(), np.argwhere(differ & ~near_tie)[:5]


def test_quantized_conv2d_filter_zero_point_runs_on_the_reference():
    rng = np.random.default_rng(9)
    x = rng.integers(0, 256, (1, 3, 5, 5)).astype(np.uint8)
    w = rng.integers(0, 256, (4, 3, 3, 3)).astype(np.uint8)
    with esgraph.GraphBuilder() as b:
        y = ops.quantized_conv2d(b.input("x", esgraph.u8, [1, 3, 5, 5]), b.constant(np.float32(0.1)), b.constant(np.uint8(7)),
                                 b.constant(w), b.constant(np.float32(0.01)), b.constant(np.uint8(120)),
                                 b.constant(np.float32(0.5)), b.constant(np.int8(-3)))
        model = esgraph.compile(b.build([y]))
    assert "oneDNN" in model.stats()["reference_convolutions"][0]["reason"]
    want = qconv_ref(x, 0.1, 7, w, 0.01, [120] * 4, 0.5, np.int8(-3), None)
    np.testing.assert_array_equal(model.run({"x": x})[0], want)


@pytest.mark.parametrize("name, inputs, message", [
    ("x_scale", {"x_scale": np.ones(2, np.float32)}, "`x_scale` must hold one value"),
    ("w_scale", {"w_scale": np.ones(3, np.float32)}, r"`w_scale` must hold one value or one per output channel \[4\]"),
    ("bias", {"bias": np.ones(3, np.int32)}, r"`bias` must be \[4\]"),
])
def test_quantized_conv2d_shapes_are_checked_where_built(name, inputs, message):
    values = {"x_scale": np.float32(1), "x_zero_point": np.uint8(0), "w": np.ones((4, 3, 1, 1), np.int8),
              "w_scale": np.float32(1), "w_zero_point": np.int8(0), "y_scale": np.float32(1), "y_zero_point": np.uint8(0)}
    values.update(inputs)
    bias = values.pop("bias", None)
    with esgraph.GraphBuilder() as b:
        args = [b.constant(values[k]) for k in ("x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point")]
        with pytest.raises(esgraph.ShapeError, match=message):
            ops.quantized_conv2d(b.input("x", esgraph.u8, [1, 3, 4, 4]), *args, bias=b.constant(bias) if bias is not None else None)


def _qdq_conv_net(rng):
    """Two convolutions in ONNX Runtime's static QDQ layout: u8 activations with one scale each,
    s8 filters with one scale per output channel (axis 0, zero point 0), int32 biases quantized
    with x_scale · w_scale, a Relu after the first convolution and a Clip (Relu6) after the
    second, before their QuantizeLinear."""
    inits, nodes = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def qdq(name, scale, zero_point):
        const(f"{name}_s", np.float32(scale)), const(f"{name}_z", np.uint8(zero_point))
        nodes.append(helper.make_node("QuantizeLinear", [name, f"{name}_s", f"{name}_z"], [f"{name}_q"]))
        nodes.append(helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s", f"{name}_z"], [f"{name}_dq"]))
        return f"{name}_dq"

    def conv(name, x, x_scale, out, cin, activation):
        w = rng.integers(-127, 128, (out, cin, 3, 3)).astype(np.int8)
        w_scale = (rng.random(out) * 0.01 + 0.002).astype(np.float32)
        const(f"{name}_w", w), const(f"{name}_ws", w_scale), const(f"{name}_wz", np.zeros(out, np.int8))
        nodes.append(helper.make_node("DequantizeLinear", [f"{name}_w", f"{name}_ws", f"{name}_wz"], [f"{name}_wdq"], axis=0))
        b_scale = (np.float32(x_scale) * w_scale).astype(np.float32)
        const(f"{name}_b", rng.integers(-2000, 2000, out).astype(np.int32)), const(f"{name}_bs", b_scale)
        nodes.append(helper.make_node("DequantizeLinear", [f"{name}_b", f"{name}_bs"], [f"{name}_bdq"], axis=0))
        nodes.append(helper.make_node("Conv", [x, f"{name}_wdq", f"{name}_bdq"], [f"{name}_y"], pads=[1, 1, 1, 1]))
        bounds = [const(f"{name}_lo", np.float32(0)), const(f"{name}_hi", np.float32(6))] if activation == "Clip" else []
        nodes.append(helper.make_node(activation, [f"{name}_y"] + bounds, [name]))
        return name

    x = qdq("x", 0.02, 128)
    h = qdq(conv("c1", x, 0.02, 16, 3, "Relu"), 0.05, 0)
    y = qdq(conv("c2", h, 0.05, 8, 16, "Clip"), 0.03, 0)
    nodes.append(helper.make_node("Identity", [y], ["y"]))
    graph = helper.make_graph(nodes, "qdq_convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 12, 12])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 12, 12])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_onnx_qdq_convolutions_run_on_int8_kernels():
    """DequantizeLinear → Conv (→ Relu or Clip) → QuantizeLinear compiles into quantized_conv2d on
    oneDNN's int8 kernels, activations u8 in between; the output agrees within one quantization
    step with the graph's own f32 semantics as ONNX Runtime computes them unoptimized. (Its
    optimized int8 kernels are no reference: on a CPU without VNNI they saturate pairs of u8·s8
    products in 16 bits, as its documentation warns, 15.0 off here on an AVX2-only Zen 3.)"""
    rng = np.random.default_rng(21)
    model = _qdq_conv_net(rng)
    x = (rng.standard_normal((2, 3, 12, 12)) * 1.5).astype(np.float32)
    compiled = esgraph.compile(esgraph.onnx.load(model))
    facts = compiled.stats()
    # both int8, on whichever of oneDNN's implementations suits each shape on this CPU
    assert {c["precision"].split(",")[0] for c in facts["onednn_convolutions"]} == {"int8"}
    assert sum(c["count"] for c in facts["onednn_convolutions"]) == 2
    assert facts["reference_kernels"] == 0
    # u8 activations stay channels last between the two (oneDNN's int8 layout): a reorder in, one out
    assert [v["format"] for v in facts["blocked_values"]] == ["nhwc"] and facts["reorders"] == 2
    got = compiled.run({"x": x})[0]
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.abs(got - want).max() <= 0.03 + 1e-6  # one step of the output's scale
    assert np.mean(got == want) > 0.95


def test_int8_model_file_round_trip(tmp_path):
    """A compiled model with int8 convolutions and channels-last values saves and loads with its
    packed filters, and computes the same bytes."""
    rng = np.random.default_rng(23)
    x = (rng.standard_normal((2, 3, 12, 12)) * 1.5).astype(np.float32)
    compiled = esgraph.compile(esgraph.onnx.load(_qdq_conv_net(rng)))
    path = str(tmp_path / "int8.esgm")
    compiled.save(path)
    loaded = esgraph.load_model(path)
    assert loaded.stats()["weights_loaded"] == 2
    np.testing.assert_array_equal(loaded.run({"x": x})[0], compiled.run({"x": x})[0])


def max_pool_ref(x, k, stride, pads):
    """Max over windows in numpy, the padding left out (as -inf)."""
    info = np.iinfo(x.dtype)
    xp = np.pad(x, [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])], constant_values=info.min)
    N, C, H, W = xp.shape
    OH, OW = (H - k) // stride + 1, (W - k) // stride + 1
    out = np.full((N, C, OH, OW), info.min, x.dtype)
    for i in range(k):
        for j in range(k):
            out = np.maximum(out, xp[:, :, i:i + stride * (OH - 1) + 1:stride, j:j + stride * (OW - 1) + 1:stride])
    return out


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_8_bit_max_pool_channels_last(dtype):
    """max_pool2d of 8-bit values runs channels last on its own kernel, against numpy."""
    rng = np.random.default_rng(4)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max + 1, (2, 40, 13, 11)).astype(dtype)
    with esgraph.GraphBuilder() as b:
        y = ops.max_pool2d(b.input("x", dtype, list(x.shape)), [3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
        model = esgraph.compile(b.build([y]))
    facts = model.stats()
    assert facts["reference_kernels"] == 0 and [v["format"] for v in facts["blocked_values"]] == ["nhwc"]
    np.testing.assert_array_equal(model.run({"x": x})[0], max_pool_ref(x, 3, 2, (1, 1, 1, 1)))


def test_qdq_max_pool_pools_the_integers():
    """DequantizeLinear → MaxPool → QuantizeLinear with one scale and zero point is the pool of
    the integers: no f32 value is left, and the values are the QDQ graph's."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (1, 16, 10, 10)).astype(np.uint8)
    scale, zero_point = np.float32(0.03), np.uint8(100)
    with esgraph.GraphBuilder() as b:
        s, z = b.constant(scale), b.constant(zero_point)
        pooled = ops.max_pool2d(ops.dequantize_linear(b.input("x", esgraph.u8, [1, 16, 10, 10]), s, z), [2, 2], strides=[2, 2])
        model = esgraph.compile(b.build([ops.quantize_linear(pooled, s, z)]))
    facts = model.stats()
    # the pool alone, channels last between a reorder in and one out
    assert facts["launches"] == 3 and facts["reorders"] == 2 and facts["fused_groups"] == 0 and facts["reference_kernels"] == 0
    # quantizing what was dequantized with the same scale gives it back: the QDQ graph's values
    want = max_pool_ref(quantize_ref(dequantize_ref(x, scale, zero_point), scale, zero_point), 2, 2, (0, 0, 0, 0))
    np.testing.assert_array_equal(model.run({"x": x})[0], want)
