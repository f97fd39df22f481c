"""Integer products (matmul_integer, ONNX MatMulInteger) against numpy's integer arithmetic:
(a - a_zero_point) · (b - b_zero_point) summed exactly in int64, then cast to int32 (which wraps
as an int32 sum does). Checked bit for bit on the integer GEMM (a constant 2-D b and b zero
point) and on the reference kernel, over the four 8-bit dtype pairs, the GEMM's block edges
(odd K, K over several 256-deep blocks, N past the 24-column panels, M past the 4-row
micro-kernel and the 128-row blocks), full-range values, per-row and per-column zero points,
leading axes, one and two threads and int32 wrap-around; bad operands as esgraph errors.
ONNX: MatMulInteger and QLinearMatMul imported (QLinearMatMul against numpy's form of ONNX's
definition as ONNX Runtime requantizes: f32 multiplier, half to even, saturated; and against
ONNX Runtime itself where its kernel is exact, b within [-64, 64]), matmul_integer exported and
run by ONNX Runtime, and a dynamic quantization chain as ONNX Runtime's quantize_dynamic writes
it against a numpy f32 implementation of DynamicQuantizeLinear and exact integer products."""

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import esgraph
import esgraph.onnx
from esgraph import ops

from numerics import rng_for

U8, I8 = np.uint8, np.int8
PAIRS = [(U8, I8), (I8, I8), (U8, U8), (I8, U8)]
PAIR_IDS = ["u8*i8", "i8*i8", "u8*u8", "i8*u8"]
ONNX_TYPE = {U8: TensorProto.UINT8, I8: TensorProto.INT8}


def product_ref(a, b, a_zero_point, b_zero_point):
    """numpy's (a - a_zero_point) · (b - b_zero_point) in int64, wrapped into int32. A zero point
    [M] applies per row of a, one [N] per column of b."""
    za = np.asarray(a_zero_point, np.int64)
    za = za.reshape(-1, 1) if za.ndim == 1 else za
    exact = np.matmul(a.astype(np.int64) - za, b.astype(np.int64) - np.asarray(b_zero_point, np.int64))
    return exact.astype(np.int32)


