"""ONNX ops imported, compiled and run against numpy: a small MLP, matrix products, convolution,
pooling and normalization, elementwise and shape ops, quantized products and convolutions
(against numpy's integer arithmetic), DFT, STFT and MaxUnpool.

See onnx_models.py for the helpers."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import esgraph  # noqa: E402
import esgraph.onnx  # noqa: E402

from onnx_models import vi, init, i64, make, run, rand, close, np_softmax, F32


# A small MLP
def test_mlp_matches_numpy(mlp):
    model, reference = mlp
    compiled = esgraph.compile(esgraph.onnx.load(model))
    for seed in (0, 1, 2):
        x = rand(2, 4, seed=seed)
        y = compiled(x)  # one output: one array
        assert isinstance(y, np.ndarray)
        close(y, reference(x))
        np.testing.assert_allclose(y.sum(axis=-1), 1.0, rtol=1e-5)


def test_mlp_initializers_become_constants(mlp):
    model, _ = mlp
    graph = esgraph.onnx.load(model)
    text = graph.to_text()
    assert text.startswith("graph mlp(%features: f32[2,4]) {")  # the only input
    assert text.count("constant()") == 4  # W1, B1, W2, B2
    assert "return %probs" in text
    graph.verify()
    assert esgraph.onnx.load(model, name="renamed").to_text().startswith("graph renamed(")


def test_input_and_output_names_are_preserved(mlp):
    model, reference = mlp
    compiled = esgraph.compile(esgraph.onnx.load(model))
    assert compiled.input_names == ["features"]
    assert compiled.output_names == ["probs"]
    x = rand(2, 4)
    (by_name,) = compiled.run({"features": x})
    close(by_name, reference(x))

# Matrix products, convolution, pooling, normalization
@pytest.mark.parametrize("trans_a,trans_b,alpha,beta,with_c", [
    (0, 0, 1.0, 1.0, True),
    (1, 0, 0.5, 2.0, True),
    (0, 1, 2.0, 0.25, True),
    (1, 1, -1.5, 1.0, True),
    (0, 0, 1.0, 0.0, True),  # beta 0: C ignored
    (1, 1, 3.0, 1.0, False),
])
def test_gemm(trans_a, trans_b, alpha, beta, with_c):
    a, b, c = rand(3, 4, seed=1), rand(4, 5, seed=2), rand(5, seed=3)
    a_in, b_in = (a.T.copy() if trans_a else a), (b.T.copy() if trans_b else b)
    node = helper.make_node("Gemm", ["A", "B", "C"] if with_c else ["A", "B"], ["Y"],
                            transA=trans_a, transB=trans_b, alpha=alpha, beta=beta)
    model = make([node], [vi("A", F32, list(a_in.shape)), vi("B", F32, list(b_in.shape))],
                 [vi("Y", F32, [3, 5])], [init("C", c)] if with_c else [])
    expected = alpha * (a @ b) + (beta * c if with_c else 0)
    (y,) = run(model, a_in, b_in)
    close(y, expected.astype(np.float32))


def np_conv(x, w, b, strides, pads, dilations, group):
    """Direct NCHW convolution: pads are [top, left, bottom, right] as in ONNX."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    sh, sw = strides
    dh, dw = dilations
    oh = (h + pads[0] + pads[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pads[1] + pads[3] - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, m, oh, ow), dtype=np.float64)
    per_group = m // group
    for oc in range(m):
        g = oc // per_group
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg,
                           i * sh:i * sh + dh * (kh - 1) + 1:dh, j * sw:j * sw + dw * (kw - 1) + 1:dw]
                y[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3))
    if b is not None:
        y += b.reshape(1, -1, 1, 1)
    return y.astype(np.float32)


