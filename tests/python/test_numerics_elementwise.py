"""Elementwise ops on seeded random data against numpy: math, comparisons, logic, casts, with
broadcasting (size-1, size-0 and rank-0 operands) and the integer and float edge cases.

See numerics.py for the comparison rules."""

import numpy as np
import pytest

import esgraph
from esgraph import ops

from numerics import build, run, check, rng_for, normal, positive, small_ints, f32, f64, i32, i64, UNARY, REDUCE


@pytest.mark.parametrize("shape", [(3, 4, 5), (0, 3), ()], ids=str)
@pytest.mark.parametrize("name", UNARY)
def test_unary_float(name, shape):
    fn, ref, data = UNARY[name]
    x = data(rng_for(name, shape), shape)
    check(run(fn, x), ref(x.astype(f64)).astype(f32))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, i32, i64])
@pytest.mark.parametrize("name, fn, ref", [("abs", ops.abs, np.abs), ("neg", ops.neg, np.negative),
                                           ("relu", ops.relu, lambda x: np.maximum(x, 0)),
                                           ("sign", ops.sign, np.sign)])
def test_unary_int(name, fn, ref, dtype):
    x = small_ints(rng_for(name, dtype), (4, 6), dtype, -50, 51)
    check(run(fn, x), ref(x).astype(dtype))


def test_is_nan_and_is_inf():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -1.5, 3.4e38, -3.4e38], dtype=f32)
    check(run(ops.is_nan, x), np.isnan(x))
    check(run(ops.is_inf, x), np.isinf(x))
    check(run(lambda t: ops.is_inf(t, negative=False), x), np.isposinf(x))
    check(run(lambda t: ops.is_inf(t, positive=False), x), np.isneginf(x))
    big = np.array([1e300, -np.inf, np.nan], dtype=f64)  # finite beyond f32's range stays finite
    check(run(ops.is_inf, big), np.isinf(big))


def test_logical_not():
    x = rng_for().random((3, 5)) < 0.5
    check(run(ops.logical_not, x), ~x)


# Broadcast pairs of shapes, with size-1, size-0 and rank-0 operands.
BROADCAST = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((3, 1, 1), (1, 4, 2)),
             ((), (2, 3)), ((5, 1), ()), ((1,), (5, 0)), ((0, 3), (1, 3)), ((2, 0, 1), (1, 4))]

FLOAT_BINARY = {
    "add": (ops.add, np.add), "sub": (ops.sub, np.subtract), "mul": (ops.mul, np.multiply),
    "div": (ops.div, np.divide), "pow": (ops.pow, np.power),
    "maximum": (ops.maximum, np.maximum), "minimum": (ops.minimum, np.minimum),
}
COMPARE = {
    "equal": (ops.equal, np.equal), "not_equal": (ops.not_equal, np.not_equal),
    "less": (ops.less, np.less), "less_equal": (ops.less_equal, np.less_equal),
    "greater": (ops.greater, np.greater), "greater_equal": (ops.greater_equal, np.greater_equal),
}


@pytest.mark.parametrize("shapes", BROADCAST, ids=str)
@pytest.mark.parametrize("name", FLOAT_BINARY)
def test_binary_float_broadcast(name, shapes):
    fn, ref = FLOAT_BINARY[name]
    rng = rng_for(name, shapes)
    a = positive(rng, shapes[0]) if name == "pow" else normal(rng, shapes[0])
    b = (positive(rng, shapes[1]) * np.sign(normal(rng, shapes[1])) if name == "div"
         else normal(rng, shapes[1], scale=1.0))
    check(run(fn, a, b), ref(a.astype(f64), b.astype(f64)).astype(f32))


@pytest.mark.parametrize("dtype", [f32, i32, i64, np.int8, np.uint8])
@pytest.mark.parametrize("shapes", BROADCAST[:5], ids=str)
@pytest.mark.parametrize("name", COMPARE)
def test_comparison(name, shapes, dtype):
    fn, ref = COMPARE[name]
    rng = rng_for(name, shapes, dtype)
    a, b = small_ints(rng, shapes[0], dtype, 0, 3), small_ints(rng, shapes[1], dtype, 0, 3)  # many ties
    check(run(fn, a, b), ref(a, b))