def full_range(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def compile_product(a, b, a_zero_point, b_zero_point, constant_b=True, **options):
    """matmul_integer of a graph input shaped as `a` and `b` (a constant or a graph input), the
    zero points constants. Returns the compiled model and its feeds."""
    with esgraph.GraphBuilder("matmul_integer") as g:
        x = g.input("a", a.dtype, list(a.shape))
        w = g.constant(b) if constant_b else g.input("b", b.dtype, list(b.shape))
        y = ops.matmul_integer(x, w, g.constant(np.asarray(a_zero_point, a.dtype)), g.constant(np.asarray(b_zero_point, b.dtype)))
        model = esgraph.compile(g.build([y]), **options)
    feeds = {"a": a} if constant_b else {"a": a, "b": b}
    return model, feeds


def run_product(a, b, a_zero_point, b_zero_point, constant_b=True, **options):
    """The product's result, having checked which kernel ran it: the integer GEMM for a
    constant b, the reference kernel (b not a constant matrix) otherwise."""
    model, feeds = compile_product(a, b, a_zero_point, b_zero_point, constant_b, **options)
    facts = model.stats()
    if constant_b and b.ndim == 2:
        assert facts["integer_matmuls"] == 1
    else:
        assert facts["integer_matmuls"] == 0
        assert facts["reference_integer_matmuls"] == [{"reason": "b is not a constant matrix", "count": 1}]
    return model.run(feeds)[0]


def check_exact(got, want):
    assert got.dtype == np.int32, got.dtype
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


# (M, K, N): M = 1; K odd and below a pair's block; K over several 256-deep blocks (and odd
# within the last); N below, at and past a 24-column panel; M past the 4-row micro-kernel and
# the 128-row block.
SHAPES = [(1, 7, 30), (5, 7, 24), (130, 7, 100), (1, 1000, 30), (6, 1000, 100), (130, 1000, 30), (3, 1001, 30)]


@pytest.mark.parametrize("constant_b", [True, False], ids=["gemm", "reference"])
@pytest.mark.parametrize("m, k, n", SHAPES, ids=[f"{m}x{k}x{n}" for m, k, n in SHAPES])
@pytest.mark.parametrize("a_type, b_type", PAIRS, ids=PAIR_IDS)
def test_bit_exact_against_numpy(a_type, b_type, m, k, n, constant_b):
    rng = rng_for("bit exact", a_type, b_type, m, k, n)
    a, b = full_range(rng, (m, k), a_type), full_range(rng, (k, n), b_type)
    a_zero_point, b_zero_point = full_range(rng, (), a_type), full_range(rng, (), b_type)
    got = run_product(a, b, a_zero_point, b_zero_point, constant_b)
    check_exact(got, product_ref(a, b, a_zero_point, b_zero_point))


def _extreme(dtype, low):
    info = np.iinfo(dtype)
    return info.min if low else info.max


@pytest.mark.parametrize("constant_b", [True, False], ids=["gemm", "reference"])
@pytest.mark.parametrize("a_type, b_type", PAIRS, ids=PAIR_IDS)
def test_extreme_values_do_not_saturate_16_bits(a_type, b_type, constant_b):
    """a all 255 (u8) or -128 (i8), b all -128 (i8) or 255 (u8), zero points 0: each pair of
    products is beyond int16 (255·(-128)·2 = -65280), and the sums beyond 16 bits many times over
    (255·(-128)·768 = -25067520). A second case takes the widest shifted values there are
    (±255, the zero points at the other end of the range)."""
    m, k, n = 5, 768, 30
    a = np.full((m, k), _extreme(a_type, a_type == I8), a_type)
    b = np.full((k, n), _extreme(b_type, b_type == I8), b_type)
    want = product_ref(a, b, 0, 0)
    assert want[0, 0] == int(a[0, 0]) * int(b[0, 0]) * k  # no wrap: exact
    check_exact(run_product(a, b, a_type(0), b_type(0), constant_b), want)
    # widest: a - a_zero_point and b - b_zero_point both ±255
    a = np.full((m, k), _extreme(a_type, True), a_type)
    b = np.full((k, n), _extreme(b_type, False), b_type)
    a_zero_point, b_zero_point = a_type(_extreme(a_type, False)), b_type(_extreme(b_type, True))
    want = product_ref(a, b, a_zero_point, b_zero_point)
    assert want[0, 0] == -255 * 255 * k
    check_exact(run_product(a, b, a_zero_point, b_zero_point, constant_b), want)


@pytest.mark.parametrize("constant_b", [True, False], ids=["gemm", "reference"])
@pytest.mark.parametrize("a_type, b_type", [(U8, I8), (I8, U8)], ids=["u8*i8", "i8*u8"])
def test_per_row_and_per_column_zero_points(a_type, b_type, constant_b):
    m, k, n = 130, 300, 30
    rng = rng_for("per row", a_type, b_type, constant_b)
    a, b = full_range(rng, (m, k), a_type), full_range(rng, (k, n), b_type)
    a_zero_point, b_zero_point = full_range(rng, (m,), a_type), full_range(rng, (n,), b_type)
    assert np.count_nonzero(b_zero_point) > n // 2  # non-zero b zero points, packed with b
    want = product_ref(a, b, a_zero_point, b_zero_point)
    check_exact(run_product(a, b, a_zero_point, b_zero_point, constant_b), want)
    # one of them per row / per column, the other one value
    check_exact(run_product(a, b, a_zero_point, b_zero_point[3], constant_b), product_ref(a, b, a_zero_point, b_zero_point[3]))
    check_exact(run_product(a, b, a_zero_point[5], b_zero_point, constant_b), product_ref(a, b, a_zero_point[5], b_zero_point))


@pytest.mark.parametrize("n", [50, 24], ids=["columns split", "rows split"])
def test_leading_axes_of_a_on_the_gemm(n):
    """a [2, 3, 5, K] times a constant b [K, N]: the GEMM takes a's 30 rows at once; a per-row
    zero point [5] applies to the rows of each of the six matrices alike, also when the rows
    are split over two threads (one panel of columns: too few to share)."""
    k = 1001
    rng = rng_for("leading axes", n)
    a, b = full_range(rng, (2, 3, 5, k), U8), full_range(rng, (k, n), I8)
    for a_zero_point, b_zero_point in [(U8(131), I8(-3)), (full_range(rng, (5,), U8), full_range(rng, (n,), I8))]:
        got = run_product(a, b, a_zero_point, b_zero_point, threads=2)
        assert got.shape == (2, 3, 5, n)
        check_exact(got, product_ref(a, b, a_zero_point, b_zero_point))


def test_batched_b_broadcasts_on_the_reference_kernel():
    """a [2, 1, M, K] times b [3, K, N] (a constant, but no matrix): [2, 3, M, N] as numpy's
    matmul broadcasts, with per-row and per-column zero points."""
    m, k, n = 6, 33, 27
    rng = rng_for("batched b")
    a, b = full_range(rng, (2, 1, m, k), I8), full_range(rng, (3, k, n), U8)
    a_zero_point, b_zero_point = full_range(rng, (m,), I8), full_range(rng, (n,), U8)
    want = product_ref(a, b, a_zero_point, b_zero_point)
    assert want.shape == (2, 3, m, n)
    model, feeds = compile_product(a, b, a_zero_point, b_zero_point, constant_b=True)
    facts = model.stats()
    assert facts["integer_matmuls"] == 0
    assert facts["reference_integer_matmuls"] == [{"reason": "b is not a constant matrix", "count": 1}]
    check_exact(model.run(feeds)[0], want)
    check_exact(run_product(a, b, a_zero_point, b_zero_point, constant_b=False), want)


# Products big enough for two pieces: 100 columns (5 panels) split by columns, 24 (one panel)
# by rows, where a per-row zero point follows its rows.
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n, per_row", [(100, False), (24, True), (100, True)], ids=["columns", "rows per-row", "columns per-row"])
def test_one_and_two_threads(n, per_row, threads):
    m, k = 130, 1000
    rng = rng_for("threads", n, per_row)  # the same data for both thread counts
    a, b = full_range(rng, (m, k), U8), full_range(rng, (k, n), I8)
    a_zero_point = full_range(rng, (m,) if per_row else (), U8)
    b_zero_point = full_range(rng, (n,), I8)
    want = product_ref(a, b, a_zero_point, b_zero_point)
    check_exact(run_product(a, b, a_zero_point, b_zero_point, threads=threads), want)


def test_a_symbolic_row_count_runs_at_every_size_on_the_gemm():
    """a [m, K] with m symbolic, one plan for every size, each size's program bound as it comes:
    m = 0 gives an empty result (an empty product, on the reference kernel), the others numpy's
    values on the GEMM."""
    k, n = 300, 40
    rng = rng_for("symbolic rows")
    b = full_range(rng, (k, n), I8)
    with esgraph.GraphBuilder("symbolic") as g:
        x = g.input("a", U8, ["m", k])
        y = ops.matmul_integer(x, g.constant(b), g.constant(U8(7)), g.constant(I8(-2)))
        model = esgraph.compile(g.build([y]))
    for m in (0, 1, 0, 33):
        a = full_range(rng, (m, k), U8)
        got = model.run({"a": a})[0]
        assert got.shape == (m, n)
        check_exact(got, product_ref(a, b, U8(7), I8(-2)))
        assert model.stats()["integer_matmuls"] == (m > 0)


def test_int32_sums_wrap_around():
    """255 · (-128) · 66000 = -2154240000, below -2^31: the int32 sum wraps to 2140727296, as
    numpy's int64 -> int32 cast does."""
    k = 66000
    a = np.full((1, k), 255, U8)
    b = np.full((k, 24), -128, I8)
    want = product_ref(a, b, 0, 0)
    assert 255 * -128 * k < -2 ** 31 and want[0, 0] == 255 * -128 * k + 2 ** 32
    check_exact(run_product(a, b, U8(0), I8(0)), want)
    # and on the reference kernel
    check_exact(run_product(a, b, U8(0), I8(0), constant_b=False), want)


M, K, N = 4, 8, 5


def _bad_product(a_shape=(M, K), b_shape=(K, N), a_zero_point=U8(0), b_zero_point=I8(0), a_type=U8, b_type=I8):
    with esgraph.GraphBuilder() as g:
        ops.matmul_integer(g.input("a", a_type, list(a_shape)), g.constant(np.ones(b_shape, b_type)),
                           g.constant(np.asarray(a_zero_point)), g.constant(np.asarray(b_zero_point)))


@pytest.mark.parametrize("arguments, error, message", [
    ({"a_zero_point": np.zeros(M + 1, U8)}, esgraph.ShapeError,
     r"`a_zero_point` must hold one value or one per row of a \[4\], got \[5\]"),
    ({"a_zero_point": np.zeros((2, 2), U8)}, esgraph.ShapeError,
     r"`a_zero_point` must hold one value or one per row of a \[4\], got \[2,2\]"),
    ({"b_zero_point": np.zeros(N + 1, I8)}, esgraph.ShapeError,
     r"`b_zero_point` must hold one value or one per column of b \[5\], got \[6\]"),
    ({"a_zero_point": I8(0)}, esgraph.DTypeError, "inputs of type A must share one dtype, got u8 and i8"),
    ({"b_zero_point": U8(0)}, esgraph.DTypeError, "inputs of type B must share one dtype, got i8 and u8"),
    ({"b_shape": (K + 1, N)}, esgraph.ShapeError, r"the contracted dimensions differ: 8 \(a\) vs 9 \(b\)"),
    ({"a_shape": (K,)}, esgraph.ShapeError, r"both inputs need rank >= 2"),
    ({"a_shape": (2, M, K), "b_shape": (3, K, N)}, esgraph.ShapeError, r"cannot broadcast \[2\] with \[3\]"),
    ({"a_type": np.int32, "a_zero_point": np.int32(0)}, esgraph.DTypeError, "input `a` has dtype i32, but A accepts only i8, u8"),
], ids=["a zero point [M+1]", "a zero point [2,2]", "b zero point [N+1]", "a zero point dtype", "b zero point dtype",
        "K mismatch", "rank-1 a", "batch mismatch", "i32 a"])
def test_bad_operands_are_refused_where_built(arguments, error, message):
    with pytest.raises(error, match="matmul_integer: .*" + message):
        _bad_product(**arguments)


# ---- ONNX ------------------------------------------------------------------------------------
def _matmul_integer_model(a, b, a_zero_point=None, b_zero_point=None, a_zero_point_input=False):
    """One MatMulInteger node (opset 13), b an initializer; a's zero point an initializer, or a
    graph input "az" when `a_zero_point_input`."""
    m, k = a.shape
    inputs = [helper.make_tensor_value_info("a", ONNX_TYPE[a.dtype.type], [m, k])]
    inits = [numpy_helper.from_array(b, "b")]
    names = ["a", "b"]
    if a_zero_point is not None:
        names.append("az")
        if a_zero_point_input:
            inputs.append(helper.make_tensor_value_info("az", ONNX_TYPE[a.dtype.type], list(np.shape(a_zero_point))))
        else:
            inits.append(numpy_helper.from_array(np.asarray(a_zero_point, a.dtype), "az"))
    if b_zero_point is not None:
        names += [""] * (3 - len(names)) + ["bz"]
        inits.append(numpy_helper.from_array(np.asarray(b_zero_point, b.dtype), "bz"))
    node = helper.make_node("MatMulInteger", names, ["y"])
    graph = helper.make_graph([node], "matmul_integer", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [m, b.shape[1]])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("zero_points", ["both", "none", "a per row", "b only"])
def test_onnx_matmul_integer_import(zero_points, tmp_path):
    m, k, n = 7, 300, 30
    rng = rng_for("onnx import", zero_points)
    a, b = full_range(rng, (m, k), U8), full_range(rng, (k, n), I8)
    za = {"both": U8(200), "none": None, "a per row": full_range(rng, (m,), U8), "b only": None}[zero_points]
    zb = {"both": I8(-5), "none": None, "a per row": I8(17), "b only": full_range(rng, (n,), I8)}[zero_points]
    model = _matmul_integer_model(a, b, za, zb, a_zero_point_input=zero_points == "a per row")
    want = product_ref(a, b, 0 if za is None else za, 0 if zb is None else zb)
    feeds = {"a": a} if zero_points != "a per row" else {"a": a, "az": za}
    path = tmp_path / "matmul_integer.onnx"
    onnx.save(model, str(path))
    for compiled in (esgraph.compile(str(path)), esgraph.compile(esgraph.onnx.load(model.SerializeToString()))):
        assert compiled.stats()["integer_matmuls"] == 1
        check_exact(compiled.run(feeds)[0], want)


def test_onnx_matmul_integer_with_b_an_input_runs_on_the_reference():
    m, k, n = 3, 40, 9
    rng = rng_for("onnx b input")
    a, b = full_range(rng, (m, k), I8), full_range(rng, (k, n), I8)
    node = helper.make_node("MatMulInteger", ["a", "b", "az"], ["y"])
    graph = helper.make_graph([node], "mi", [helper.make_tensor_value_info("a", TensorProto.INT8, [m, k]),
                                             helper.make_tensor_value_info("b", TensorProto.INT8, [k, n])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [m, n])],
                              [numpy_helper.from_array(np.array(-9, I8), "az")])
    compiled = esgraph.compile(esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])))
    facts = compiled.stats()
    assert facts["integer_matmuls"] == 0 and facts["reference_integer_matmuls"][0]["count"] == 1
    check_exact(compiled.run({"a": a, "b": b})[0], product_ref(a, b, I8(-9), 0))