@pytest.mark.parametrize("strides,pads,dilations,group,bias", [
    ([1, 1], [0, 0, 0, 0], [1, 1], 1, True),
    ([2, 1], [1, 2, 0, 1], [1, 1], 1, True),
    ([1, 2], [1, 1, 1, 1], [1, 1], 2, True),
    ([1, 1], [2, 2, 2, 2], [2, 1], 4, False),  # depthwise
], ids=["plain", "strided-asymmetric-pads", "grouped", "depthwise-dilated"])
def test_conv(strides, pads, dilations, group, bias):
    x = rand(2, 4, 7, 6, seed=4)
    w = rand(4, 4 // group, 3, 3, seed=5)
    b = rand(4, seed=6) if bias else None
    node = helper.make_node("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["y"], kernel_shape=[3, 3],
                            strides=strides, pads=pads, dilations=dilations, group=group)
    model = make([node], [vi("x", F32, list(x.shape))], [vi("y", F32, None)],
                 [init("w", w)] + ([init("b", b)] if bias else []))
    (y,) = run(model, x)
    close(y, np_conv(x, w, b, strides, pads, dilations, group), rtol=1e-4, atol=1e-4)


def test_conv_1d_with_auto_pad_same_upper():
    x, w, b = rand(1, 2, 9, seed=7), rand(3, 2, 4, seed=8), rand(3, seed=9)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], auto_pad="SAME_UPPER", strides=[2])
    model = make([node], [vi("x", F32, [1, 2, 9])], [vi("y", F32, None)], [init("w", w), init("b", b)])
    # out = ceil(9 / 2) = 5; total padding (5 - 1) * 2 + 4 - 9 = 3: 1 before, 2 after
    expected = np_conv(x[:, :, None, :], w[:, :, None, :], b, [1, 2], [0, 1, 0, 2], [1, 1], 1)[:, :, 0, :]
    (y,) = run(model, x)
    close(y, expected, rtol=1e-4, atol=1e-4)


def np_pool(x, kernel, strides, pads, kind, count_include_pad=False):
    n, c, h, w = x.shape
    kh, kw = kernel
    sh, sw = strides
    oh = (h + pads[0] + pads[2] - kh) // sh + 1
    ow = (w + pads[1] + pads[3] - kw) // sw + 1
    y = np.zeros((n, c, oh, ow), dtype=np.float32)
    for i in range(oh):
        for j in range(ow):
            top, left = i * sh - pads[0], j * sw - pads[1]
            rows = slice(max(top, 0), min(top + kh, h))
            cols = slice(max(left, 0), min(left + kw, w))
            window = x[:, :, rows, cols]
            if kind == "max":
                y[:, :, i, j] = window.max(axis=(2, 3))
            elif count_include_pad:
                y[:, :, i, j] = window.sum(axis=(2, 3)) / (kh * kw)
            else:
                y[:, :, i, j] = window.mean(axis=(2, 3))
    return y


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_auto_pad_same_upper(op):
    x = rand(1, 2, 6, 7, seed=10)
    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 2], auto_pad="SAME_UPPER")
    model = make([node], [vi("x", F32, [1, 2, 6, 7])], [vi("y", F32, None)])
    # rows: out 3, total pad (3-1)*2+3-6 = 1 -> [0, 1]; cols: out 4, total (4-1)*2+2-7 = 1 -> [0, 1]
    expected = np_pool(x, [3, 2], [2, 2], [0, 0, 1, 1], "max" if op == "MaxPool" else "avg")
    (y,) = run(model, x)
    assert y.shape == (1, 2, 3, 4)
    close(y, expected)


@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool_count_include_pad(count_include_pad):
    x = rand(2, 3, 5, 5, seed=11) + 2.0  # away from 0: counting the padding changes every border value
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                            count_include_pad=count_include_pad)
    model = make([node], [vi("x", F32, [2, 3, 5, 5])], [vi("y", F32, None)])
    expected = np_pool(x, [3, 3], [1, 1], [1, 1, 1, 1], "avg", bool(count_include_pad))
    (y,) = run(model, x)
    close(y, expected)
    # the corner window holds 4 of the input's values: divided by 9 or by 4
    corner = x[:, :, :2, :2].sum(axis=(2, 3)) / (9 if count_include_pad else 4)
    close(y[:, :, 0, 0], corner.astype(np.float32))