def test_equal_on_bools():
    rng = rng_for()
    a, b = rng.random((4, 3)) < 0.5, rng.random((3,)) < 0.5
    check(run(ops.equal, a, b), a == b)
    check(run(ops.not_equal, a, b), a != b)


def _int_div(a, b):
    """Integer division truncating toward zero, with 0 for a division by zero."""
    safe = np.where(b == 0, 1, b)
    q = np.abs(a) // np.abs(safe) * np.sign(a) * np.sign(safe)
    return np.where(b == 0, 0, q)


INT_BINARY = {
    "add": (ops.add, np.add), "sub": (ops.sub, np.subtract), "mul": (ops.mul, np.multiply),
    "div": (ops.div, _int_div), "maximum": (ops.maximum, np.maximum), "minimum": (ops.minimum, np.minimum),
}


@pytest.mark.parametrize("dtype", [np.int8, np.int16, i32, i64])
@pytest.mark.parametrize("shapes", BROADCAST[1:4], ids=str)
@pytest.mark.parametrize("name", INT_BINARY)
def test_binary_int_broadcast(name, shapes, dtype):
    fn, ref = INT_BINARY[name]
    rng = rng_for(name, shapes, dtype)
    a, b = small_ints(rng, shapes[0], dtype, -11, 12), small_ints(rng, shapes[1], dtype, -4, 5)
    check(run(fn, a, b), ref(a.astype(i64), b.astype(i64)).astype(dtype))


def test_integer_division_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 0, 5, -5], i32)
    b = np.array([2, 2, -2, -2, 3, 0, 0], i32)
    check(run(ops.div, a, b), np.array([3, -3, -3, 3, 0, 0, 0], i32))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int8], ids=lambda t: np.dtype(t).name)
def test_signed_edges_wrap_around(dtype):
    """The minimum divided by -1 is the minimum (the one quotient that overflows: the CPU's
    division traps on it, which killed the process for i64); its remainder is 0; add, sub, mul,
    neg and abs wrap around; the same when the operands are constants folded at compile."""
    lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    a, b = np.array([lo, hi, lo, lo, 7], dtype), np.array([-1, 1, 0, 1, -2], dtype)
    with np.errstate(over="ignore", divide="ignore"):
        want = {"div": np.array([lo, hi, 0, lo, -3], dtype), "add": a + b, "sub": a - b, "mul": a * b}
    for name, expected in want.items():
        check(run(getattr(ops, name), a, b), expected)
        with esgraph.GraphBuilder("folded") as gb:
            zero = gb.input("z", np.dtype(dtype), [5])
            g = gb.build([getattr(ops, name)(gb.constant(a), gb.constant(b)) + zero])
        check(esgraph.compile(g)(np.zeros(5, dtype)), expected)
    check(run(ops.neg, a), np.array([lo, -hi, lo, lo, -7], dtype))
    check(run(ops.abs, a), np.array([lo, hi, lo, lo, 7], dtype))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32], ids=lambda t: np.dtype(t).name)
def test_fused_integer_members_wrap_around_as_single_ops_do(dtype):
    """A group of integer members (one fused kernel) wraps each member's result into its dtype, as
    the op alone does: i32 (MAX + 1) * 1 is MIN (the fused kernel carried members in doubles and
    saturated them: MAX), i8 127 * 127 is 1. (64-bit integers do not fuse.)"""
    info = np.iinfo(dtype)
    lo, hi = dtype(info.min), dtype(info.max)
    a = np.array([hi, hi, lo, 127 if info.max >= 127 else 1, hi - dtype(2)], dtype)
    b = np.array([1, hi, 1, 127 if info.max >= 127 else 1, 1], dtype)
    z = np.array([0, 0, 0, 0, 1], dtype)
    with esgraph.GraphBuilder("fused") as gb:
        x, y, w = (gb.input(n, np.dtype(dtype), [5]) for n in "xyz")
        g = gb.build([(x + y) * y + w - y])
    model = esgraph.compile(g)
    assert model.stats()["fused_groups"] == 1
    with np.errstate(over="ignore"):
        want = (a + b) * b + z - b
    check(model(a, b, z), want)