def qlinear_matmul_ref(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
    """ONNX's QLinearMatMul as ONNX Runtime computes it: the exact int32 sum, times the f32
    multiplier (a_scale · b_scale) / y_scale (each step in f32; a's scale one value or one per
    row, b's one value or one per column), rounded half to even, plus the output's zero point,
    saturated to its dtype."""
    acc = product_ref(a, b, a_zero_point, b_zero_point)
    a_scale, b_scale = np.asarray(a_scale, np.float32), np.asarray(b_scale, np.float32)
    multiplier = (a_scale.reshape(-1, 1) if a_scale.ndim else a_scale) * b_scale / np.float32(y_scale)
    assert multiplier.dtype == np.float32
    q = np.rint(acc.astype(np.float32) * multiplier) + np.float32(y_zero_point)
    info = np.iinfo(np.asarray(y_zero_point).dtype)
    return np.clip(q, info.min, info.max).astype(np.asarray(y_zero_point).dtype)


def _qlinear_case(case, rng, m, k, n):
    """QLinearMatMul's operands after a (u8 [M, K]): b an i8 [K, N], the scales and zero points."""
    if case == "ties":  # multiplier 0.5, small sums: ties (odd sums) everywhere, saturation at both ends
        b = rng.integers(-4, 5, (k, n)).astype(I8)
        return b, np.float32(0.5), U8(128), np.float32(1.0), I8(0), np.float32(1.0), U8(128)
    if case == "generic":  # a multiplier with no exact f32 form; b within [-64, 64] (ONNX Runtime exact)
        b = rng.integers(-64, 65, (k, n)).astype(I8)
        return b, np.float32(0.02), U8(131), np.float32(0.0031), I8(-3), np.float32(0.012), U8(100)
    # one scale and zero point per row of a, per column of b (ONNX Runtime takes scalars only)
    b = full_range(rng, (k, n), I8)
    return (b, rng.uniform(0.005, 0.03, m).astype(np.float32), full_range(rng, (m,), U8), rng.uniform(0.001, 0.01, n).astype(np.float32),
            rng.integers(-9, 10, n).astype(I8), np.float32(0.04), U8(90))


@pytest.mark.parametrize("case", ["ties", "generic", "per row and column"])
def test_onnx_qlinear_matmul_import(case):
    m, k, n = 16, 64, 40
    rng = rng_for("qlinear", case)
    a = (rng.integers(118, 139, (m, k)) if case == "ties" else rng.integers(0, 256, (m, k))).astype(U8)
    b, a_scale, a_zp, b_scale, b_zp, y_scale, y_zp = _qlinear_case(case, rng, m, k, n)
    names = ["a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"]
    inits = [numpy_helper.from_array(np.asarray(v), name)
             for name, v in zip(names[1:], (a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp))]
    graph = helper.make_graph([helper.make_node("QLinearMatMul", names, ["y"])], "qlinear_matmul",
                              [helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [m, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    want = qlinear_matmul_ref(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp)
    assert 0 < np.mean(want == 255) < 0.5 and 0 < np.mean(want == 0) < 0.5  # saturation at both ends, but not only
    if case == "ties":  # the case does what it says
        acc = product_ref(a, b, a_zp, b_zp)
        assert (acc % 2 == 1).sum() > 50 and (want == 0).any()
        assert (want != np.clip(np.floor(acc * 0.5 + 0.5) + 128, 0, 255)).any()  # half up would differ
    compiled = esgraph.compile(esgraph.onnx.load(model))
    assert compiled.stats()["integer_matmuls"] == 1
    got = compiled.run({"a": a})[0]
    assert got.dtype == U8 and got.shape == (m, n)
    np.testing.assert_array_equal(got, want)
    if case != "per row and column":  # b within [-64, 64]: ONNX Runtime's kernel is exact, and agrees
        ort = pytest.importorskip("onnxruntime")
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        np.testing.assert_array_equal(session.run(None, {"a": a})[0], want)


@pytest.mark.parametrize("op", ["MatMul", "Gemm transB"])
def test_onnx_qdq_product_runs_on_the_integers(op):
    """ONNX Runtime's static QDQ layout of a product: u8 activations quantized and dequantized,
    s8 weights dequantized with one scale and zero point per output column, an f32 bias, the
    result quantized.
    esgraph multiplies the integers (matmul_integer, exact sums scaled back to f32); the QDQ
    graph's own semantics (ONNX Runtime with its optimizations off, f32 products of the
    dequantized values) agree within one quantization step."""
    m, k, n = 12, 96, 40
    rng = rng_for("qdq product", op)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.integers(-127, 128, (k, n)).astype(I8)
    w_scale = rng.uniform(0.001, 0.01, n).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    transposed = op == "Gemm transB"
    inits = [numpy_helper.from_array(np.float32(0.02), "x_scale"), numpy_helper.from_array(U8(128), "x_zero"),
             numpy_helper.from_array(np.ascontiguousarray(w.T) if transposed else w, "w_q"),
             numpy_helper.from_array(w_scale, "w_scale"), numpy_helper.from_array(rng.integers(-3, 4, n).astype(I8), "w_zero"),
             numpy_helper.from_array(bias, "bias"), numpy_helper.from_array(np.float32(0.05), "y_scale"),
             numpy_helper.from_array(U8(100), "y_zero")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zero"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zero"], ["wd"], axis=0 if transposed else 1)]
    if transposed:
        nodes.append(helper.make_node("Gemm", ["xd", "wd", "bias"], ["p"], transB=1))
    else:
        nodes += [helper.make_node("MatMul", ["xd", "wd"], ["mm"]), helper.make_node("Add", ["mm", "bias"], ["p"])]
    nodes += [helper.make_node("QuantizeLinear", ["p", "y_scale", "y_zero"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "y_scale", "y_zero"], ["y"])]
    graph = helper.make_graph(nodes, "qdq_product", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    compiled = esgraph.compile(esgraph.onnx.load(model))
    assert compiled.stats()["integer_matmuls"] == 1
    got = compiled.run({"x": x})[0]
    assert np.abs(got - want).max() <= 0.05 * 1.0001  # one step of y_scale at most
    assert np.mean(got == want) > 0.95
    assert 0.05 < np.mean(want == 0.05 * (255 - 100)) + np.mean(want == 0.05 * (0 - 100)) < 0.5  # saturates, not only


@pytest.mark.parametrize("b_zero_point", ["scalar", "per column"])
def test_export_runs_on_onnx_runtime(b_zero_point, tmp_path):
    """Exported as a MatMulInteger node that ONNX Runtime runs to numpy's values. b within
    [-64, 64]: ONNX Runtime's u8·s8 kernel, which saturates pairs of products in 16 bits on a
    CPU without VNNI, is exact there."""
    m, k, n = 9, 200, 30
    rng = rng_for("export", b_zero_point)
    a = full_range(rng, (m, k), U8)
    b = rng.integers(-64, 65, (k, n)).astype(I8)
    a_zero_point = U8(77)
    zb = I8(5) if b_zero_point == "scalar" else rng.integers(-10, 11, n).astype(I8)
    with esgraph.GraphBuilder("exported") as g:
        y = ops.matmul_integer(g.input("a", esgraph.u8, [m, k]), g.constant(b), g.constant(a_zero_point), g.constant(zb))
        graph = g.build([y])
    path = str(tmp_path / "exported.onnx")
    esgraph.onnx.save(graph, path)
    exported = onnx.load(path)
    onnx.checker.check_model(exported)
    assert [node.op_type for node in exported.graph.node] == ["MatMulInteger"]
    want = product_ref(a, b, a_zero_point, zb)
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: a})
    check_exact(got, want)
    # and back into esgraph, on the GEMM again
    compiled = esgraph.compile(path)
    assert compiled.stats()["integer_matmuls"] == 1
    check_exact(compiled.run([a])[0], want)


def dynamic_quantize_ref(x):
    """ONNX's DynamicQuantizeLinear in f32: scale = (max(x, 0) - min(x, 0)) / 255, zero point =
    saturate(round_half_even(-min / scale)), y = saturate(round_half_even(x / scale) + zero point)."""
    low, high = np.minimum(x.min(), np.float32(0)), np.maximum(x.max(), np.float32(0))
    scale = np.float32((high - low) / np.float32(255))
    zero_point = np.clip(np.rint(np.float32(-low / scale)), 0, 255).astype(U8)
    y = np.clip(np.rint((x / scale).astype(np.float32)) + np.float32(zero_point), 0, 255).astype(U8)
    assert scale.dtype == np.float32
    return y, scale, zero_point


def test_dynamic_quantization_chain():
    """DynamicQuantizeLinear(x) -> MatMulInteger(x_q, w, x_zero_point, 0) -> Cast(float) ->
    Mul(x_scale · w_scale), as quantize_dynamic writes a MatMul: the quantized activations,
    their scale and zero point and the int32 sums exactly, the float result to rtol 1e-6."""
    m, k, n = 24, 200, 48
    rng = rng_for("dynamic")
    x = (rng.standard_normal((m, k)) * 3 + 0.7).astype(np.float32)
    w = full_range(rng, (k, n), I8)
    w_scale = np.float32(0.0123)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(0, I8), "w_zero_point"),
             numpy_helper.from_array(np.array(w_scale), "w_scale")]
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["x_q", "x_scale", "x_zero_point"]),
             helper.make_node("MatMulInteger", ["x_q", "w", "x_zero_point", "w_zero_point"], ["sums"]),
             helper.make_node("Cast", ["sums"], ["sums_f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x_scale", "w_scale"], ["scales"]),
             helper.make_node("Mul", ["sums_f", "scales"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n]),
               helper.make_tensor_value_info("x_q", TensorProto.UINT8, [m, k]),
               helper.make_tensor_value_info("x_scale", TensorProto.FLOAT, []),
               helper.make_tensor_value_info("x_zero_point", TensorProto.UINT8, []),
               helper.make_tensor_value_info("sums", TensorProto.INT32, [m, n])]
    graph = helper.make_graph(nodes, "dynamic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])], outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    compiled = esgraph.compile(esgraph.onnx.load(model))
    assert compiled.stats()["integer_matmuls"] == 1
    y, x_q, x_scale, x_zero_point, sums = compiled.run({"x": x})

    want_q, want_scale, want_zero_point = dynamic_quantize_ref(x)
    assert 0 < want_zero_point < 255 and (want_q == 0).any() and (want_q == 255).any()
    np.testing.assert_array_equal(x_scale, want_scale)
    assert x_zero_point.dtype == U8 and x_zero_point == want_zero_point
    assert x_q.dtype == U8
    np.testing.assert_array_equal(x_q, want_q)
    want_sums = product_ref(want_q, w, want_zero_point, 0)
    check_exact(sums, want_sums)
    want_y = want_sums.astype(np.float32) * np.float32(want_scale * w_scale)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, want_y, rtol=1e-6, atol=0)