def test_max_pool_with_explicit_pads_and_ceil_mode():
    x = rand(1, 1, 5, 5, seed=12)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
    model = make([node], [vi("x", F32, [1, 1, 5, 5])], [vi("y", F32, None)])
    # ceil_mode: out = ceil((5 - 2) / 2) + 1 = 3, the last window holds one row/column
    expected = np_pool(x, [2, 2], [2, 2], [0, 0, 1, 1], "max")
    (y,) = run(model, x)
    close(y, expected)


def test_batch_normalization_inference():
    x = rand(2, 3, 4, 5, seed=13)
    scale, bias = rand(3, seed=14), rand(3, seed=15)
    mean, var = rand(3, seed=16), np.abs(rand(3, seed=17)) + 0.5
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)
    model = make([node], [vi("x", F32, [2, 3, 4, 5])], [vi("y", F32, [2, 3, 4, 5])],
                 [init("s", scale), init("b", bias), init("m", mean), init("v", var)], opset=15)
    c = (1, 3, 1, 1)
    expected = (x - mean.reshape(c)) / np.sqrt(var.reshape(c) + 1e-3) * scale.reshape(c) + bias.reshape(c)
    (y,) = run(model, x)
    close(y, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_normalization_with_mean_and_inv_std_dev(axis):
    x = rand(2, 3, 4, seed=18) * 3 + 1
    normalized = x.shape[axis % 3:]
    scale, bias = rand(*normalized, seed=19), rand(*normalized, seed=20)
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y", "mean", "inv_std"],
                            axis=axis, epsilon=1e-5)
    model = make([node], [vi("x", F32, [2, 3, 4])],
                 [vi("y", F32, None), vi("mean", F32, None), vi("inv_std", F32, None)],
                 [init("scale", scale), init("bias", bias)], opset=17)
    axes = tuple(range(axis % 3, 3))
    mu = x.mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(((x - mu) ** 2).mean(axis=axes, keepdims=True) + 1e-5)
    y, mean, inv_std = run(model, x)
    close(y, (x - mu) * inv * scale + bias, rtol=1e-4, atol=1e-4)
    close(mean, mu)  # [2,1,1] or [2,3,1]: the normalized axes kept as 1
    close(inv_std, inv, rtol=1e-4)


@pytest.mark.parametrize("axis,expected_shape", [(-1, (6, 4)), (-2, (2, 12)), (0, (1, 24)), (2, (6, 4))])
def test_flatten(axis, expected_shape):
    x = rand(2, 3, 4, seed=21)
    model = make([helper.make_node("Flatten", ["x"], ["y"], axis=axis)], [vi("x", F32, [2, 3, 4])],
                 [vi("y", F32, None)])
    (y,) = run(model, x)
    close(y, x.reshape(expected_shape))


def test_softmax_opset_11_flattens_but_opset_13_does_not():
    x = rand(2, 3, 4, seed=22)

    def softmax_model(opset):
        return make([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [vi("x", F32, [2, 3, 4])],
                    [vi("y", F32, [2, 3, 4])], opset=opset)
    (old,) = run(softmax_model(11), x)
    (new,) = run(softmax_model(13), x)
    # opset 11: one softmax over the 12 values of each batch row; opset 13: over axis 1 only
    close(old, np_softmax(x.reshape(2, 12), axis=1).reshape(2, 3, 4))
    close(new, np_softmax(x, axis=1))
    np.testing.assert_allclose(old.sum(axis=(1, 2)), 1.0, rtol=1e-5)
    np.testing.assert_allclose(new.sum(axis=1), 1.0, rtol=1e-5)

# Elementwise and shape ops
def test_clip_with_bounds_computed_at_run_time():
    nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])]
    model = make(nodes, [vi("x", F32, [2, 5]), vi("lo", F32, []), vi("hi", F32, [])], [vi("y", F32, None)])
    compiled = esgraph.compile(esgraph.onnx.load(model))
    assert compiled.input_names == ["x", "lo", "hi"]
    x = rand(2, 5, seed=30) * 3
    for lo, hi in ((-1.0, 1.0), (0.0, 2.5), (-0.5, -0.25)):
        close(compiled(x, np.float32(lo), np.float32(hi)), np.clip(x, lo, hi))