def test_u8_add_mul():
    rng = rng_for()
    a, b = rng.integers(0, 15, (3, 4)).astype(np.uint8), rng.integers(0, 15, (4,)).astype(np.uint8)
    check(run(ops.add, a, b), a + b)
    check(run(ops.mul, a, b), a * b)


UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]


def _unsigned_operands(dtype):
    """Pairs over the whole range of `dtype`: zero, one, the top values and its middle (for u64,
    the values above int64's range), then random ones; b never zero (division is separate)."""
    top = np.iinfo(dtype).max
    edges = [0, 1, 2, top, top - 1, top // 2, top // 2 + 1, top // 3]
    rng = rng_for(dtype)
    a = np.concatenate([np.array(edges, dtype), rng.integers(0, top, 8, dtype=dtype, endpoint=True)])
    b = np.concatenate([np.array(edges[::-1], dtype), rng.integers(0, top, 8, dtype=dtype, endpoint=True)])
    return a, np.maximum(b, 1).astype(dtype)


UNSIGNED_BINARY = {
    "add": (ops.add, np.add), "sub": (ops.sub, np.subtract), "mul": (ops.mul, np.multiply),  # all wrap
    "div": (ops.div, np.floor_divide), "maximum": (ops.maximum, np.maximum), "minimum": (ops.minimum, np.minimum),
    "less": (ops.less, np.less), "greater_equal": (ops.greater_equal, np.greater_equal),
    "equal": (ops.equal, np.equal),
}


@pytest.mark.parametrize("dtype", UNSIGNED, ids=lambda t: np.dtype(t).name)
def test_shifts_follow_onnx_bitshift(dtype):
    """shift_left and shift_right against Python's integers: bits moved past the width are
    dropped, and a shift by the width or more gives 0 (ONNX's BitShift imported as pow, cast and
    mul gave x * UINT64_MAX for a u64 shifted by 64)."""
    bits = np.iinfo(dtype).bits
    a, _ = _unsigned_operands(dtype)
    by = np.arange(bits + 3, dtype=dtype).reshape(-1, 1)  # every shift, and three beyond the width
    left = [[(int(x) << int(s)) & (2**bits - 1) if s < bits else 0 for x in a] for s in by[:, 0]]
    right = [[int(x) >> int(s) if s < bits else 0 for x in a] for s in by[:, 0]]
    check(run(ops.shift_left, a, by), np.array(left, dtype))
    check(run(ops.shift_right, a, by), np.array(right, dtype))


@pytest.mark.parametrize("dtype", UNSIGNED, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("name", UNSIGNED_BINARY)
def test_binary_unsigned_full_range(name, dtype):
    fn, ref = UNSIGNED_BINARY[name]
    a, b = _unsigned_operands(dtype)
    with np.errstate(over="ignore"):
        expected = ref(a, b)
    check(run(fn, a, b), expected)
    check(run(fn, a[:, None], b[None, :5]), ref(a[:, None], b[None, :5]))  # broadcast walk


@pytest.mark.parametrize("dtype", UNSIGNED, ids=lambda t: np.dtype(t).name)
def test_unsigned_division_by_zero_gives_zero(dtype):
    a = np.array([5, np.iinfo(dtype).max], dtype)
    check(run(ops.div, a, np.zeros(2, dtype)), np.zeros(2, dtype))


@pytest.mark.parametrize("dtype", UNSIGNED, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("name", ["reduce_max", "reduce_min", "reduce_sum"])
def test_reduce_unsigned_full_range(name, dtype):
    a, b = _unsigned_operands(dtype)
    x = np.stack([a, b]).reshape(2, 4, 4)
    for axes in ([], [1], [0, 2]):
        with np.errstate(over="ignore"):
            expected = REDUCE[name](x, axis=tuple(axes) if axes else None).astype(dtype)
        check(run(lambda t: getattr(ops, name)(t, axes=axes), x), expected)


def test_u64_above_int64_casts_and_chains_exactly():
    x = np.array([2**63, 2**64 - 1, 2**63 + 12345, 7], np.uint64)
    check(run(lambda t: ops.cast(t, esgraph.f64), x), x.astype(f64))
    back = x[[0, 2, 3]].astype(f64)  # (2**64 - 1 rounds to 2**64, which u64 does not hold)
    check(run(lambda t: ops.cast(t, esgraph.u64), back), back.astype(np.uint64))
    # A chain that fusion would otherwise carry in double tiles: exact to the last bit.
    check(run(lambda t: ops.maximum(t + t, t) - 1, x), np.maximum(x + x, x) - np.uint64(1))
    check(run(lambda t: ops.argmax(t, axis=0), x), np.array(1, i64))


@pytest.mark.parametrize("shapes", BROADCAST, ids=str)
@pytest.mark.parametrize("name, fn, ref", [("and", ops.logical_and, np.logical_and),
                                           ("or", ops.logical_or, np.logical_or)])
def test_logical_broadcast(name, fn, ref, shapes):
    rng = rng_for(name, shapes)
    a, b = rng.random(shapes[0]) < 0.5, rng.random(shapes[1]) < 0.5
    check(run(fn, a, b), ref(a, b))


@pytest.mark.parametrize("dtype", [f32, i32, np.bool_])
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3), (2, 3)), ((3, 1), (1, 4), ()), ((4,), (2, 1, 1), (3, 1)),
                                    ((0, 1), (1, 2), (2,))], ids=str)