def test_packed_integer_weights_are_saved_shared_and_loaded(tmp_path):
    """Two products of one constant pack it once (the second launch takes the first's copy); the
    compiled-model file keeps the packed weights, which a load takes instead of packing again."""
    k, n = 200, 48
    rng = rng_for("saved packed weights")
    b = full_range(rng, (k, n), I8)
    with esgraph.GraphBuilder("twice") as g:
        x = g.input("a", U8, [5, k])
        w, z_b = g.constant(b), g.constant(I8(0))  # two products: a's zero points differ, not b's
        model = esgraph.compile(g.build([ops.matmul_integer(x, w, g.constant(U8(zero)), z_b) for zero in (3, 9)]))
    stats = model.stats()
    assert (stats["integer_matmuls"], stats["weights_packed"], stats["weights_shared"]) == (2, 1, 1)
    a = full_range(rng, (5, k), U8)
    model.save(tmp_path / "m.esgm")
    loaded = esgraph.load_model(tmp_path / "m.esgm")
    assert (loaded.stats()["weights_packed"], loaded.stats()["weights_loaded"]) == (0, 1)
    for got, zero in zip(loaded.run({"a": a}), (3, 9)):
        check_exact(got, product_ref(a, b, U8(zero), I8(0)))


def integer_kernel(model):
    """The integer GEMM's kernel a compiled matmul_integer runs on, as its launch names it."""
    return re.search(r"esgraph integer_gemm:(\w+)", model.to_dot()).group(1)