def test_clip_with_constant_bounds_and_a_missing_min():
    x = rand(2, 5, seed=31) * 3
    const = make([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], [vi("x", F32, [2, 5])], [vi("y", F32, None)],
                 [init("lo", np.float32(-1)), init("hi", np.float32(0.5))])
    close(run(const, x)[0], np.clip(x, -1, 0.5))
    only_max = make([helper.make_node("Clip", ["x", "", "hi"], ["y"])], [vi("x", F32, [2, 5]), vi("hi", F32, [])],
                    [vi("y", F32, None)])
    close(run(only_max, x, np.float32(0.75))[0], np.minimum(x, 0.75))
    legacy = make([helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=0.5)], [vi("x", F32, [2, 5])],
                  [vi("y", F32, None)], opset=6)
    close(run(legacy, x)[0], np.clip(x, -0.5, 0.5))


@pytest.mark.parametrize("base_type,np_type", [(TensorProto.INT32, np.int32), (TensorProto.INT64, np.int64)])
def test_pow_with_an_integer_base(base_type, np_type):
    base = np.array([2, 3, -2, 5, 7, -3], dtype=np_type)
    exponent = np.array([3, 2, 3, 0, 1, 4], dtype=np_type)
    model = make([helper.make_node("Pow", ["b", "e"], ["y"])], [vi("b", base_type, [6]), vi("e", base_type, [6])],
                 [vi("y", base_type, None)])
    (y,) = run(model, base, exponent)
    assert y.dtype == np_type
    np.testing.assert_array_equal(y, np.array([8, 9, -8, 1, 7, 81], dtype=np_type))
    # a float exponent: the result keeps the base's integer type (opset 12+)
    mixed = make([helper.make_node("Pow", ["b", "e"], ["y"])], [vi("b", base_type, [6])], [vi("y", base_type, None)],
                 [init("e", np.float32(2))])
    (y,) = run(mixed, base)
    assert y.dtype == np_type
    np.testing.assert_array_equal(y, base.astype(np.int64) ** 2)


def test_pad_with_negative_pads_crops():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    # rows: pad 1 before, crop 1 after; columns: crop 2 before, pad 1 after; fill 9
    model = make([helper.make_node("Pad", ["x", "pads", "value"], ["y"])], [vi("x", F32, [4, 5])],
                 [vi("y", F32, None)], [i64("pads", [1, -2, -1, 1]), init("value", np.float32(9))])
    expected = np.full((4, 4), 9, dtype=np.float32)
    expected[1:, :3] = x[:3, 2:]
    (y,) = run(model, x)
    close(y, expected)
    crop_only = make([helper.make_node("Pad", ["x", "pads"], ["y"])], [vi("x", F32, [4, 5])],
                     [vi("y", F32, None)], [i64("pads", [-1, 0, -2, -3])])
    close(run(crop_only, x)[0], x[1:2, :2])


def test_tile():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = make([helper.make_node("Tile", ["x", "r"], ["y"])], [vi("x", F32, [2, 3])], [vi("y", F32, None)],
                 [i64("r", [2, 3])])
    (y,) = run(model, x)
    close(y, np.tile(x, (2, 3)))
    assert y.shape == (4, 9)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode):
    b, (n, c, h, w) = 2, (2, 12, 2, 3)
    x = np.arange(n * c * h * w, dtype=np.float32).reshape(n, c, h, w)
    model = make([helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=b, mode=mode)],
                 [vi("x", F32, [n, c, h, w])], [vi("y", F32, None)])
    out_c = c // (b * b)
    expected = np.zeros((n, out_c, h * b, w * b), dtype=np.float32)
    for oc in range(out_c):
        for i in range(b):
            for j in range(b):
                src = (i * b + j) * out_c + oc if mode == "DCR" else oc * b * b + i * b + j
                expected[:, oc, i::b, j::b] = x[:, src]
    (y,) = run(model, x)
    close(y, expected)


