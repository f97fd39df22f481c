"""Ops as opsets 19 to 28 define them, where their converters read what changed (_versions.py),
against numpy; and the versions no converter implements, refused by name."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import esgraph
import esgraph.onnx

from onnx_models import F32, I64, close, i64, init, make, rand, run, vi


def test_dft_20_takes_its_axis_as_an_input_minus_two_by_default():
    x = rand(3, 8, 5, 1, seed=1)
    # -2 of the input's rank 4 is the signal's axis 2 (the last axis holds real and imaginary parts)
    for inputs, inits, axis in ((["x"], [], 2), (["x", "", "a"], [i64("a", 1)], 1)):
        model = make([helper.make_node("DFT", inputs, ["y"])], [vi("x", F32, [3, 8, 5, 1])], [vi("y")], inits, opset=20)
        want = np.fft.fft(x[..., 0], axis=axis)
        close(run(model, x)[0], np.stack([want.real, want.imag], -1).astype(np.float32), rtol=1e-4, atol=1e-4)


def test_grid_sample_20_calls_bilinear_linear():
    x, grid = rand(1, 2, 4, 5, seed=2), np.clip(rand(1, 3, 3, 2, seed=3), -1, 1)
    grid[0, 1, 2] = (0.1, -0.3)
    outputs = []
    for opset, mode in ((16, "bilinear"), (20, "linear"), (20, None)):
        attrs = {"mode": mode} if mode else {}
        model = make([helper.make_node("GridSample", ["x", "g"], ["y"], align_corners=1, **attrs)],
                     [vi("x", F32, [1, 2, 4, 5]), vi("g", F32, [1, 3, 3, 2])], [vi("y")], opset=opset)
        outputs.append(run(model, x, grid)[0])
    # align_corners: grid -1..1 spans the corner pixels, so (0.1, -0.3) samples x = 2.2, y = 1.05.
    fx, fy = 0.2, 0.05
    p = x[0, :, 1:3, 2:4]
    want = p[:, 0, 0] * (1 - fx) * (1 - fy) + p[:, 0, 1] * fx * (1 - fy) + p[:, 1, 0] * (1 - fx) * fy + p[:, 1, 1] * fx * fy
    close(outputs[0][0, :, 1, 2], want.astype(np.float32), rtol=1e-5, atol=1e-5)
    for y in outputs[1:]:
        np.testing.assert_array_equal(y, outputs[0])


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_28_orders_blocks_by_mode(mode):
    x, b = rand(2, 3, 4, 6, seed=4), 2
    model = make([helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=b, mode=mode)],
                 [vi("x", F32, [2, 3, 4, 6])], [vi("y")], opset=28)
    blocks = x.reshape(2, 3, 2, b, 3, b)
    perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    np.testing.assert_array_equal(run(model, x)[0], blocks.transpose(perm).reshape(2, 12, 2, 3))


def test_quantize_linear_21_output_dtype_without_a_zero_point():
    x, scale = rand(4, 3, seed=5) * 50, np.float32(0.5)
    model = make([helper.make_node("QuantizeLinear", ["x", "s"], ["q"], output_dtype=TensorProto.INT8)],
                 [vi("x", F32, [4, 3])], [vi("q", TensorProto.INT8)], [init("s", scale)], opset=21)
    want = np.clip(np.rint(x / scale), -128, 127).astype(np.int8)
    np.testing.assert_array_equal(run(model, x)[0], want)


def test_dequantize_linear_23_output_dtype():
    q = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    model = make([helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], output_dtype=TensorProto.FLOAT16)],
                 [vi("q", TensorProto.INT8, [3, 4])], [vi("y", TensorProto.FLOAT16)],
                 [init("s", np.float32(0.25)), init("z", np.int8(1))], opset=23)
    y = run(model, q)[0]
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, ((q.astype(np.float32) - 1) * 0.25).astype(np.float16))


def test_resize_19_half_pixel_symmetric():
    # ONNX's definition: offset = in/2 * (1 - out_int/out), x_in = offset + (x + 0.5)/scale - 0.5.
    x = rand(1, 1, 1, 5, seed=6)
    scale = 1.7
    model = make([helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear",
                                   coordinate_transformation_mode="half_pixel_symmetric")],
                 [vi("x", F32, [1, 1, 1, 5])], [vi("y")], [init("sc", np.array([1, 1, 1, scale], np.float32))], opset=19)
    out = int(np.floor(5 * scale))
    pos = 5 / 2 * (1 - out / (5 * scale)) + (np.arange(out) + 0.5) / scale - 0.5
    pos = np.clip(pos, 0, 4)
    want = np.interp(pos, np.arange(5), x[0, 0, 0])
    close(run(model, x)[0][0, 0, 0], want.astype(np.float32), rtol=1e-5, atol=1e-6)


def test_blocked_quantization_is_refused_by_name():
    model = make([helper.make_node("DequantizeLinear", ["q", "s"], ["y"], axis=1, block_size=2)],
                 [vi("q", TensorProto.INT8, [2, 4])], [vi("y")], [init("s", np.ones((2, 2), np.float32))], opset=21)
    with pytest.raises(esgraph.onnx.ImportFailed, match=r"blocked quantization \(block_size=2\)"):
        esgraph.onnx.load(model)


def test_every_converted_op_knows_its_versions():
    # A converter of the default domain must name an op ONNX has: _versions resolves them all.
    from esgraph.onnx._versions import HISTORY, NEWER, implemented
    standard = [op for op in esgraph.onnx.CONVERTERS if "." not in op]
    assert not [op for op in standard if op not in HISTORY]
    assert all(implemented(op) for op in standard)
    assert all(v in HISTORY[op] for op, v in NEWER.items())


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumprod_26_matches_numpy(exclusive, reverse):
    x = rand(3, 7, 2, seed=7)
    x[1, 3, 0] = 0.0  # a zero stops the products after it
    model = make([helper.make_node("CumProd", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)],
                 [vi("x", F32, [3, 7, 2])], [vi("y")], [i64("axis", -2)], opset=26)
    v = x[:, ::-1] if reverse else x
    if exclusive:
        v = np.concatenate([np.ones_like(v[:, :1]), v[:, :-1]], axis=1)
    want = np.cumprod(v, axis=1)
    close(run(model, x)[0], want[:, ::-1] if reverse else want, rtol=1e-5, atol=1e-6)


def test_mod_28_takes_floats_with_pythons_sign_rule():
    a = np.array([5.5, -5.5, 5.5, -5.5, 3.0, 3.0, 2.0, -2.0, np.inf, 1.0], np.float32)
    b = np.array([2.0, 2.0, -2.0, -2.0, 1.5, -1.5, np.inf, np.inf, 2.0, 0.0], np.float32)
    model = make([helper.make_node("Mod", ["a", "b"], ["y"])], [vi("a", F32, [10]), vi("b", F32, [10])], [vi("y")], opset=28)
    with np.errstate(invalid="ignore", divide="ignore"):
        want = np.mod(a, b)
    got = run(model, a, b)[0]
    np.testing.assert_array_equal(got, want)  # NaN where numpy's is, and -0.0 where the divisor is negative
    assert list(np.signbit(got[4:6])) == [False, True]
    older = make([helper.make_node("Mod", ["a", "b"], ["y"])], [vi("a", F32, [10]), vi("b", F32, [10])], [vi("y")], opset=27)
    with pytest.raises(esgraph.onnx.ImportFailed, match="fmod=0 is defined for integers only"):
        esgraph.onnx.load(older)


def test_reduce_max_20_of_booleans_and_of_no_elements():
    x = np.array([[True, False, False], [False, False, False]])
    model = make([helper.make_node("ReduceMax", ["x", "axes"], ["y"], keepdims=0),
                  helper.make_node("ReduceMin", ["x", "axes"], ["z"], keepdims=0)],
                 [vi("x", TensorProto.BOOL, [2, 3])], [vi("y"), vi("z")], [i64("axes", [1])], opset=20)
    y, z = run(model, x)
    np.testing.assert_array_equal(y, x.max(1))
    np.testing.assert_array_equal(z, x.min(1))
    empty = make([helper.make_node("ReduceMax", ["x", "axes"], ["y"], keepdims=1),
                  helper.make_node("ReduceMin", ["i", "axes"], ["z"], keepdims=0)],
                 [vi("x", F32, [2, 0]), vi("i", TensorProto.INT32, [2, 0])], [vi("y"), vi("z")], [i64("axes", [1])], opset=20)
    y, z = run(empty, np.zeros((2, 0), np.float32), np.zeros((2, 0), np.int32))
    np.testing.assert_array_equal(y, np.full((2, 1), -np.inf, np.float32))
    np.testing.assert_array_equal(z, np.full(2, np.iinfo(np.int32).max, np.int32))


def test_center_crop_pad_18_crops_and_pads_around_the_centre():
    x = rand(5, 4, 3, seed=8)
    model = make([helper.make_node("CenterCropPad", ["x", "s"], ["y"], axes=[0, 1])],
                 [vi("x", F32, [5, 4, 3])], [vi("y")], [i64("s", [2, 7])], opset=18)
    want = np.zeros((2, 7, 3), np.float32)
    want[:, 1:5] = x[1:3]  # 5 -> 2 starts at (5 - 2) // 2; 4 -> 7 pads 1 left, 2 right
    np.testing.assert_array_equal(run(model, x)[0], want)


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_24_writes_each_batchs_update_at_its_index(mode):
    cache, update = rand(2, 3, 6, 4, seed=9), rand(2, 3, 3, 4, seed=10)
    at = np.array([1, 4 if mode == "circular" else 3], np.int64)
    model = make([helper.make_node("TensorScatter", ["c", "u", "w"], ["y"], axis=2, mode=mode)],
                 [vi("c", F32, [2, 3, 6, 4]), vi("u", F32, [2, 3, 3, 4]), vi("w", I64, [2])], [vi("y")], opset=24)
    want = cache.copy()
    for b in range(2):
        for j in range(3):
            want[b, :, (at[b] + j) % 6] = update[b, :, j]
    np.testing.assert_array_equal(run(model, cache, update, at)[0], want)


@pytest.mark.parametrize("align_corners", [0, 1])
def test_affine_grid_20_as_torch_defines_it(align_corners):
    theta = rand(2, 2, 3, seed=11)
    model = make([helper.make_node("AffineGrid", ["t", "size"], ["g"], align_corners=align_corners)],
                 [vi("t", F32, [2, 2, 3])], [vi("g")], [i64("size", [2, 1, 3, 4])], opset=20)
    xs = np.linspace(-1, 1, 4) if align_corners else (np.arange(4) * 2 + 1) / 4 - 1
    ys = np.linspace(-1, 1, 3) if align_corners else (np.arange(3) * 2 + 1) / 3 - 1
    want = np.einsum("nij,hwj->nhwi", theta, np.stack(np.broadcast_arrays(xs[None, :], ys[:, None], 1.0), -1))
    close(run(model, theta)[0], want.astype(np.float32), rtol=1e-5, atol=1e-6)


def test_swiglu_28():
    a, b = rand(3, 4, seed=12), rand(3, 4, seed=13)
    model = make([helper.make_node("SwiGLU", ["a", "b"], ["y"], alpha=1.702)],
                 [vi("a", F32, [3, 4]), vi("b", F32, [3, 4])], [vi("y")], opset=28)
    close(run(model, a, b)[0], a / (1 + np.exp(-1.702 * a)) * b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pool_and_global_lp_pool_are_window_norms(p):
    x = rand(1, 2, 5, 5, seed=14)
    model = make([helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1], p=p),
                  helper.make_node("GlobalLpPool", ["x"], ["g"], p=p)],
                 [vi("x", F32, [1, 2, 5, 5])], [vi("y"), vi("g")], opset=18)
    padded = np.pad(np.abs(x) ** p, [(0, 0), (0, 0), (0, 1), (0, 1)])
    want = padded.reshape(1, 2, 3, 2, 3, 2).sum((3, 5)) ** (1 / p)
    y, g = run(model, x)
    close(y, want.astype(np.float32), rtol=1e-5, atol=1e-6)
    close(g, ((np.abs(x) ** p).sum((2, 3), keepdims=True) ** (1 / p)).astype(np.float32), rtol=1e-5, atol=1e-6)


def test_pad_19_wraps_around():
    x = rand(3, 4, seed=15)
    model = make([helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap")], [vi("x", F32, [3, 4])], [vi("y")],
                 [i64("pads", [1, 5, 2, 0])], opset=19)
    np.testing.assert_array_equal(run(model, x)[0], np.pad(x, [(1, 2), (5, 0)], mode="wrap"))


@pytest.mark.parametrize("size, kernel", [(6, 3), (5, 2)])
def test_average_pool_counting_padding_with_ceil_mode_against_torch(size, kernel):
    # It was refused: esgraph's avg_pool2d counts the input only, and padding first would keep
    # the windows ceil_mode drops.
    torch = pytest.importorskip("torch")
    x = rand(1, 2, size, size, seed=16)
    model = make([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[kernel, kernel], strides=[2, 2], pads=[1, 1, 1, 1],
                                   ceil_mode=1, count_include_pad=1)], [vi("x", F32, [1, 2, size, size])], [vi("y")], opset=19)
    want = torch.nn.functional.avg_pool2d(torch.from_numpy(x), kernel, 2, 1, ceil_mode=True, count_include_pad=True).numpy()
    close(run(model, x)[0], want, rtol=1e-5, atol=1e-6)


def test_a_zero_vector_normalizes_to_zeros_and_an_empty_log_sum_exp_is_minus_infinity():
    x = rand(3, 4, seed=17)
    x[1] = 0.0
    model = make([helper.make_node("LpNormalization", ["x"], ["y"], axis=1, p=2)], [vi("x", F32, [3, 4])], [vi("y")], opset=18)
    want = x / np.where(np.linalg.norm(x, axis=1, keepdims=True) == 0, 1, np.linalg.norm(x, axis=1, keepdims=True))
    close(run(model, x)[0], want.astype(np.float32), rtol=1e-5, atol=1e-6)
    empty = make([helper.make_node("ReduceLogSumExp", ["x", "axes"], ["y"], keepdims=0)], [vi("x", F32, [2, 0])],
                 [vi("y")], [i64("axes", [1])], opset=18)
    np.testing.assert_array_equal(run(empty, np.zeros((2, 0), np.float32))[0], np.full(2, -np.inf, np.float32))