def machine_has_vnni():
    """Whether this CPU runs the VNNI kernel (option vnni=1, the default, picks it where it can)."""
    with esgraph.GraphBuilder("probe") as g:
        y = ops.matmul_integer(g.input("a", U8, [1, 4]), g.constant(np.ones((4, 2), I8)), g.constant(U8(0)), g.constant(I8(0)))
        return integer_kernel(esgraph.compile(g.build([y]))) == "avx512_vnni"


@pytest.mark.parametrize("vnni", [0, 1], ids=["vpmaddwd", "vpdpbusd"])
@pytest.mark.parametrize("pair", PAIRS, ids=PAIR_IDS)
def test_both_kernels_are_exact(vnni, pair):
    """The integer GEMM's two kernels (backend option vnni): int16 pairs on vpmaddwd, and
    AVX512-VNNI's vpdpbusd on bytes (u8 weights shifted into s8, s8 rows into u8, the zero
    points taken off after the sums by the columns' and rows' sums), each bit for bit numpy's
    int32 arithmetic over full-range values and zero points, per row and per column; K past
    VNNI's 1024-deep blocks too."""
    if vnni and not machine_has_vnni():
        pytest.skip("this CPU lacks AVX512-VNNI")
    a_type, b_type = pair
    rng = rng_for("kernels", vnni, str(pair))
    for m, k, n in [(1, 7, 30), (6, 1000, 100), (130, 257, 25), (9, 2100, 30)]:
        a, b = full_range(rng, (m, k), a_type), full_range(rng, (k, n), b_type)
        za, zb = full_range(rng, (m,), a_type), full_range(rng, (n,), b_type)
        with esgraph.GraphBuilder("kernel") as g:
            y = ops.matmul_integer(g.input("a", a_type, [m, k]), g.constant(b), g.input("za", a_type, [m]), g.constant(zb))
            model = esgraph.compile(g.build([y]), backend_options={"vnni": vnni})
        assert integer_kernel(model) == ("avx512_vnni" if vnni else "avx2")
        check_exact(model.run({"a": a, "za": za})[0], product_ref(a, b, za, zb))