def test_expand_is_bidirectional():
    x = np.array([[1], [2], [3]], dtype=np.float32)
    model = make([helper.make_node("Expand", ["x", "shape"], ["y"])], [vi("x", F32, [3, 1])],
                 [vi("y", F32, None)], [i64("shape", [2, 1, 4])])
    (y,) = run(model, x)
    close(y, np.broadcast_to(x, (2, 3, 4)).astype(np.float32))
    # a target shape smaller than the input keeps the input's dimensions
    smaller = make([helper.make_node("Expand", ["x", "shape"], ["y"])], [vi("x", F32, [3, 1])],
                   [vi("y", F32, None)], [i64("shape", [1])])
    close(run(smaller, x)[0], x)


def test_split_into_equal_parts():
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    model = make([helper.make_node("Split", ["x"], ["a", "b", "c"], axis=0)], [vi("x", F32, [6, 4])],
                 [vi("a", F32, None), vi("b", F32, None), vi("c", F32, None)])
    parts = run(model, x)
    assert [p.shape for p in parts] == [(2, 4)] * 3
    for part, expected in zip(parts, np.split(x, 3, axis=0)):
        close(part, expected)


def test_split_with_a_split_input():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    model = make([helper.make_node("Split", ["x", "sizes"], ["a", "b", "c"], axis=-1)], [vi("x", F32, [4, 6])],
                 [vi("a", F32, None), vi("b", F32, None), vi("c", F32, None)], [i64("sizes", [1, 2, 3])])
    a, b, c = run(model, x)
    close(a, x[:, :1])
    close(b, x[:, 1:3])
    close(c, x[:, 3:])


def test_split_with_the_split_attribute_before_opset_13():
    x = np.arange(10, dtype=np.float32)
    model = make([helper.make_node("Split", ["x"], ["a", "b"], split=[7, 3])], [vi("x", F32, [10])],
                 [vi("a", F32, None), vi("b", F32, None)], opset=11)
    a, b = run(model, x)
    close(a, x[:7])
    close(b, x[7:])


def test_split_into_uneven_parts_at_opset_18():
    x = np.arange(14, dtype=np.float32).reshape(2, 7)
    model = make([helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)], [vi("x", F32, [2, 7])],
                 [vi("a", F32, None), vi("b", F32, None), vi("c", F32, None)], opset=18)
    a, b, c = run(model, x)  # ceil(7 / 3) = 3: the last part is smaller
    close(a, x[:, :3])
    close(b, x[:, 3:6])
    close(c, x[:, 6:])


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([-1], [-(2**63)], [0], [-1]),  # reverse everything (INT64_MIN: to the beginning)
    ([8], [1], [1], [-3]),
    ([-2, 5], [0, -(2**63)], [0, -1], [-1, -2]),
    ([1, 2**63 - 1], [3, 0], [0, 1], [1, -1]),  # a start past the end clamps
], ids=["reverse", "step-3", "two-axes", "clamped"])
def test_slice_with_negative_steps(starts, ends, axes, steps):
    x = np.arange(40, dtype=np.float32).reshape(4, 10)
    model = make([helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])],
                 [vi("x", F32, [4, 10])], [vi("y", F32, None)],
                 [i64("starts", starts), i64("ends", ends), i64("axes", axes), i64("steps", steps)])
    index = [slice(None)] * 2
    for s, e, a, st in zip(starts, ends, axes, steps):
        dim = x.shape[a]
        # numpy's slices clamp like ONNX's once the sentinels are brought into range
        e = None if e < -dim else e
        index[a] = slice(s, e, st)
    (y,) = run(model, x)
    close(y, x[tuple(index)])