def test_where(shapes, dtype):
    rng = rng_for(shapes, dtype)
    cond = rng.random(shapes[0]) < 0.5
    lo, hi = (0, 2) if dtype == np.bool_ else (-9, 10)
    a, b = (small_ints(rng, s, i32, lo, hi).astype(dtype) for s in shapes[1:])
    check(run(ops.where, cond, a, b), np.where(cond, a, b))


CAST_TYPES = [f32, i32, i64, np.bool_]


@pytest.mark.parametrize("to", CAST_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("src", CAST_TYPES, ids=lambda t: np.dtype(t).name)
def test_cast(src, to):
    rng = rng_for(src, to)
    x = (rng.standard_normal((4, 5)) * 50).astype(f64)
    x[0, :3] = [0.0, -0.7, 0.3]  # zeros and magnitudes below one
    if np.dtype(src).kind == "i":
        x = np.trunc(x)
    x = x.astype(src)
    check(run(lambda t: ops.cast(t, np.dtype(to)), x), x.astype(to))  # numpy truncates toward zero too


def test_cast_float_to_int_truncates_toward_zero():
    x = np.array([1.7, -2.2, -0.5, 0.5, 2.999, -2.999], f32)
    check(run(lambda t: ops.cast(t, esgraph.i32), x), np.array([1, -2, 0, 0, 2, -2], i32))
    check(run(lambda t: ops.cast(t, esgraph.i64), x), np.array([1, -2, 0, 0, 2, -2], i64))


def test_a_fused_comparison_of_float_members_compares_the_floats():
    # f64 groups run on the double/int64 tiles: a bool result of float members must compare in
    # double (0.8 > 0.2), not the members truncated to integers (0 > 0).
    x = np.array([0.4, -0.3, 1.6, 2.5], f64)
    graph, _ = build(lambda t: (t * 2.0) > (t * 3.0 - 1.0), x)
    for fusion in (True, False):
        check(esgraph.compile(graph, fusion=fusion)(x), (x * 2.0) > (x * 3.0 - 1.0))
    assert esgraph.compile(graph).stats()["fused_groups"] == 1