@pytest.mark.parametrize("vnni", [0, 1], ids=["vpmaddwd", "vpdpbusd"])
def test_a_saved_model_keeps_its_kernels_packed_weights(vnni, tmp_path):
    """A compiled-model file holds the weights packed for the kernel it was compiled with (its
    option vnni is saved with it), and a load on this CPU takes them as they are. (On a CPU
    without VNNI, a file packed for it packs again for vpmaddwd: the two kernels' packed sizes
    never coincide, tests/cpp/cpu/integer_gemm_test.cpp.)"""
    if vnni and not machine_has_vnni():
        pytest.skip("this CPU lacks AVX512-VNNI")
    rng = rng_for("saved kernel", vnni)
    b = full_range(rng, (64, 24), I8)
    with esgraph.GraphBuilder("saved") as g:
        y = ops.matmul_integer(g.input("a", U8, [2, 64]), g.constant(b), g.constant(U8(3)), g.constant(I8(1)))
        esgraph.compile(g.build([y]), backend_options={"vnni": vnni}).save(tmp_path / "m.esgm")
    loaded = esgraph.load_model(tmp_path / "m.esgm")
    assert integer_kernel(loaded) == ("avx512_vnni" if vnni else "avx2")
    assert (loaded.stats()["weights_loaded"], loaded.stats()["weights_packed"]) == (1, 0)
    a = full_range(rng, (2, 64), U8)
    check_exact(loaded.run({"a": a})[0], product_ref(a, b, U8(3), I8(1)))