# Quantized products and convolutions, against numpy's integer arithmetic
def test_qlinear_conv_with_per_channel_filter_scales_matches_numpy():
    rng = np.random.default_rng(11)
    x = rng.integers(0, 256, (1, 2, 5, 5)).astype(np.uint8)
    w = rng.integers(-128, 128, (3, 2, 3, 3)).astype(np.int8)
    x_scale, x_zp = np.float32(0.02), np.uint8(128)
    w_scale, w_zp = np.array([0.01, 0.03, 0.002], np.float32), np.zeros(3, np.int8)
    y_scale, y_zp = np.float32(0.05), np.uint8(100)
    bias = np.array([7, -300, 45], np.int32)
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], pads=[1, 1, 1, 1])
    model = make([node], [vi("x", TensorProto.UINT8, [1, 2, 5, 5])], [vi("y", TensorProto.UINT8, None)],
                 [init("xs", x_scale), init("xz", x_zp), init("w", w), init("ws", w_scale), init("wz", w_zp),
                  init("ys", y_scale), init("yz", y_zp), init("b", bias)])
    got = esgraph.compile(esgraph.onnx.load(model))(x)
    # The reference: an int64 convolution of the zero-point-free values, requantized in f32.
    xp = np.pad(x.astype(np.int64) - int(x_zp), [(0, 0), (0, 0), (1, 1), (1, 1)])
    acc = np.zeros((1, 3, 5, 5), np.int64)
    for o in range(3):
        for i in range(5):
            for j in range(5):
                acc[0, o, i, j] = (xp[0, :, i:i + 3, j:j + 3] * w[o].astype(np.int64)).sum() + bias[o]
    multiplier = (x_scale * w_scale / y_scale).astype(np.float32).reshape(3, 1, 1)
    want = np.clip(np.round(acc.astype(np.float32) * multiplier) + float(y_zp), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(got, want)


def test_conv_integer_sums_exactly():
    rng = np.random.default_rng(12)
    x = rng.integers(0, 256, (2, 3, 6, 6)).astype(np.uint8)
    w = rng.integers(0, 256, (4, 3, 3, 3)).astype(np.uint8)
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], strides=[2, 2])
    model = make([node], [vi("x", TensorProto.UINT8, [2, 3, 6, 6])], [vi("y", TensorProto.INT32, None)],
                 [init("w", w), init("xz", np.uint8(3)), init("wz", np.uint8(250))])
    got = esgraph.compile(esgraph.onnx.load(model))(x)
    xs, ws = x.astype(np.int64) - 3, w.astype(np.int64) - 250
    want = np.zeros((2, 4, 2, 2), np.int64)
    for i in range(2):
        for j in range(2):
            patch = xs[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3]
            want[:, :, i, j] = np.einsum("nchw,ochw->no", patch, ws)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


# Signal ops and unpooling, against numpy
@pytest.mark.parametrize("shape, axis, inverse, onesided, length", [
    ((2, 16, 1), 1, 0, 0, None), ((2, 16, 2), 1, 1, 0, None), ((3, 10, 1), 1, 0, 1, None),
    ((2, 12, 2), 1, 0, 0, 16), ((2, 12, 2), 1, 0, 0, 8), ((4, 6, 5, 2), 2, 0, 0, None), ((4, 6, 5, 2), 1, 1, 0, None),
])
def test_dft_matches_numpys_fft(shape, axis, inverse, onesided, length):
    """DFT (opset 17) against numpy.fft: real and complex signals, forward and inverse, one-sided,
    cut or zero-padded to dft_length, along an inner axis."""
    x = rand(*shape, seed=3)
    inputs = ["x"] + (["n"] if length else [])
    inits = [init("n", np.array(length, np.int64))] if length else []
    node = helper.make_node("DFT", inputs, ["y"], axis=axis, inverse=inverse, onesided=onesided)
    model = make([node], [vi("x", F32, list(shape))], [vi("y")], inits, opset=17)
    signal = x[..., 0] + (1j * x[..., 1] if shape[-1] == 2 else 0)
    n = length or shape[axis]
    want = (np.fft.ifft if inverse else np.fft.fft)(signal, n=n, axis=axis)
    if onesided:
        want = np.take(want, np.arange(n // 2 + 1), axis=axis)
    close(run(model, x)[0], np.stack([want.real, want.imag], -1).astype(np.float32), rtol=1e-4, atol=1e-4)


def test_max_unpool_puts_each_value_back_where_max_pool_found_it():
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(rand(2, 3, 6, 8, seed=4))
    pooled, indices = torch.nn.functional.max_pool2d(x, 2, stride=2, return_indices=True)
    # PyTorch's indices count within each (image, channel) plane; ONNX's over the whole tensor.
    flat = indices + (torch.arange(6).reshape(2, 3, 1, 1) * 48)
    node = helper.make_node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
    model = make([node], [vi("x", F32, [2, 3, 3, 4]), vi("i", helper.TensorProto.INT64, [2, 3, 3, 4])], [vi("y")], opset=11)
    want = torch.nn.functional.max_unpool2d(pooled, indices, 2, stride=2)
    close(run(model, pooled.numpy(), flat.numpy())[0], want.numpy())


@pytest.mark.parametrize("channels, window, onesided", [(1, True, 1), (2, True, 0), (1, False, 0)])
def test_stft_matches_numpy_frame_by_frame(channels, window, onesided):
    """STFT (opset 17) against numpy.fft over each frame: real and complex signals, with a
    window or a frame_length, one-sided or whole."""
    x = rand(2, 50, channels, seed=5)
    win = np.hanning(12).astype(np.float32)
    inputs = ["x", "step"] + (["w"] if window else ["", "length"])
    inits = [init("step", np.array(5, np.int64))] + ([init("w", win)] if window else [init("length", np.array(12, np.int64))])
    node = helper.make_node("STFT", inputs, ["y"], onesided=onesided)
    model = make([node], [vi("x", F32, [2, 50, channels])], [vi("y")], inits, opset=17)
    signal = x[..., 0] + (1j * x[..., 1] if channels == 2 else 0)
    frames = np.stack([signal[:, i * 5:i * 5 + 12] * (win if window else 1) for i in range(1 + (50 - 12) // 5)], 1)
    want = np.fft.fft(frames, axis=-1)[..., :7 if onesided else 12]
    close(run(model, x)[0], np.stack([want.real, want.imag], -1).astype(np.float32), rtol=1e-4, atol=1e-4)


def test_int64_minimum_by_minus_one_folds_and_runs():
    """Div and Mod of int64's minimum by -1, folded while importing (constants) and run (inputs):
    the quotient wraps to the minimum and the remainder is 0, as numpy's, where the CPU's
    division trapped and killed the process (`esgraph info` exited with 136)."""
    lo = np.iinfo(np.int64).min
    a, b = np.array([lo, lo, 7, -7], np.int64), np.array([-1, 1, -2, 2], np.int64)
    nodes = [helper.make_node("Div", ["a", "b"], ["q"]), helper.make_node("Mod", ["a", "b"], ["r"]),
             helper.make_node("Mod", ["a", "b"], ["f"], fmod=1)]
    outputs = [vi(n, TensorProto.INT64, [4]) for n in ("q", "r", "f")]
    with np.errstate(over="ignore"):
        want = [np.array([lo, lo, -3, -3], np.int64), np.mod(a, b), np.fmod(a, b)]
    folded = make(nodes, [vi("x", TensorProto.INT64, [1])], outputs, [i64("a", a), i64("b", b)])
    for got, expected in zip(run(folded, np.zeros(1, np.int64)), want):
        np.testing.assert_array_equal(got, expected)
    from_inputs = make(nodes, [vi("a", TensorProto.INT64, [4]), vi("b", TensorProto.INT64, [4])], outputs)
    for got, expected in zip(run(from_inputs, a, b), want):
        np.testing.assert_array_equal(got, expected)
