"""Values computed by compiled esgraph models, checked against an independent reference.

1. Every YAML example that gives values for all its inputs and outputs runs compiled, with the
   example's input values, and must reproduce the example's output values.
2. Every op runs on seeded random data and is compared with numpy (or with a short numpy
   reference written here, for conv2d and pooling).
3. One graph gives the same values whatever the compile options, and at two sizes of a
   symbolic batch dimension.
4. Bad input at run time is refused with the documented errors; array-likes are converted.

Floats are compared with rtol=1e-5, atol=1e-6; integers and bools exactly, and the dtype of
every result must be the one expected. References are computed in float64 and then cast.
"""
import math
import warnings
import zlib

import numpy as np
import pytest

import esgraph
from esgraph import ops

from esgraph_op_set import OP_SET, build_value_example, value_examples

RTOL, ATOL = 1e-5, 1e-6
f32, f64, i32, i64 = np.float32, np.float64, np.int32, np.int64


# ---- helpers ---------------------------------------------------------------------------------
def build(fn, *arrays, symbolic=None):
    """The graph of `fn` over one input per array (named x0, x1, …; dtype and shape of the array).

    `symbolic` maps an input index to a list of (axis, symbol name) made dynamic."""
    with esgraph.GraphBuilder("numerics") as b:
        inputs = []
        for i, a in enumerate(arrays):
            shape = list(a.shape)
            for axis, name in (symbolic or {}).get(i, []):
                shape[axis] = name
            inputs.append(b.input(f"x{i}", a.dtype, shape))
        result = fn(*inputs)
    several = isinstance(result, (list, tuple))
    return b.build(list(result) if several else [result]), several


def run(fn, *arrays, **options):
    """Builds `fn` over graph inputs shaped as `arrays`, compiles with `options`, runs on `arrays`.

    Returns one numpy array, or a list when `fn` returns a list or tuple of tensors."""
    graph, several = build(fn, *arrays)
    outs = esgraph.compile(graph, **options).run(list(arrays))
    return outs if several else outs[0]


def check(got, want):
    """`got` has the dtype and shape of `want` and its values (floats to RTOL/ATOL, others exactly)."""
    want = np.asarray(want)
    assert isinstance(got, np.ndarray)
    assert got.dtype == want.dtype, f"dtype {got.dtype}, expected {want.dtype}"
    assert got.shape == want.shape, f"shape {got.shape}, expected {want.shape}"
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    else:
        np.testing.assert_array_equal(got, want)


def rng_for(*key):
    """A generator seeded by the test's parameters, so that every case has its own data."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def normal(rng, shape, dtype=f32, scale=2.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def positive(rng, shape, dtype=f32):
    return rng.uniform(0.1, 4.0, shape).astype(dtype)


def small_ints(rng, shape, dtype=i32, lo=-5, hi=6):
    return rng.integers(lo, hi, shape).astype(dtype)


# ---- 1. YAML examples with values ------------------------------------------------------------
def _example_cases():
    return [pytest.param(op, example, id=f"{op.name}-{op.examples.index(example) + 1}")
            for op, example in value_examples()]


@pytest.mark.parametrize("op, example", _example_cases())
def test_yaml_example_values(op, example):
    graph, feeds, expected = build_value_example(op, example)
    got = esgraph.compile(graph).run(feeds)
    assert len(got) == len(expected)
    for g, want in zip(got, expected):
        check(g, want)


def test_every_op_but_control_flow_has_a_value_example():
    """The example test above is not vacuous: it runs at least one example of every op (send and
    recv need a peer, which one process has not: tests/distributed runs them)."""
    covered = {p.values[0].name for p in _example_cases()}
    assert {op.name for op in OP_SET.ops} - covered == {"if", "while", "send", "recv"}


# ---- 2. numpy parity on random data: elementwise ---------------------------------------------
def _erf(x):
    return np.vectorize(math.erf, otypes=[f64])(x)


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def _rounding_data(rng, shape):
    """Random values with exact halves (ties) and zeros mixed in."""
    x = normal(rng, shape)
    ties = rng.integers(-8, 9, shape) / 2
    return np.where(rng.random(shape) < 0.5, ties, x).astype(f32)


# name: (esgraph call, float64 reference, data)
UNARY = {
    "exp": (ops.exp, np.exp, normal),
    "log": (ops.log, np.log, positive),
    "sqrt": (ops.sqrt, np.sqrt, positive),
    "rsqrt": (ops.rsqrt, lambda x: 1 / np.sqrt(x), positive),
    "reciprocal": (ops.reciprocal, lambda x: 1 / x, lambda r, s: positive(r, s) * np.sign(normal(r, s))),
    "sigmoid": (ops.sigmoid, lambda x: 1 / (1 + np.exp(-x)), normal),
    "tanh": (ops.tanh, np.tanh, normal),
    "relu": (ops.relu, lambda x: np.maximum(x, 0), normal),
    "leaky_relu": (lambda x: ops.leaky_relu(x, alpha=0.2), lambda x: np.where(x >= 0, x, 0.2 * x), normal),
    "leaky_relu default": (ops.leaky_relu, lambda x: np.where(x >= 0, x, 0.01 * x), normal),
    "gelu exact": (ops.gelu, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), normal),
    "gelu tanh": (lambda x: ops.gelu(x, approximate="tanh"), _gelu_tanh, normal),
    "silu": (ops.silu, lambda x: x / (1 + np.exp(-x)), normal),
    "erf": (ops.erf, _erf, normal),
    "sin": (ops.sin, np.sin, normal),
    "cos": (ops.cos, np.cos, normal),
    "abs": (ops.abs, np.abs, _rounding_data),
    "neg": (ops.neg, np.negative, normal),
    "floor": (ops.floor, np.floor, _rounding_data),
    "ceil": (ops.ceil, np.ceil, _rounding_data),
    "round": (ops.round, np.round, _rounding_data),
    "sign": (ops.sign, np.sign, _rounding_data),
    "clip": (lambda x: ops.clip(x, min=-0.5, max=0.7), lambda x: np.clip(x, -0.5, 0.7), normal),
    "clip min only": (lambda x: ops.clip(x, min=0.25), lambda x: np.maximum(x, 0.25), normal),
    "tan": (ops.tan, np.tan, normal),
    "asin": (ops.asin, np.arcsin, lambda r, s: np.tanh(normal(r, s)).astype(f32)),
    "acos": (ops.acos, np.arccos, lambda r, s: np.tanh(normal(r, s)).astype(f32)),
    "atan": (ops.atan, np.arctan, normal),
    "sinh": (ops.sinh, np.sinh, normal),
    "cosh": (ops.cosh, np.cosh, normal),
    "asinh": (ops.asinh, np.arcsinh, normal),
    "acosh": (ops.acosh, np.arccosh, lambda r, s: (1 + positive(r, s)).astype(f32)),
    "atanh": (ops.atanh, np.arctanh, lambda r, s: np.tanh(normal(r, s)).astype(f32)),
    "softplus": (ops.softplus, lambda x: np.logaddexp(0, x), lambda r, s: (30 * normal(r, s)).astype(f32)),
    "softsign": (ops.softsign, lambda x: x / (1 + np.abs(x)), normal),
    "elu": (lambda x: ops.elu(x, alpha=0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x)), normal),
    "selu": (ops.selu, lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)), normal),
    "hard_sigmoid": (ops.hard_sigmoid, lambda x: np.clip(0.2 * x + 0.5, 0, 1), lambda r, s: (4 * normal(r, s)).astype(f32)),
    "hard_swish": (ops.hard_swish, lambda x: x * np.clip(x / 6 + 0.5, 0, 1), lambda r, s: (4 * normal(r, s)).astype(f32)),
    "mish": (ops.mish, lambda x: x * np.tanh(np.logaddexp(0, x)), lambda r, s: (4 * normal(r, s)).astype(f32)),
}


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


# ---- 2. reductions and normalizations --------------------------------------------------------
REDUCE = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max, "reduce_min": np.min,
          "reduce_prod": np.prod}
AXES = [[], [0], [1, 3], [-1], [-3, -1], [2, 0], [0, 1, 2, 3]]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("name", REDUCE)
def test_reduce_float(name, axes, keepdims):
    rng = rng_for(name, axes, keepdims)
    x = rng.uniform(0.5, 1.5, (2, 3, 4, 5)).astype(f32) if name == "reduce_prod" else normal(rng, (2, 3, 4, 5))
    axis = tuple(axes) if axes else None
    got = run(lambda t: getattr(ops, name)(t, axes=axes, keepdims=keepdims), x)
    check(got, REDUCE[name](x.astype(f64), axis=axis, keepdims=keepdims).astype(f32))


@pytest.mark.parametrize("dtype", [i32, i64])
@pytest.mark.parametrize("name", ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod"])
def test_reduce_int(name, dtype):
    x = small_ints(rng_for(name, dtype), (3, 4, 2), dtype, -2, 3)  # a product of 24 stays in i32
    for axes in ([], [1], [-1, 0]):
        axis = tuple(axes) if axes else None
        got = run(lambda t: getattr(ops, name)(t, axes=axes), x)
        check(got, REDUCE[name](x, axis=axis).astype(dtype))


@pytest.mark.parametrize("name, identity", [("reduce_sum", 0.0), ("reduce_prod", 1.0)])
def test_reduce_over_an_empty_axis(name, identity):
    x = np.zeros((2, 0, 3), f32)
    check(run(lambda t: getattr(ops, name)(t, axes=[1]), x), np.full((2, 3), identity, f32))
    check(run(lambda t: getattr(ops, name)(t, axes=[1], keepdims=True), x), np.full((2, 1, 3), identity, f32))


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reduce(name, axis, keepdims):
    x = small_ints(rng_for(name, axis, keepdims), (3, 4, 5), f32, 0, 4)  # ties: the first one wins
    ref = getattr(np, name)(x, axis=axis, keepdims=keepdims).astype(i64)
    check(run(lambda t: getattr(ops, name)(t, axis=axis, keepdims=keepdims), x), ref)


def test_arg_reduce_int_input():
    x = small_ints(rng_for(), (4, 6), i32, -3, 3)
    check(run(lambda t: ops.argmax(t, axis=1), x), np.argmax(x, axis=1).astype(i64))
    check(run(lambda t: ops.argmin(t, axis=0), x), np.argmin(x, axis=0).astype(i64))


def _softmax(z, axis):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
def test_softmax_and_log_softmax(axis):
    x = normal(rng_for(axis), (3, 4, 5), scale=4.0)
    z = x.astype(f64)
    check(run(lambda t: ops.softmax(t, axis=axis), x), _softmax(z, axis).astype(f32))
    check(run(lambda t: ops.log_softmax(t, axis=axis), x), np.log(_softmax(z, axis)).astype(f32))


def test_softmax_default_axis_is_last():
    x = normal(rng_for(), (3, 4))
    check(run(ops.softmax, x), _softmax(x.astype(f64), -1).astype(f32))
    check(run(ops.log_softmax, x), np.log(_softmax(x.astype(f64), -1)).astype(f32))


@pytest.mark.parametrize("x_shape, mask_shape", [((2, 4, 5), (5,)), ((2, 4, 5), (4, 1)), ((2, 4, 5), (2, 1, 5)),
                                                ((3, 2, 4, 40), (3, 1, 1, 40)), ((3, 2, 4, 40), (1, 2, 4, 1)), ((2, 7), ())],
                         ids=str)
def test_softmax_with_scale_and_mask(x_shape, mask_shape):
    """The fast kernel's masked rows (a mask per element, per row, per batch of rows: attention's
    padding mask [N, 1, 1, S]) against numpy."""
    rng = rng_for(x_shape, mask_shape)
    x = normal(rng, x_shape)
    mask = np.where(rng.random(mask_shape) < 0.3, -1e4, 0).astype(f32)
    g = build(lambda t, m: ops.softmax(t, mask=m, scale=0.5, axis=-1), x, mask)[0]
    model = esgraph.compile(g)
    logits = f32(0.5) * x + mask  # in f32, as the kernel forms them (adding -1e4 rounds x's low bits away)
    check(model(x, mask), _softmax(logits.astype(f64), -1).astype(f32))
    assert model.stats()["fast_kernels"] == 1


def test_softmax_of_large_values_is_stable():
    x = np.array([[1000, 1001, 1002], [-1000, -1000, -1000]], f32)
    check(run(ops.softmax, x), _softmax(x.astype(f64), -1).astype(f32))
    check(run(ops.log_softmax, x), np.log(_softmax(x.astype(f64), -1)).astype(f32))


def _layer_norm(x, axis, scale=None, bias=None, eps=1e-5):
    axes = tuple(range(axis % x.ndim, x.ndim))
    y = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
    return y * (1 if scale is None else scale) + (0 if bias is None else bias)


def _rms_norm(x, axis, scale=None, eps=1e-6):
    axes = tuple(range(axis % x.ndim, x.ndim))
    return x / np.sqrt((x * x).mean(axes, keepdims=True) + eps) * (1 if scale is None else scale)


@pytest.mark.parametrize("with_scale, with_bias", [(False, False), (True, False), (True, True), (False, True)])
@pytest.mark.parametrize("axis", [-1, 1, -2, 2])
def test_layer_norm(axis, with_scale, with_bias):
    rng = rng_for(axis, with_scale, with_bias)
    x = normal(rng, (2, 3, 8)) + 3.0
    trailing = x.shape[axis % 3:]
    extra = {}
    if with_scale:
        extra["scale"] = normal(rng, trailing)
    if with_bias:
        extra["bias"] = normal(rng, trailing)
    names = list(extra)
    got = run(lambda t, *p: ops.layer_norm(t, axis=axis, **dict(zip(names, p))), x, *extra.values())
    check(got, _layer_norm(x.astype(f64), axis, extra.get("scale"), extra.get("bias")).astype(f32))


@pytest.mark.parametrize("n", [7, 512, 513, 100003])
def test_row_kernels_over_long_rows_and_offset_data(n):
    # The f32 row kernels sum in f32 lanes within blocks: long rows and a mean far from zero
    # with a small spread (the case a one-pass variance loses) still match float64 numpy.
    rng = rng_for(n)
    x = (rng.standard_normal((3, n)) * 0.01 + 1000.0).astype(f32)
    check(run(ops.layer_norm, x), _layer_norm(x.astype(f64), -1).astype(f32))
    outlier = rng.standard_normal((2, n)).astype(f32)  # an outlier first: the statistics must not center on it
    outlier[:, 0] = 100.0
    check(run(ops.layer_norm, outlier), _layer_norm(outlier.astype(f64), -1).astype(f32))
    huge = np.array([[3e19, 1, 1, 1]], f32)  # squares beyond f32's range
    check(run(ops.rms_norm, huge), _rms_norm(huge.astype(f64), -1).astype(f32))
    y = (rng.standard_normal((3, n)) * 4).astype(f32)
    check(run(ops.softmax, y), _softmax(y.astype(f64), -1).astype(f32))
    check(run(lambda t: ops.softmax(t, scale=-0.5), y), _softmax(-0.5 * y.astype(f64), -1).astype(f32))


def test_layer_norm_epsilon():
    x = np.array([[1, 1.1, 0.9, 1.0]], f32)
    check(run(lambda t: ops.layer_norm(t, epsilon=0.5), x), _layer_norm(x.astype(f64), -1, eps=0.5).astype(f32))


@pytest.mark.parametrize("with_scale", [False, True])
@pytest.mark.parametrize("axis", [-1, -2, 1])
def test_rms_norm(axis, with_scale):
    rng = rng_for(axis, with_scale)
    x = normal(rng, (2, 3, 8))
    scale = normal(rng, x.shape[axis % 3:]) if with_scale else None
    if with_scale:
        got = run(lambda t, s: ops.rms_norm(t, axis=axis, scale=s), x, scale)
    else:
        got = run(lambda t: ops.rms_norm(t, axis=axis), x)
    check(got, _rms_norm(x.astype(f64), axis, scale).astype(f32))


def test_rms_norm_epsilon():
    x = np.array([[0.01, -0.02, 0.03]], f32)
    check(run(lambda t: ops.rms_norm(t, epsilon=1e-3), x), _rms_norm(x.astype(f64), -1, eps=1e-3).astype(f32))


# ---- 2. matmul, convolution, pooling ---------------------------------------------------------
@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("a_shape, b_shape", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)),
                                              ((2, 1, 3, 4), (5, 4, 6)), ((1, 3, 1), (2, 1, 2)), ((3, 0), (0, 2)),
                                              ((0, 3, 4), (4, 2))], ids=str)
def test_matmul(a_shape, b_shape, transpose_a, transpose_b):
    rng = rng_for(a_shape, b_shape, transpose_a, transpose_b)
    a, b = normal(rng, a_shape, scale=1.0), normal(rng, b_shape, scale=1.0)
    # Store the operands transposed where the op transposes them back.
    a_in = np.ascontiguousarray(a.swapaxes(-1, -2)) if transpose_a else a
    b_in = np.ascontiguousarray(b.swapaxes(-1, -2)) if transpose_b else b
    got = run(lambda x, y: ops.matmul(x, y, transpose_a=transpose_a, transpose_b=transpose_b), a_in, b_in)
    check(got, np.matmul(a.astype(f64), b.astype(f64)).astype(f32))


@pytest.mark.parametrize("dtype", [i32, i64])
def test_matmul_int(dtype):
    rng = rng_for(dtype)
    a, b = small_ints(rng, (2, 3, 4), dtype), small_ints(rng, (4, 2), dtype)
    check(run(ops.matmul, a, b), np.matmul(a, b))


def test_matmul_operator():
    rng = rng_for()
    a, b = normal(rng, (3, 4)), normal(rng, (4, 2))
    check(run(lambda x, y: x @ y, a, b), (a.astype(f64) @ b.astype(f64)).astype(f32))


# Products with constant 2-D weights run on oneDNN's matmul primitive (weights reordered once).
# (A's shape, N): few rows (one block), rows in blocks of 64 and a last block of 36 (a fused
# head), and a lone product split in shares of rows.
CONSTANT_WEIGHT_PRODUCTS = {"few rows": ((8, 256), 512), "blocks and a tail": ((2, 50, 64), 512),
                            "rows in shares": ((300, 256), 512), "one row": ((1, 1, 96), 40),
                            "columns in shares": ((4, 1024), 1000)}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("epilogue", [False, True])
@pytest.mark.parametrize("case", CONSTANT_WEIGHT_PRODUCTS)
def test_matmul_with_constant_weights_runs_on_the_matmul_primitive(case, epilogue, transpose_b, threads):
    """x @ W (and tanh(x @ W + r), the product heading a fused group): the values of numpy's
    product in f64, on oneDNN's primitive as the report says, alone or under a group's rows."""
    a_shape, n = CONSTANT_WEIGHT_PRODUCTS[case]
    rng = rng_for(case, epilogue, transpose_b)
    x, w = normal(rng, a_shape, scale=1.0), normal(rng, (a_shape[-1], n), scale=1.0)
    r = normal(rng, a_shape[:-1] + (n,), scale=1.0)
    want = x.astype(f64) @ w.astype(f64)
    if epilogue:
        want = np.tanh(want + r)
    with esgraph.GraphBuilder("product") as b:
        xi = b.input("x", esgraph.f32, list(x.shape))
        y = ops.matmul(xi, b.constant(np.ascontiguousarray(w.T) if transpose_b else w), transpose_b=transpose_b)
        g = b.build([ops.tanh(y + b.input("r", esgraph.f32, list(r.shape))) if epilogue else y])
    model = esgraph.compile(g, threads=threads)
    got = model.run([x, r] if epilogue else [x])[0]
    np.testing.assert_allclose(got, want.astype(f32), rtol=1e-4, atol=1e-4)  # sums of up to 256 products of N(0, 1)
    assert "oneDNN matmuls (constant weights reordered once):" in model.report()
    assert model.stats()["library_calls"] == 1 and model.stats()["reference_kernels"] == 0
    # Split with two threads from 2^21 multiply-adds: a lone product's rows in shares (its
    # columns for few rows); a fused head of several blocks of rows spreads its blocks instead.
    rows, k = int(np.prod(a_shape[:-1])), a_shape[-1]
    one_block = rows <= max(64, 16384 // n)
    split = threads == 2 and rows * k * n >= 2 ** 21 and (one_block or not epilogue)
    assert f"({int(split)} split over threads)" in model.report()


def test_matmul_with_weights_from_a_run_stays_on_sgemm():
    rng = rng_for("sgemm")
    x, w = normal(rng, (8, 32)), normal(rng, (32, 16))
    g = build(lambda a, b: ops.matmul(a, b), x, w)[0]
    model = esgraph.compile(g)
    check(model(x, w), (x.astype(f64) @ w.astype(f64)).astype(f32))
    assert "oneDNN matmuls" not in model.report() and model.stats()["library_calls"] == 0


def test_large_constant_weights_reshaped_fold_before_the_product():
    """An exporter's squeeze of 2^18-element weights (above the folding limit for results larger
    than their inputs) folds at compile time: no squeeze runs, and the product takes the
    folded constant as its weights."""
    rng = rng_for("fold")
    x, w = normal(rng, (4, 256)), normal(rng, (1, 1024, 256))
    with esgraph.GraphBuilder("squeezed") as b:
        g = b.build([ops.matmul(b.input("x", esgraph.f32, list(x.shape)), ops.squeeze(b.constant(w), axes=[0]), transpose_b=True)])
    model = esgraph.compile(g)
    np.testing.assert_allclose(model(x), x.astype(f64) @ w[0].T.astype(f64), rtol=1e-4, atol=1e-4)
    assert model.stats()["launches"] == 1 and "oneDNN matmuls" in model.report()


def conv2d_reference(x, w, bias=None, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), groups=1):
    """NCHW cross-correlation with an OIHW filter: one einsum per kernel tap and group."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x.astype(f64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    y = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xg, wg = xp[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og].astype(f64)
        for i in range(kh):
            for j in range(kw):
                r0, c0 = i * dilations[0], j * dilations[1]
                patch = xg[:, :, r0:r0 + strides[0] * (oh - 1) + 1:strides[0], c0:c0 + strides[1] * (ow - 1) + 1:strides[1]]
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, wg[:, :, i, j])
    if bias is not None:
        y += bias.astype(f64)[None, :, None, None]
    return y


def test_conv2d_reference_on_a_hand_computed_case():
    x = np.arange(16, dtype=f64).reshape(1, 1, 4, 4)
    w = np.array([[[[1, 0], [0, -1]]]], f64)
    # Each output is x[r, c] - x[r + 1, c + 1] = -5 everywhere; stride 2 keeps the even corners.
    np.testing.assert_array_equal(conv2d_reference(x, w, strides=(2, 2)), np.full((1, 1, 2, 2), -5.0))
    # A zero pad on top: the first row sees zeros above, so its outputs are -x[0, c + 1].
    y = conv2d_reference(x, w, pads=(1, 0, 0, 0))
    np.testing.assert_array_equal(y[0, 0, 0], -x[0, 0, 0, 1:])


CONV_CASES = {
    "plain": dict(x=(1, 1, 5, 5), w=(1, 1, 3, 3)),
    "channels+bias": dict(x=(2, 3, 6, 5), w=(4, 3, 3, 2), bias=True),
    "strides": dict(x=(1, 2, 7, 8), w=(3, 2, 3, 3), strides=[2, 3]),
    "pads asymmetric": dict(x=(1, 2, 5, 6), w=(2, 2, 3, 3), pads=[1, 0, 2, 1]),
    "dilations": dict(x=(1, 2, 9, 7), w=(2, 2, 3, 2), dilations=[2, 3]),
    "groups": dict(x=(2, 4, 6, 6), w=(6, 2, 3, 3), groups=2, bias=True),
    "depthwise": dict(x=(1, 3, 5, 5), w=(3, 1, 3, 3), groups=3, pads=[1, 1, 1, 1]),
    "depthwise strided dilated": dict(x=(2, 4, 9, 8), w=(4, 1, 3, 2), groups=4, strides=[2, 3], pads=[1, 2, 0, 1],
                                      dilations=[2, 1], bias=True),
    "depthwise wide padding": dict(x=(1, 2, 4, 4), w=(2, 1, 3, 3), groups=2, pads=[3, 3, 3, 3], strides=[2, 2]),
    "channel multiplier": dict(x=(1, 2, 6, 6), w=(4, 1, 3, 3), groups=2, pads=[1, 1, 1, 1]),
    "everything": dict(x=(2, 6, 9, 10), w=(4, 3, 3, 2), strides=[2, 1], pads=[2, 1, 0, 1], dilations=[1, 2],
                       groups=2, bias=True),
    "1x1": dict(x=(1, 4, 3, 3), w=(5, 4, 1, 1)),
    # Columns of more than 512 KB per image: laid out and multiplied in bands of output rows.
    # (Data in quarters, so that the products and their sums are exact in any order.)
    "bands": dict(x=(2, 8, 20, 512), w=(3, 8, 3, 3), pads=[1, 1, 1, 1], bias=True, quarters=True),
    "bands strided": dict(x=(1, 8, 24, 1024), w=(3, 8, 3, 3), strides=[1, 2], pads=[2, 1, 0, 0], dilations=[2, 1],
                          quarters=True),
}


def conv_data(rng, spec):
    """The input and filters of a CONV_CASES entry (popping its shapes from `spec`)."""
    x, w = normal(rng, spec.pop("x"), scale=1.0), normal(rng, spec.pop("w"), scale=1.0)
    if spec.pop("quarters", False):
        x, w = np.round(x * 4) / 4, np.round(w * 4) / 4
    return x, w


@pytest.mark.parametrize("block", [0, 8, 16])
@pytest.mark.parametrize("filters", ["input", "constant"])
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d(case, filters, block):
    """On oneDNN's primitives in every memory format (channel_block 0: row-major), with filters
    given at each run (reordered then) or constant (reordered at compile time)."""
    spec = dict(CONV_CASES[case])
    rng = rng_for(case)
    x, w = conv_data(rng, spec)
    bias = [normal(rng, (w.shape[0],))] if spec.pop("bias", False) else []
    want = conv2d_reference(x, w, *bias, **spec).astype(f32)
    if filters == "input":
        g = build(lambda a, b, *c: ops.conv2d(a, b, bias=c[0] if c else None, **spec), x, w, *bias)[0]
        args = [x, w, *bias]
    else:
        with esgraph.GraphBuilder("conv") as b:
            a = b.input("x", esgraph.f32, x.shape)
            c = b.constant(bias[0]) if bias else None
            g = b.build([ops.conv2d(a, b.constant(w), bias=c, **spec)])
        args = [x]
    model = esgraph.compile(g, backend_options={"channel_block": block})
    check(model.run(args)[0], want)
    assert model.stats()["library_calls"] == 1  # every case is on a primitive


# name: the activation's post-op
CONV_ACTIVATIONS = ["relu", "leaky_relu", "leaky_relu default", "gelu exact", "gelu tanh", "silu", "sigmoid", "tanh", "clip",
                    "clip min only", "elu", "hard_sigmoid", "hard_swish"]


@pytest.mark.parametrize("block", [0, 16])
@pytest.mark.parametrize("name", CONV_ACTIVATIONS)
def test_conv2d_activation_runs_as_a_post_op(name, block):
    """conv2d then an activation: one launch, the activation inside oneDNN's convolution."""
    fn, ref, _ = UNARY[name]
    spec = dict(CONV_CASES["everything"])
    rng = rng_for(name)
    x, w = conv_data(rng, spec)
    bias = normal(rng, (w.shape[0],))
    spec.pop("bias")
    want = ref(conv2d_reference(x, w, bias, **spec)).astype(f32)
    g = build(lambda a, b, c: fn(ops.conv2d(a, b, bias=c, **spec)), x, w, bias)[0]
    model = esgraph.compile(g, backend_options={"channel_block": block})
    stats = model.stats()
    assert stats["launches"] - stats["reorders"] == 1
    assert "1 with their group as post-ops" in model.report()
    np.testing.assert_allclose(model(x, w, bias), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_with_its_epilogue_is_one_kernel(case, threads):
    """relu(conv2d(x, w) + r) * 0.5: the convolution heads the group, which runs as its
    primitive's post-ops (a sum of the residual, relu, a scale)."""
    spec = dict(CONV_CASES[case])
    rng = rng_for(case)
    x, w = conv_data(rng, spec)
    bias = [normal(rng, (w.shape[0],))] if spec.pop("bias", False) else []
    conv = conv2d_reference(x, w, *bias, **spec)
    r = normal(rng, conv.shape)
    want = (np.maximum(conv + r.astype(f64), 0) * 0.5).astype(f32)

    def graph(a, b, res, *c):
        return ops.relu(ops.conv2d(a, b, bias=c[0] if c else None, **spec) + res) * 0.5

    g = build(graph, x, w, r, *bias)[0]
    model = esgraph.compile(g, threads=threads, backend_options={"channel_block": 0})
    stats = model.stats()
    assert (stats["launches"], stats["epilogue_groups"], stats["fused_ops"]) == (1, 1, 4)  # conv2d + add relu mul
    assert "1 with their group as post-ops" in model.report()
    check(model(x, w, r, *bias), want)


# Convolutions big enough to be split over two threads (over 2M multiply-adds): several images
# (3: uneven halves), or one image with its output channels split in whole blocks (40: two
# blocks and a half of 16), grouped ones by whole groups, depthwise ones by channels.
SPLIT_CONV_CASES = {
    "split images": dict(x=(3, 16, 20, 20), w=(40, 16, 3, 3), pads=[1, 1, 1, 1], bias=True),
    "split output channels": dict(x=(1, 24, 30, 30), w=(40, 24, 3, 3), pads=[1, 1, 1, 1], bias=True),
    "split grouped": dict(x=(1, 64, 24, 24), w=(64, 8, 3, 3), groups=8, pads=[1, 1, 1, 1]),
    "split depthwise": dict(x=(1, 72, 120, 120), w=(72, 1, 3, 3), groups=72, strides=[2, 2], pads=[1, 1, 1, 1], bias=True),
}


@pytest.mark.parametrize("constant_filters", [True, False])
@pytest.mark.parametrize("block", [0, 8, 16])
@pytest.mark.parametrize("case", SPLIT_CONV_CASES)
def test_a_large_convolution_splits_over_the_threads(case, block, constant_filters):
    """relu(conv2d(x, w) + r): with two threads the primitive is split into pieces run on the
    model's pool (each piece its slice of images or output channels, the residual summed into
    its slice); the same values as one thread's whole primitive and as numpy."""
    spec = dict(SPLIT_CONV_CASES[case])
    rng = rng_for(case)
    x, w = conv_data(rng, spec)
    bias = [normal(rng, (w.shape[0],))] if spec.pop("bias", False) else []
    conv = conv2d_reference(x, w, *bias, **spec)
    r = normal(rng, conv.shape)
    want = np.maximum(conv + r.astype(f64), 0).astype(f32)
    with esgraph.GraphBuilder("split") as b:
        xi, ri = b.input("x", esgraph.f32, list(x.shape)), b.input("r", esgraph.f32, list(r.shape))
        wi = b.constant(w) if constant_filters else b.input("w", esgraph.f32, list(w.shape))
        bi = b.constant(bias[0]) if bias else None
        g = b.build([ops.relu(ops.conv2d(xi, wi, bias=bi, **spec) + ri)])
    args = [x, r] if constant_filters else [x, r, w]
    got = {}
    for threads in (1, 2):
        model = esgraph.compile(g, threads=threads, backend_options={"channel_block": block})
        assert f"1 with their group as post-ops, {threads - 1} split over threads" in model.report()
        got[threads] = model.run(args)[0]
        np.testing.assert_allclose(got[threads], want, rtol=1e-4, atol=1e-4)  # sums of up to 216 products of N(0, 1)
    # A piece's primitive may sum in another order than the whole one's (seen at block 0 on an
    # AVX2-only Zen 3: 1.7e-5 on one element of a 216-term sum), so equal to within the float32
    # rounding of such sums rather than bit for bit.
    np.testing.assert_allclose(got[2], got[1], rtol=1e-5, atol=5e-5)


def test_conv2d_epilogue_without_post_ops_runs_over_the_result():
    """A member oneDNN has no post-op for (here `x * sigmoid(x)` written out, and an exp): the
    primitive computes the convolution, the group's rows run over its result, still one launch."""
    spec = dict(CONV_CASES["everything"])
    rng = rng_for("no post-ops")
    x, w = conv_data(rng, spec)
    spec.pop("bias")
    conv = conv2d_reference(x, w, **spec)
    want = np.exp(conv / (1 + np.exp(-conv)) * 0.25).astype(f32)
    for block in (0, 8):
        def graph(a, b):
            y = ops.conv2d(a, b, **spec)
            return ops.exp(y * ops.sigmoid(y) * 0.25)

        model = esgraph.compile(build(graph, x, w)[0], backend_options={"channel_block": block})
        assert model.stats()["epilogue_groups"] == 1
        assert "0 with their group as post-ops" in model.report()
        check(model(x, w), want)


def pool2d_reference(x, kernel, strides=(1, 1), pads=(0, 0, 0, 0), ceil_mode=False, kind="max"):
    """Windows over the input padded with NaN; max or mean over the values inside the input."""
    n, c, h, w = x.shape
    sizes = []
    for size, k, s, before, after in ((h, kernel[0], strides[0], pads[0], pads[2]),
                                      (w, kernel[1], strides[1], pads[1], pads[3])):
        room = size + before + after - k
        out = (-(-room // s) if ceil_mode else room // s) + 1
        if ceil_mode and (out - 1) * s >= size + before:  # a window starting in the padding is dropped
            out -= 1
        sizes.append(out)
    oh, ow = sizes
    # Enough NaN after the input for windows that overhang it in ceil mode.
    extra_h = max(0, (oh - 1) * strides[0] + kernel[0] - (h + pads[0]))
    extra_w = max(0, (ow - 1) * strides[1] + kernel[1] - (w + pads[1]))
    xp = np.pad(x.astype(f64), ((0, 0), (0, 0), (pads[0], extra_h), (pads[1], extra_w)), constant_values=np.nan)
    y = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * strides[0]:i * strides[0] + kernel[0], j * strides[1]:j * strides[1] + kernel[1]]
            y[:, :, i, j] = (np.nanmax if kind == "max" else np.nanmean)(win, axis=(2, 3))
    return y


def test_pool2d_reference_on_a_hand_computed_case():
    x = np.arange(9, dtype=f64).reshape(1, 1, 3, 3)
    y = pool2d_reference(x, (2, 2), strides=(2, 2), ceil_mode=True, kind="avg")
    np.testing.assert_array_equal(y[0, 0], [[(0 + 1 + 3 + 4) / 4, (2 + 5) / 2], [(6 + 7) / 2, 8]])
    y = pool2d_reference(x, (3, 3), pads=(1, 1, 1, 1), kind="max")
    np.testing.assert_array_equal(y[0, 0], [[4, 5, 5], [7, 8, 8], [7, 8, 8]])


POOL_CASES = {
    "2x2": dict(x=(1, 2, 4, 4), kernel=[2, 2]),
    "stride 2": dict(x=(2, 3, 6, 7), kernel=[2, 2], strides=[2, 2]),
    "3x3 stride 2 pads": dict(x=(1, 2, 7, 7), kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    "asymmetric pads": dict(x=(1, 1, 5, 6), kernel=[3, 2], strides=[1, 2], pads=[2, 0, 1, 1]),
    "ceil_mode exact fit": dict(x=(1, 3, 7, 7), kernel=[3, 3], strides=[2, 2], ceil_mode=True),
    "ceil_mode overhang": dict(x=(1, 2, 6, 5), kernel=[3, 2], strides=[2, 2], ceil_mode=True),
    "ceil_mode pads": dict(x=(2, 1, 6, 6), kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=True),
    "ceil_mode drops a window in the padding": dict(x=(1, 1, 5, 5), kernel=[2, 2], strides=[2, 2],
                                                    pads=[1, 1, 1, 1], ceil_mode=True),
    "planes over threads": dict(x=(4, 16, 48, 48), kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
}


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", POOL_CASES)
def test_pool2d(case, kind):
    spec = dict(POOL_CASES[case])
    x = normal(rng_for(case, kind), spec.pop("x"))
    op = ops.max_pool2d if kind == "max" else ops.avg_pool2d
    got = run(lambda t: op(t, spec["kernel"], **{k: v for k, v in spec.items() if k != "kernel"}), x)
    check(got, pool2d_reference(x, kind=kind, **spec).astype(f32))


def test_max_pool2d_int():
    x = small_ints(rng_for(), (1, 2, 5, 5), i32, -20, 20)
    got = run(lambda t: ops.max_pool2d(t, [3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), x)
    check(got, pool2d_reference(x, (3, 3), (2, 2), (1, 1, 1, 1)).astype(i32))


# ---- 2. data movement ------------------------------------------------------------------------
@pytest.mark.parametrize("spec, want", [([0, -1], (2, 12)), ([-1, 4], (6, 4)), ([0, 3, 2, 2], (2, 3, 2, 2)),
                                        ([4, 0, 2], (4, 3, 2)), ([24], (24,)), ([-1], (24,)),
                                        ([2, 0, -1], (2, 3, 4)), ([1, 24, 1], (1, 24, 1))], ids=str)
def test_reshape(spec, want):
    x = normal(rng_for(spec), (2, 3, 4))
    check(run(lambda t: ops.reshape(t, spec), x), x.reshape(want))


def test_reshape_to_and_from_rank_0():
    x = np.array([[2.5]], f32)
    check(run(lambda t: ops.reshape(t, []), x), x.reshape(()))
    check(run(lambda t: ops.reshape(t, [1, 1, 1]), x.reshape(())), x.reshape(1, 1, 1))


@pytest.mark.parametrize("perm", [[], [1, 0, 2], [2, 0, 1], [0, 1, 2], [-1, 0, 1]], ids=str)
@pytest.mark.parametrize("dtype", [f32, i64, np.bool_, np.int8])
def test_transpose(perm, dtype):
    x = small_ints(rng_for(perm, dtype), (2, 3, 4), dtype, 0, 100 if dtype != np.bool_ else 2)
    check(run(lambda t: ops.transpose(t, perm=perm), x), np.transpose(x, [p % 3 for p in perm] or None))


@pytest.mark.parametrize("axis, shapes", [(0, [(1, 3), (2, 3), (0, 3)]), (1, [(2, 1), (2, 4), (2, 2)]),
                                          (-1, [(2, 3, 1), (2, 3, 2)]), (1, [(2, 2, 3), (2, 1, 3), (2, 0, 3)]),
                                          (0, [(4,)])], ids=str)
def test_concat(axis, shapes):
    rng = rng_for(axis, shapes)
    xs = [normal(rng, s) for s in shapes]
    check(run(lambda *ts: ops.concat(list(ts), axis), *xs), np.concatenate(xs, axis=axis))


@pytest.mark.parametrize("axis, sizes", [(0, [2, 3]), (1, [1, 2, 0, 1]), (-1, [5]), (-2, [3, 0, 1]), (2, [2, 2, 1])],
                         ids=str)
def test_split(axis, sizes):
    shape = [2, 3, 4]
    shape[axis] = sum(sizes)
    x = normal(rng_for(axis, sizes), shape)
    got = run(lambda t: ops.split(t, sizes, axis=axis), x)
    want = np.split(x, np.cumsum(sizes)[:-1], axis=axis)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        check(g, w)


SLICES = [  # starts, ends, axes, steps
    ([1], [4], [1], [2]),
    ([-1], [-6], [], [-1]),
    ([0, 1], [2, 5], [], []),
    ([4, -1], [0, 0], [0, 1], [-2, -3]),
    ([10], [-10], [1], [-1]),          # clamped both ways
    ([-100], [100], [-1], [3]),
    ([2], [2], [0], []),               # empty
    ([3], [1], [0], [1]),              # empty: start after end
    ([1, 0], [3, 6], [-1, 0], [1, 2]),
    ([-2], [-100], [0], [-1]),         # to the very beginning with a negative step
]


@pytest.mark.parametrize("starts, ends, axes, steps", SLICES, ids=str)
def test_slice(starts, ends, axes, steps):
    x = normal(rng_for(starts, ends, axes, steps), (5, 6, 3))
    index = [slice(None)] * x.ndim
    for i, (s, e) in enumerate(zip(starts, ends)):
        index[axes[i] if axes else i] = slice(s, e, steps[i] if steps else 1)
    check(run(lambda t: ops.slice(t, starts, ends, axes=axes, steps=steps), x), x[tuple(index)])


@pytest.mark.parametrize("index_dtype", [i32, i64])
@pytest.mark.parametrize("axis, index_shape", [(0, (3,)), (1, (2, 2)), (-1, ()), (2, (4,)), (-3, (1, 2, 1)),
                                               (1, (0,))], ids=str)
def test_gather(axis, index_shape, index_dtype):
    rng = rng_for(axis, index_shape, index_dtype)
    x = normal(rng, (3, 4, 5))
    n = x.shape[axis]
    indices = rng.integers(-n, n, index_shape).astype(index_dtype)  # negative indices count from the end
    check(run(lambda t, i: ops.gather(t, i, axis=axis), x, indices), np.take(x, indices, axis=axis))


@pytest.mark.parametrize("src, shape", [((3, 1), (2, 3, 4)), ((1,), (5,)), ((2, 1, 3), (2, 4, 3)), ((), (2, 2)),
                                        ((1, 3), (0, 3)), ((4,), (4,))], ids=str)
def test_expand(src, shape):
    x = normal(rng_for(src, shape), src)
    check(run(lambda t: ops.expand(t, list(shape)), x), np.broadcast_to(x, shape))


@pytest.mark.parametrize("shape, axes", [((1, 3, 1, 2), []), ((1, 3, 1, 2), [0]), ((1, 3, 1, 2), [-2]),
                                         ((1, 3, 1, 2), [2, 0]), ((1, 1), [])], ids=str)
def test_squeeze(shape, axes):
    x = normal(rng_for(shape, axes), shape)
    check(run(lambda t: ops.squeeze(t, axes=axes), x), np.squeeze(x, axis=tuple(axes) if axes else None))


@pytest.mark.parametrize("axes, want", [([0], (1, 2, 3)), ([-1], (2, 3, 1)), ([0, -1], (1, 2, 3, 1)),
                                        ([1, 3], (2, 1, 3, 1)), ([2], (2, 3, 1))], ids=str)
def test_unsqueeze(axes, want):
    x = normal(rng_for(axes), (2, 3))
    check(run(lambda t: ops.unsqueeze(t, axes), x), x.reshape(want))


@pytest.mark.parametrize("pads", [[1, 2, 0, 1], [0, 0, 2, 2], [2, 1, 1, 3], [0, 0, 0, 0]], ids=str)
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad(mode, pads):
    x = normal(rng_for(mode, pads), (4, 5))
    width = [(pads[i], pads[2 + i]) for i in range(2)]
    want = np.pad(x, width, mode=mode, **({"constant_values": 1.5} if mode == "constant" else {}))
    check(run(lambda t: ops.pad(t, pads, mode=mode, value=1.5), x), want)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_int_rank_3(mode):
    x = small_ints(rng_for(mode), (3, 2, 4), i32, -9, 10)
    pads = [1, 0, 2, 2, 1, 3]
    width = [(pads[i], pads[3 + i]) for i in range(3)]
    want = np.pad(x, width, mode=mode, **({"constant_values": 7} if mode == "constant" else {}))
    check(run(lambda t: ops.pad(t, pads, mode=mode, value=7), x), want)


def test_pad_default_is_zeros():
    x = np.ones((2, 2), f32)
    check(run(lambda t: ops.pad(t, [1, 1, 1, 1]), x), np.pad(x, 1))


@pytest.mark.parametrize("shape, value, dtype", [([2, 3], 1.5, f32), ([4], -7, i64), ([2, 2], 3, i32),
                                                 ([3], 1, np.bool_), ([0, 2], 9, f32), ([], 2.25, f64)], ids=str)
def test_fill(shape, value, dtype):
    check(run(lambda: ops.fill(shape, value=value, dtype=np.dtype(dtype))), np.full(shape, value, dtype))


def test_fill_defaults():
    check(run(lambda: ops.fill([2, 1])), np.zeros((2, 1), f32))


@pytest.mark.parametrize("start, limit, step, dtype", [(0, 5, 1, i64), (1, 2, 0.25, f32), (5, -3, -2, i32),
                                                       (0.5, 3, 0.7, f64), (3, 3, 1, i64), (-2, 7, 3, i64),
                                                       (10, 0, -1.5, f32)], ids=str)
def test_range(start, limit, step, dtype):
    got = run(lambda: ops.range(limit, start=start, step=step, dtype=np.dtype(dtype)))
    check(got, np.arange(start, limit, step, dtype=f64).astype(dtype))


def test_range_defaults():
    check(run(lambda: ops.range(4)), np.arange(4, dtype=i64))


# ---- 2. control flow ------------------------------------------------------------------------
@pytest.mark.parametrize("pred", [True, False])
def test_if_takes_the_branch_of_the_runtime_condition(pred):
    rng = rng_for(pred)
    x, w = normal(rng, (2, 3)), normal(rng, (3, 4))
    got = run(lambda p, t, m: ops.if_(p, lambda: (ops.exp(t), t @ m), lambda: (-t, ops.fill([2, 4], value=5.0))),
              np.array(pred), x, w)
    want = ([np.exp(x.astype(f64)), x.astype(f64) @ w] if pred else [-x, np.full((2, 4), 5.0)])
    for g, value in zip(got, want):
        check(g, np.asarray(value).astype(f32))


@pytest.mark.parametrize("n", [0, 1, 5])
def test_while_iterates_until_the_condition_fails(n):
    x = normal(rng_for(n), (3,), scale=1.0)

    def graph(limit, t):
        i0 = ops.fill([], value=0, dtype=esgraph.i64)
        return ops.while_([i0, t], lambda i, v: i < limit, lambda i, v: (i + 1, v * 2.0 + t))

    i, v = run(graph, np.array(n, i64), x)
    want = x.astype(f64)
    for _ in range(n):
        want = want * 2 + x
    check(i, np.array(n, i64))
    check(v, want.astype(f32))


# ---- 3. compile options and symbolic sizes ---------------------------------------------------
OPTIONS = {
    "streams=3": dict(streams=3),
    "memory_reuse=False": dict(memory_reuse=False),
    "fusion=False": dict(fusion=False),
    "verify_each_pass": dict(verify_each_pass=True),
    "all changed": dict(streams=3, memory_reuse=False, fusion=False, verify_each_pass=True),
    "threads=2": dict(threads=2),
    "threads=1": dict(threads=1),
    "threads=3, fusion=False": dict(threads=3, fusion=False),
    # Streams run concurrently when the pool has a thread per stream.
    "streams=2": dict(streams=2, threads=2),
    "streams=4, threads=4, memory_reuse=False": dict(streams=4, threads=4, memory_reuse=False),
    "streams=3, threads=3, fusion=False": dict(streams=3, threads=3, fusion=False),
}

_W = rng_for("weights").standard_normal((8, 8)).astype(f32)
_BIAS = rng_for("bias").standard_normal(8).astype(f32)


def mlp_block(x):
    """Branches, reductions, broadcasts and reshapes: several values alive at once for the planner."""
    h = x @ _W + _BIAS
    a, n = ops.relu(h), ops.layer_norm(h)
    s = ops.softmax(a * 0.5, axis=-1)
    r = ops.reduce_sum(s * n, axes=[1], keepdims=True)
    t = ops.tanh(r) + ops.sigmoid(h)
    cat = ops.concat([ops.transpose(a), ops.transpose(n)], 0)
    u = ops.reshape(ops.exp(ops.slice(x, [0], [1], axes=[0])), [1, 8])  # [1, 8] broadcast below
    v = ops.sub(u, t)
    return [t, cat, v, ops.argmax(t, axis=1), ops.cast(ops.greater(v, 0.0), esgraph.i64) + 1]


def mlp_block_reference(x):
    x = x.astype(f64)
    h = x @ _W + _BIAS
    a, n = np.maximum(h, 0), _layer_norm(h, -1)
    s = _softmax(a * 0.5, -1)
    r = (s * n).sum(1, keepdims=True)
    t = np.tanh(r) + 1 / (1 + np.exp(-h))
    cat = np.concatenate([a.T, n.T], 0)
    v = np.exp(x[:1]) - t
    return [t.astype(f32), cat.astype(f32), v.astype(f32), t.argmax(1), (v > 0).astype(i64) + 1]


def cast_chain(x):
    """Casts that widen and narrow intermediate values, each of which dies at its cast."""
    i = ops.cast(x * 3.0, esgraph.i32)
    wide = ops.cast(i + 1, esgraph.i64)
    back = ops.cast(wide * 2, esgraph.f64)
    flag = ops.cast(ops.cast(ops.less(x, 0.0), esgraph.f32) * 2.0, esgraph.bool_)
    return [ops.cast(back, esgraph.f32), ops.where(flag, x, x * 10.0)]


def cast_chain_reference(x):
    back = ((x * f32(3)).astype(i32) + 1).astype(i64) * 2
    return [back.astype(f64).astype(f32), np.where(x < 0, x, x * f32(10))]


def broadcast_chain(x):
    """Elementwise ops whose broadcast operand is an intermediate that dies at the op."""
    row = ops.exp(ops.reduce_mean(x, axes=[0], keepdims=True))          # [1, n]: dies at the mul
    col = ops.sqrt(ops.reduce_max(ops.abs(x), axes=[1], keepdims=True))  # [m, 1]: dies at the sub
    return [ops.neg(col - (row * x + 1.0))]


def broadcast_chain_reference(x):
    x = x.astype(f64)
    row, col = np.exp(x.mean(0, keepdims=True)), np.sqrt(np.abs(x).max(1, keepdims=True))
    return [(-(col - (row * x + 1))).astype(f32)]


# Shapes marked True once made the planner put an output over a dying input of the same
# 64-byte-rounded size but fewer bytes (a widening cast, a broadcast operand); in-place reuse now
# requires the same shape and element width. They stay as regression cases.
GRAPHS = {  # name: (graph, numpy reference, input shape, once hit the in-place bug)
    "mlp block": (mlp_block, mlp_block_reference, (4, 8), False),
    "cast chain 3x4": (cast_chain, cast_chain_reference, (3, 4), True),
    "cast chain 16": (cast_chain, cast_chain_reference, (16,), True),
    "cast chain 4x8": (cast_chain, cast_chain_reference, (4, 8), False),
    "broadcast chain 2x8": (broadcast_chain, broadcast_chain_reference, (2, 8), True),
    "broadcast chain 4x4": (broadcast_chain, broadcast_chain_reference, (4, 4), True),
    "broadcast chain 8x16": (broadcast_chain, broadcast_chain_reference, (8, 16), False),
    # Large enough for the elementwise kernels to split their work over threads.
    "broadcast chain 300x700": (broadcast_chain, broadcast_chain_reference, (300, 700), False),
}


def _option_cases():
    """Every option set with every graph."""
    return [pytest.param(option, name, id=f"{option}-{name}") for option in OPTIONS for name in GRAPHS]


@pytest.mark.parametrize("option, graph_name", _option_cases())
def test_compile_options_give_identical_results(option, graph_name):
    fn, ref, shape, _ = GRAPHS[graph_name]
    x = normal(rng_for(graph_name), shape)
    graph, _ = build(fn, x)
    base = esgraph.compile(graph).run([x])
    other = esgraph.compile(graph, **OPTIONS[option]).run([x])
    for got, want in zip(other, base):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


def _numpy_cases():
    return [pytest.param(name, reuse, id=f"{name}-memory_reuse={reuse}") for name in GRAPHS for reuse in (True, False)]


@pytest.mark.parametrize("graph_name, memory_reuse", _numpy_cases())
def test_option_graphs_match_numpy(graph_name, memory_reuse):
    """The graphs above are right, not only consistent, with and without memory reuse."""
    fn, ref, shape, _ = GRAPHS[graph_name]
    x = normal(rng_for(graph_name), shape)
    got = run(fn, x, memory_reuse=memory_reuse)
    for g, w in zip(got, ref(x)):
        check(g, w)


@pytest.mark.parametrize("src, to", [(np.bool_, f32), (i32, i64), (f32, f64)], ids=["bool-f32", "i32-i64", "f32-f64"])
def test_in_place_widening_cast(src, to):
    """cast(neg-or-not(x)) * 2 where the cast's input is an intermediate of 4 elements."""
    x = np.array([-1, 2, -3, 4], f32)

    def graph(t):
        narrow = ops.less(t, 0.0) if src == np.bool_ else ops.cast(ops.neg(t), np.dtype(src))
        return ops.cast(narrow, np.dtype(to)) * 2

    narrow = (x < 0) if src == np.bool_ else (-x).astype(src)
    check(run(graph, x), narrow.astype(to) * to(2))


def test_in_place_broadcast_operand():
    """neg(exp(t) * c) with t: [1, 4] and c: [4, 4]; exp(t) dies at the mul and is broadcast."""
    t, c = np.array([[0, 1, 2, 3]], f32), np.full((4, 4), 2, f32)
    check(run(lambda a, b: ops.neg(ops.exp(a) * b), t, c), (-np.exp(t.astype(f64)) * 2).astype(f32) + np.zeros((4, 4), f32))


def test_in_place_reuse_happens_and_is_right_for_same_sized_values():
    """Beside the two tests above: same-shape, same-dtype chains still reuse buffers, correctly."""
    x = normal(rng_for(), (4, 4))
    graph, _ = build(lambda t: ops.neg(ops.exp(t) * t + 1.0), x)
    model = esgraph.compile(graph, fusion=False)  # fused, the chain has no intermediates to reuse
    check(model(x), (-(np.exp(x.astype(f64)) * x + 1)).astype(f32))
    assert model.stats()["in_place_values"] > 0


@pytest.mark.parametrize("rows", [1, 3, 37])  # 37 x 41 spans several 512-element tiles, unevenly
def test_fused_group_over_several_tiles_with_scalar_and_row_operands(rows):
    """One fused group: scalar constants (float and int), a broadcast row, a three-input where."""
    x = normal(rng_for(rows), (rows, 41))
    row = normal(rng_for("row"), (1, 41))

    def graph(t, r):
        y = ops.tanh(t * 1.5 + r) - 0.25
        k = ops.cast(ops.cast(t * 4.0, esgraph.i32) * 3 + 1, esgraph.f32)
        return ops.where(ops.greater(y, 0.0), ops.sigmoid(y) * k, y * 2.0 + t)

    model = esgraph.compile(build(graph, x, row)[0])
    assert model.stats()["fused_groups"] >= 1
    xd, rd = x.astype(f64), row.astype(f64)
    y = np.tanh(xd * 1.5 + rd) - 0.25
    k = ((xd * 4).astype(f32).astype(i32) * 3 + 1).astype(f64)
    check(model(x, row), np.where(y > 0, 1 / (1 + np.exp(-y)) * k, y * 2 + xd).astype(f32))


def test_scalar_multiply_adds_folded_into_rows_round_as_the_unfused_ops():
    """The CPU runs x*s, x+s, x-s and s-x by single-element inputs inside the rows around them
    (tanh(x*a+b)*0.5-0.125 is one row). Each rounds as its op does alone, so fused results are
    the unfused ones bit for bit, NaNs, infinities, signed zeros and denormals included; the
    scalars are graph inputs, read at every run."""
    x = normal(rng_for(), (37, 41))
    x.flat[:7] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -3e38]

    weights = normal(rng_for("w"), (41, 41), scale=0.2)

    def graph(t, a, b):
        u = ops.tanh(t * a + b) * 0.5 - 0.125
        v = ops.exp(1.0 - u) * a  # s - x on an operand; an output through a stage
        w = ops.sigmoid(ops.neg(t) * 3.0 + 2.0) - b
        r = ops.sub(b, ops.relu(t) * a) + 1.0  # s - x·a: a negated scale
        h = ops.sub(2.0, ops.tanh(ops.sub(b, (t @ weights) * a)) * 3.0)  # after a matmul head
        return [v, w + u, r, h]

    g = build(graph, x, np.float32(0), np.float32(0))[0]
    fused, unfused = esgraph.compile(g), esgraph.compile(g, fusion=False)
    # 24 ops in 8 rows: tanh(·a+b)·0.5-0.125, exp(1-·)·a, neg, sigmoid(·3+2)-b, add; relu·(-a)+b,
    # add; after the matmul tanh(·(-a)+b)·(-3)+2
    stats = fused.stats()
    assert (stats["fused_groups"], stats["fused_ops"], stats["f32_rows"], stats["epilogue_groups"]) == (3, 24, 8, 1)
    for a, b in [(1.5, 0.25), (-2.0, -0.0), (0.0, np.inf), (np.nan, 1.0), (3e38, -1e-45)]:
        feeds = [x, np.float32(a), np.float32(b)]
        for got, want in zip(fused.run(feeds), unfused.run(feeds)):
            np.testing.assert_array_equal(got, want)
            numbers = ~np.isnan(want)  # (a NaN's sign bit means nothing: x86 keeps an operand's)
            assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))
    xd, (a, b) = x[7:].astype(f64), (f64(1.5), f64(0.25))
    u = np.tanh(xd * a + b) * 0.5 - 0.125
    outs = fused.run([x, np.float32(a), np.float32(b)])
    check(outs[0][7:], (np.exp(1 - u) * a).astype(f32))
    check(outs[1][7:], (1 / (1 + np.exp(-(-xd * 3 + 2))) - b + u).astype(f32))
    check(outs[2][7:], (b - np.maximum(xd, 0) * a + 1).astype(f32))
    check(outs[3][7:], (2 - np.tanh(b - (x.astype(f64) @ weights.astype(f64))[7:] * a) * 3).astype(f32))


def test_fused_group_writing_over_an_input_it_reads_again():
    """The memory plan may put a group's output in the bytes of an input that dies there; the
    group's later members read that input again, so within a chunk no result may reach memory
    before the chunk's members all ran. Long enough for many chunks and threads."""
    x = normal(rng_for(), (300, 257))

    def graph(t):
        u = ops.transpose(t, perm=[1, 0])  # an arena value, dying in the group
        a = u * 2.0 + 1.0
        first = ops.tanh(a)  # the group's first output, computed before u is read again
        second = ops.sigmoid(a - 0.5) * u + u
        return ops.transpose(first, perm=[1, 0]) + ops.transpose(second, perm=[1, 0])

    g = build(graph, x)[0]
    ud = x.T.astype(f64)
    a = ud * 2 + 1
    want = (np.tanh(a) + 1 / (1 + np.exp(-(a - 0.5))) * ud + ud).astype(f32).T
    for threads in (1, 2):
        fused = esgraph.compile(g, threads=threads)
        assert fused.stats()["in_place_values"] > 0
        check(fused(x), want)
        np.testing.assert_array_equal(fused(x), esgraph.compile(g, fusion=False, threads=threads)(x))


def test_repeated_runs_give_the_same_values():
    x = normal(rng_for(), (4, 8))
    graph, _ = build(mlp_block, x)
    model = esgraph.compile(graph, streams=3)
    first = model.run([x])
    for _ in range(3):
        for got, want in zip(model.run([x]), first):
            np.testing.assert_array_equal(got, want)


def test_outputs_that_are_inputs_constants_or_repeated():
    x = normal(rng_for(), (2, 3))

    def graph(t):
        y = t * 2.0
        return [t, y, y, esgraph.constant(np.arange(4, dtype=i32)), ops.reshape(t, [3, 2]), ops.exp(y), y]

    got = run(graph, x)
    y = x * f32(2)
    for g, w in zip(got, [x, y, y, np.arange(4, dtype=i32), x.reshape(3, 2), np.exp(y.astype(f64)).astype(f32), y]):
        check(g, w)
    got[1][0, 0] = 123.0  # every output is an array of its own
    assert got[2][0, 0] == y[0, 0] and got[6][0, 0] == y[0, 0]


def test_symbolic_batch_at_two_sizes():
    graph, _ = build(mlp_block, np.zeros((1, 8), f32), symbolic={0: [(0, "batch")]})
    model = esgraph.compile(graph)
    for batch in (2, 5, 2):
        x = normal(rng_for(batch), (batch, 8))
        got = model(x)
        assert isinstance(got, tuple) and len(got) == 5
        for g, w in zip(got, mlp_block_reference(x)):
            check(g, w)


def test_symbolic_batch_bound_at_compile_time():
    graph, _ = build(broadcast_chain, np.zeros((1, 8), f32), symbolic={0: [(0, "batch")]})
    for batch in (3, 6):
        x = normal(rng_for(batch), (batch, 8))
        got = esgraph.compile(graph, shapes={"batch": batch}).run({"x0": x})
        for g, w in zip(got, broadcast_chain_reference(x)):
            check(g, w)


def test_two_symbolic_dimensions():
    rng = rng_for()
    graph, _ = build(lambda a, b: ops.softmax(a @ b, axis=-1), np.zeros((1, 3), f32), np.zeros((3, 1), f32),
                     symbolic={0: [(0, "m")], 1: [(1, "n")]})
    model = esgraph.compile(graph)
    for m, n in ((2, 5), (4, 1), (1, 7)):
        a, b = normal(rng, (m, 3)), normal(rng, (3, n))
        check(model(a, b), _softmax(a.astype(f64) @ b.astype(f64), -1).astype(f32))


# ---- 4. bad input at run time ---------------------------------------------------------------
@pytest.fixture
def add_model():
    """Inputs a, b: f32[2, 3] and c: f32[batch, 3]; outputs a + b and the column sums of c."""
    with esgraph.GraphBuilder("add") as gb:
        y = gb.input("a", esgraph.f32, [2, 3]) + gb.input("b", esgraph.f32, [2, 3])
        z = ops.reduce_sum(gb.input("c", esgraph.f32, ["batch", 3]), axes=[0])
    return esgraph.compile(gb.build([y, z]))


def _abc(batch=4):
    rng = rng_for(batch)
    return normal(rng, (2, 3)), normal(rng, (2, 3)), normal(rng, (batch, 3))


def test_model_call_and_run_agree(add_model):
    a, b, c = _abc()
    y, z = add_model(a, b, c)
    check(y, a + b)
    check(z, c.astype(f64).sum(0).astype(f32))
    for outs in (add_model.run([a, b, c]), add_model.run({"a": a, "b": b, "c": c}), add_model.run({"c": c, "b": b, "a": a})):
        assert isinstance(outs, list)
        np.testing.assert_array_equal(outs[0], y)
        np.testing.assert_array_equal(outs[1], z)


@pytest.mark.parametrize("count", [0, 2, 4])
def test_wrong_number_of_inputs(add_model, count):
    arrays = list(_abc()) + [np.zeros((2, 3), f32)]
    with pytest.raises(esgraph.InvalidArgumentError, match="3 input"):
        add_model(*arrays[:count])
    with pytest.raises(esgraph.InvalidArgumentError, match="3 input"):
        add_model.run(arrays[:count])


@pytest.mark.parametrize("which, shape", [(0, (2, 4)), (0, (3, 3)), (1, (2, 3, 1)), (1, (6,)), (2, (4, 2)), (2, (3,)),
                                          (0, ())], ids=str)
def test_wrong_shape(add_model, which, shape):
    arrays = list(_abc())
    arrays[which] = np.zeros(shape, f32)
    with pytest.raises(esgraph.ShapeError) as info:
        add_model(*arrays)
    assert isinstance(info.value, ValueError)


def test_symbolic_dimension_takes_any_size_including_zero(add_model):
    a, b, _ = _abc()
    for batch in (0, 1, 7):
        c = normal(rng_for(batch), (batch, 3))
        check(add_model(a, b, c)[1], c.astype(f64).sum(0).astype(f32))


@pytest.mark.parametrize("convert", [lambda x: x.astype(f64), lambda x: np.asfortranarray(x.astype(f64)),
                                     lambda x: x.astype(i64), lambda x: x.astype(np.float16), lambda x: f64(x[0, 0])],
                         ids=["float64", "fortran order float64", "int64", "float16", "numpy scalar"])
def test_arrays_of_another_dtype_are_refused_unless_cast(add_model, convert):
    a, b, c = _abc()
    got = np.asarray(convert(a)).dtype
    with pytest.raises(esgraph.DTypeError,
                       match=rf"input 0 \(`a`: f32\) got {got} data; convert it with \.astype\(numpy\.float32\), or run with cast=True"):
        add_model(convert(a), b, c)
    with pytest.raises(esgraph.DTypeError, match=r"input 2 \(`c`: f32\)"):
        add_model.run([a, b, convert(c)])
    if np.ndim(convert(a)) == 2:
        y, z = add_model(convert(a), b, convert(c), cast=True)
        check(y, np.asarray(convert(a)).astype(f32) + b)
        check(z, np.asarray(convert(c)).astype(f32).astype(f64).sum(0).astype(f32))


def test_lists_and_numbers_convert_when_the_dtype_holds_them(add_model):
    a, b, c = _abc()
    y, z = add_model(a.tolist(), b, c.tolist())  # Python floats rounded to f32, as written in f32
    check(y, a + b)
    check(z, c.astype(f64).sum(0).astype(f32))
    y, _ = add_model([[1, 2, 3], [4, 5, 6]], b, c)  # integers into floats
    check(y, np.array([[1, 2, 3], [4, 5, 6]], f32) + b)


def test_values_an_integer_input_cannot_hold_are_refused_unless_cast():
    x = np.array([1.9, -1.9, 3.0])
    graph, _ = build(lambda t: t * 2, x.astype(i32))
    model = esgraph.compile(graph)
    with pytest.raises(esgraph.DTypeError, match=r"got float64 data; convert it with \.astype\(numpy\.int32\)"):
        model(x)
    with pytest.raises(esgraph.DTypeError, match="got values of float64 that i32 cannot hold"):
        model([1.7, 1e20, float("nan")])
    check(model([1, -2, 3]), np.array([2, -4, 6], i32))
    check(model(x, cast=True), x.astype(i32) * 2)  # numpy's astype, asked for: truncation
    u8_model = esgraph.compile(build(lambda t: t + 1, np.zeros(2, np.uint8))[0])
    with pytest.raises(esgraph.DTypeError, match="got values of int64 that u8 cannot hold"):
        u8_model([300, -1])
    check(u8_model([1, 254]), np.array([2, 255], np.uint8))  # Python ints that u8 holds
    bool_model = esgraph.compile(build(ops.logical_not, np.zeros(2, bool))[0])
    with pytest.raises(esgraph.DTypeError, match="that bool cannot hold"):
        bool_model([0, 2])
    check(bool_model([0, 1]), np.array([True, False]))
    f16_model = esgraph.compile(build(ops.neg, np.zeros(2, np.float16))[0])
    with pytest.raises(esgraph.DTypeError, match="that f16 cannot hold"):
        f16_model([1.0, 70000.0])  # would become inf
    check(f16_model([1.0, float("inf")]), np.array([-1.0, -np.inf], np.float16))  # infinite already


def test_objects_with_a_dtype_of_their_own_are_refused_like_arrays():
    torch = pytest.importorskip("torch")
    graph, _ = build(ops.neg, np.zeros(3, f32))
    with pytest.raises(esgraph.DTypeError, match=r"got float64 data; convert it with \.astype\(numpy\.float32\)"):
        esgraph.compile(graph)(torch.zeros(3, dtype=torch.float64))


def test_non_contiguous_input():
    x = normal(rng_for(), (4, 6))
    view = x[::2, ::3]
    check(run(ops.neg, np.ascontiguousarray(view)), -view)
    graph, _ = build(ops.neg, np.ascontiguousarray(view))
    check(esgraph.compile(graph)(view), -view)


def test_read_only_input():
    x = normal(rng_for(), (2, 3))
    x.setflags(write=False)
    graph, _ = build(ops.neg, x)
    check(esgraph.compile(graph)(x), -x)


def test_integer_outputs_run_without_warnings():
    x = np.arange(64, dtype=i32)
    graph, _ = build(lambda t: t + 1, x)
    model = esgraph.compile(graph)
    for _ in range(5):
        junk = np.full(64, np.nan, f32)  # freed memory full of NaN, which the next allocation may reuse
        del junk
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = model(x)
        check(got, x + 1)


def test_run_into_the_callers_arrays(add_model):
    a, b, c = _abc()
    y, z = np.full((2, 3), np.nan, f32), np.full(3, np.nan, f32)
    outs = add_model.run([a, b, c], out=[y, z])
    assert outs[0] is y and outs[1] is z
    check(y, a + b)
    check(z, c.astype(f64).sum(0).astype(f32))


def _bad_outs():
    y, z = np.empty((2, 3), f32), np.empty(3, f32)
    return {
        "count": ([y], esgraph.InvalidArgumentError, "2 output"),
        "dtype": ([y.astype(f64), z], TypeError, r"out\[0\]: dtype float64"),
        "shape": ([y, np.empty(4, f32)], esgraph.InvalidArgumentError, r"out\[1\]: shape \(4,\)"),
        "strided": ([np.empty((2, 6), f32)[:, ::2], z], esgraph.InvalidArgumentError, "C-contiguous"),
        "read-only": ([np.frombuffer(bytes(24), f32).reshape(2, 3), z], esgraph.InvalidArgumentError, "writeable"),
        "not an array": ([[[0.0] * 3] * 2, z], TypeError, "numpy array"),
        "not a list": (5, TypeError, "list"),
    }


@pytest.mark.parametrize("case", list(_bad_outs()))
def test_run_refuses_unusable_output_arrays(add_model, case):
    a, b, c = _abc()
    out, error, message = _bad_outs()[case]
    with pytest.raises(error, match=message):
        add_model.run([a, b, c], out=out)
    check(add_model(a, b, c)[0], a + b)


def test_output_array_sharing_an_input_is_refused(add_model):
    a, b, c = _abc()
    with pytest.raises(esgraph.InvalidArgumentError, match="shares memory with input 1"):
        add_model.run([a, b, c], out=[b, np.empty(3, f32)])
    np.testing.assert_array_equal(b, _abc()[1])  # untouched
    both = np.empty(6, f32)
    with pytest.raises(esgraph.InvalidArgumentError, match=r"out\[1\]: shares memory with out\[0\]"):
        add_model.run([a, b, c], out=[both.reshape(2, 3), both[:3]])


def test_byte_swapped_arrays_are_converted_in_and_refused_out(add_model):
    a, b, c = _abc()
    y = add_model.run([a.astype(">f4"), b, c])[0]
    check(y, a + b)
    with pytest.raises(TypeError, match="dtype >f4"):
        add_model.run([a, b, c], out=[np.empty((2, 3), ">f4"), np.empty(3, f32)])


def test_run_with_a_missing_name(add_model):
    a, b, c = _abc()
    with pytest.raises(esgraph.InvalidArgumentError, match="`b`"):
        add_model.run({"a": a, "c": c})
    with pytest.raises(esgraph.InvalidArgumentError):
        add_model.run({})


def test_run_with_an_unknown_name(add_model):
    a, b, c = _abc()
    with pytest.raises(esgraph.InvalidArgumentError):
        add_model.run({"a": a, "b": b, "c": c, "d": c})


def test_an_error_leaves_the_model_usable(add_model):
    a, b, c = _abc()
    with pytest.raises(esgraph.ShapeError):
        add_model(a, np.zeros((5, 5), f32), c)
    check(add_model(a, b, c)[0], a + b)


def test_input_and_output_names(add_model):
    assert add_model.input_names == ["a", "b", "c"]
    assert len(add_model.output_names) == 2


def test_a_kernel_error_inside_a_stream_raises_and_the_model_stays_usable():
    with esgraph.GraphBuilder("branches") as gb:
        x = gb.input("x", esgraph.f32, [64, 64])
        i = gb.input("i", esgraph.i64, [4])
        left, right = ops.tanh(x @ x), ops.gather(x + x, i)
    model = esgraph.compile(gb.build([left, right]), streams=2, threads=2)
    xs = normal(rng_for("streams"), (64, 64), scale=0.1)
    for _ in range(3):
        with pytest.raises(esgraph.InvalidArgumentError, match="out of range"):
            model(xs, np.array([0, 1, 99, 2]))
        _, got = model(xs, np.array([0, 1, 63, 2]))
        check(got, (xs + xs)[[0, 1, 63, 2]])


# ---- top_k and scatter against numpy ---------------------------------------------------------
@pytest.mark.parametrize("axis, largest", [(-1, True), (0, False), (1, True)])
@pytest.mark.parametrize("dtype", [f32, i32])
def test_top_k_matches_a_stable_numpy_sort(axis, largest, dtype):
    rng = rng_for("top_k", axis, largest, dtype)
    x = rng.integers(-5, 6, (4, 7, 3)).astype(dtype)  # many ties: their order is checked too
    k = 3
    order = np.argsort(-x if largest else x, axis=axis, kind="stable")
    want_idx = np.take(order, np.arange(k), axis=axis)
    values, indices = run(lambda t: ops.top_k(t, k, axis=axis, largest=largest), x)
    check(indices, want_idx.astype(i64))
    check(values, np.take_along_axis(x, want_idx, axis=axis))


@pytest.mark.parametrize("reduction", ["none", "add", "mul"])
def test_scatter_elements_matches_numpy(reduction):
    rng = rng_for("scatter_elements", reduction)
    data = rng.integers(-3, 4, (3, 5)).astype(i64)
    # distinct targets per row for `none` (ONNX leaves repeated writes unordered); any for the others
    idx = np.stack([rng.permutation(5)[:4] for _ in range(3)]) if reduction == "none" else rng.integers(-5, 5, (3, 4))
    upd = rng.integers(-3, 4, (3, 4)).astype(i64)
    want = data.copy()
    rows = np.repeat(np.arange(3)[:, None], 4, axis=1)
    cols = np.where(idx < 0, idx + 5, idx)
    if reduction == "none":
        want[rows, cols] = upd
    elif reduction == "add":
        np.add.at(want, (rows, cols), upd)
    else:
        np.multiply.at(want, (rows, cols), upd)
    got = run(lambda d, i, u: ops.scatter_elements(d, i, u, axis=1, reduction=reduction), data, idx.astype(i64), upd)
    check(got, want)


def test_scatter_nd_matches_numpy():
    rng = rng_for("scatter_nd")
    data = normal(rng, (4, 3, 2))
    idx = np.array([[3, 1], [0, 2], [1, 0]], dtype=i64)
    upd = normal(rng, (3, 2))
    want = data.copy()
    want[idx[:, 0], idx[:, 1]] = upd
    check(run(lambda d, i, u: ops.scatter_nd(d, i, u), data, idx, upd), want)


# ---- det against numpy.linalg.det --------------------------------------------------------------
@pytest.mark.parametrize("dtype", [f32, np.float64])
@pytest.mark.parametrize("shape", [(4, 4), (3, 2, 5, 5), (2, 1, 1), (2, 0, 0)])
def test_det_matches_numpy(shape, dtype):
    x = normal(rng_for("det", shape, dtype), shape).astype(dtype)
    got = run(lambda t: ops.det(t), x)
    assert got.shape == shape[:-2] and got.dtype == dtype
    np.testing.assert_allclose(got, np.linalg.det(x.astype(np.float64)).astype(dtype), rtol=1e-5, atol=1e-6)


def test_det_of_singular_and_permuted_matrices_is_exact():
    x = np.array([[[1, 2, 3], [2, 4, 6], [0, 1, 5]],   # two rows proportional
                  [[0, 0, 1], [0, 1, 0], [1, 0, 0]],   # one swap: -1
                  [[0, 0, 0], [1, 2, 3], [4, 5, 6]]], f32)
    check(run(lambda t: ops.det(t), x), np.array([0, -1, 0], f32))
    # a symbolic batch: one plan for every batch
    graph, _ = build(lambda t: ops.det(t), x, symbolic={0: [(0, "n")]})
    model = esgraph.compile(graph)
    check(model(x[:2]), np.array([0, -1], f32))


def test_det_refuses_what_is_not_square_matrices():
    with pytest.raises(esgraph.ShapeError, match="not square"):
        run(lambda t: ops.det(t), np.zeros((2, 3), f32))
    with pytest.raises(esgraph.ShapeError, match="rank >= 2"):
        run(lambda t: ops.det(t), np.zeros((3,), f32))
    with pytest.raises(esgraph.DTypeError):
        run(lambda t: ops.det(t), np.zeros((2, 2), np.int32))


# ---- grid_sample against torch's grid_sample -----------------------------------------------------
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_matches_torch(mode, padding_mode, align_corners):
    torch = pytest.importorskip("torch")
    rng = rng_for("grid_sample", mode, padding_mode, align_corners)
    x = normal(rng, (2, 3, 5, 7))
    grid = rng.uniform(-1.6, 1.6, (2, 4, 6, 2)).astype(f32)  # past the edges too, where padding decides
    grid[0, 0, :4] = [[-1, -1], [1, 1], [0, 0], [-1, 1]]   # the corners and the centre exactly
    got = run(lambda a, g: ops.grid_sample(a, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners), x, grid)
    want = torch.nn.functional.grid_sample(torch.from_numpy(x).double(), torch.from_numpy(grid).double(), mode=mode,
                                           padding_mode=padding_mode, align_corners=align_corners).float().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---- roi_align against torchvision's roi_align -----------------------------------------------------
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_roi_align_matches_torchvision(aligned, sampling_ratio):
    torch = pytest.importorskip("torch")
    tv_ops = pytest.importorskip("torchvision.ops")
    rng = rng_for("roi_align", aligned, sampling_ratio)
    x = normal(rng, (2, 3, 12, 10))
    corners = rng.uniform(-2, 22, (5, 4)).astype(f32)
    rois = np.concatenate([np.minimum(corners[:, :2], corners[:, 2:]), np.maximum(corners[:, :2], corners[:, 2:])], 1)
    batch = np.array([0, 1, 1, 0, 1], np.int64)
    mode = "half_pixel" if aligned else "output_half_pixel"
    got = run(lambda a, r, i: ops.roi_align(a, r, i, output_height=3, output_width=4, sampling_ratio=sampling_ratio,
                                            spatial_scale=0.5, coordinate_transformation_mode=mode), x, rois, batch)
    boxes = torch.from_numpy(np.concatenate([batch[:, None].astype(f32), rois], 1)).double()
    want = tv_ops.roi_align(torch.from_numpy(x).double(), boxes, (3, 4), spatial_scale=0.5, sampling_ratio=sampling_ratio,
                            aligned=aligned).float().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_roi_align_max_takes_the_largest_sample():
    # Samples on pixel centres read one pixel each: the largest of a bin's is the largest pixel.
    x = (np.arange(16, dtype=f32) + 1).reshape(1, 1, 4, 4)
    rois, batch = np.array([[0, 0, 4, 4]], f32), np.zeros(1, np.int64)
    got = run(lambda a, r, i: ops.roi_align(a, r, i, mode="max", output_height=2, output_width=2, sampling_ratio=1,
                                            coordinate_transformation_mode="output_half_pixel"), x, rois, batch)
    check(got, np.array([[[[6, 8], [14, 16]]]], f32))
    two = run(lambda a, r, i: ops.roi_align(a, r, i, mode="max", output_height=1, output_width=1, sampling_ratio=2,
                                            coordinate_transformation_mode="output_half_pixel"), x, rois, batch)
    check(two, np.array([[[[16]]]], f32))  # samples at pixels (1, 1), (1, 3), (3, 1), (3, 3)


def test_roi_align_refuses_a_batch_index_out_of_range():
    x, rois = np.zeros((1, 1, 4, 4), f32), np.array([[0, 0, 2, 2]], f32)
    graph, _ = build(lambda a, r, i: ops.roi_align(a, r, i), x, rois, np.zeros(1, np.int64))
    model = esgraph.compile(graph)
    with pytest.raises(esgraph.InvalidArgumentError, match="batch index 1 of region 0 is out of range for 1 images"):
        model(x, rois, np.array([1], np.int64))
    check(model(x + 1, rois, np.array([0], np.int64)), np.ones((1, 1, 1, 1), f32))
    with pytest.raises(esgraph.ShapeError, match=r"rois must be \[R, 4\]"):
        run(lambda a, r, i: ops.roi_align(a, r, i), x, np.zeros((1, 3), f32), np.zeros(1, np.int64))


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_at_positions_that_are_not_finite_reads_0(mode, padding_mode):
    x = np.arange(1, 10, dtype=f32).reshape(1, 1, 3, 3)
    grid = np.array([[[[np.nan, 0], [np.inf, 0], [-np.inf, np.nan], [1e30, -1e30]]]], f32)
    got = run(lambda a, g: ops.grid_sample(a, g, mode=mode, padding_mode=padding_mode), x, grid)
    assert got.shape == (1, 1, 1, 4) and np.isfinite(got).all()
    check(got[0, 0, 0, :3], np.zeros(3, f32))


def test_grid_sample_refuses_bad_shapes():
    x = np.zeros((1, 2, 3, 3), f32)
    with pytest.raises(esgraph.ShapeError, match=r"grid must be \[N, Ho, Wo, 2\]"):
        run(lambda a, g: ops.grid_sample(a, g), x, np.zeros((1, 2, 2, 3), f32))
    with pytest.raises(esgraph.ShapeError, match="differ in N"):
        run(lambda a, g: ops.grid_sample(a, g), x, np.zeros((2, 2, 2, 2), f32))
    with pytest.raises(esgraph.ShapeError, match=r"x must be \[N, C, H, W\]"):
        run(lambda a, g: ops.grid_sample(a, g), np.zeros((2, 3, 3), f32), np.zeros((2, 2, 2, 2), f32))
    with pytest.raises(esgraph.AttributeValueError):
        run(lambda a, g: ops.grid_sample(a, g, mode="trilinear"), x, np.zeros((1, 2, 2, 2), f32))


def test_scatter_and_top_k_refuse_bad_input():
    x = np.zeros((2, 3), f32)
    with pytest.raises(esgraph.AttributeValueError, match="larger than the axis"):
        run(lambda t: ops.top_k(t, 4), x)
    with pytest.raises(esgraph.ShapeError, match="shape of `indices`"):
        run(lambda d, i, u: ops.scatter_elements(d, i, u), x, np.zeros((2, 3), i64), np.zeros((2, 2), f32))
    with pytest.raises(esgraph.InvalidArgumentError, match="out of range"):
        run(lambda d, i, u: ops.scatter_elements(d, i, u), x, np.full((2, 3), 7, i64), np.zeros((2, 3), f32))


def _bf16_bits_nearest_even(x):
    bits = x.astype(f32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def test_bf16_crosses_numpy_as_uint16_bit_patterns():
    # numpy has no bf16: model inputs and outputs of that dtype are their bits in uint16.
    x = np.array([1.0, 3.14159265, -2.5e-3, 65504.0, 1 / 3], dtype=f32)
    bits = run(lambda t: ops.cast(t, esgraph.bf16), x)
    assert bits.dtype == np.uint16
    np.testing.assert_array_equal(bits, _bf16_bits_nearest_even(x))
    with esgraph.GraphBuilder("from_bf16") as b:
        t = b.input("t", esgraph.bf16, [5])
        y = ops.cast(t, esgraph.f32)
    model = esgraph.compile(b.build([y]))
    np.testing.assert_array_equal(model(bits), (bits.astype(np.uint32) << 16).view(f32))
    with pytest.raises(esgraph.DTypeError, match="bit patterns as a numpy uint16"):
        model(x)  # float values would be read as bits: refused


def test_top_k_ranks_nan_above_every_number():
    x = np.array([1, np.nan, 5, 3, np.nan, 9, 2], f32)
    values, indices = run(lambda t: ops.top_k(t, 3), x)
    check(indices, np.array([1, 4, 5], i64))
    values, indices = run(lambda t: ops.top_k(t, 2, largest=False), x)
    check(indices, np.array([0, 6], i64))


def test_scatter_nd_with_empty_index_tuples_replaces_everything():
    data, upd = np.array([1, 2], f32), np.array([[5, 6]], f32)
    check(run(lambda d, i, u: ops.scatter_nd(d, i, u), data, np.zeros((1, 0), i64), upd), np.array([5, 6], f32))


def test_scatter_elements_refuses_indices_larger_than_data():
    with pytest.raises(esgraph.ShapeError, match="larger than `data`"):
        run(lambda d, i, u: ops.scatter_elements(d, i, u), np.zeros((1, 1), f32), np.zeros((1, 4), i64), np.zeros((1, 4), f32))


def test_stats_give_the_reports_numbers_as_data():
    x = normal(rng_for("stats"), (8, 16))
    graph, _ = build(lambda t: ops.softmax(ops.relu(t) * t + 1.0), x, symbolic={0: [(0, "n")]})  # (a constant scale would become the softmax's)
    lazy = esgraph.compile(graph)
    stats = lazy.stats()
    assert set(stats) == {
        "plans", "launches", "fused_groups", "fused_ops", "epilogue_groups", "f32_rows", "fast_kernels", "reference_kernels",
        "arena_bytes", "lower_bound_bytes", "no_reuse_bytes", "in_place_values", "streams", "events", "device_kernels",
        "device_kernel_launches", "library_calls", "device_copies", "host_launches", "device_bytes", "device_events", "captured", "reorders", "bindings", "stages", "sized_ops",
        "collectives", "collective_bytes"}
    assert stats["plans"] == 0 and stats["launches"] == 0  # no shapes yet: nothing compiled
    lazy(x)
    lazy(x[:3])
    fused = lazy.stats()
    assert fused["plans"] == 2 and fused["bindings"] == 2  # symbolic plans for n up to 8 and up to 4, each bound once
    # relu, mul, add in one group; softmax over the last axis on its own kernel.
    assert (fused["launches"], fused["fused_groups"], fused["fused_ops"], fused["fast_kernels"]) == (2, 1, 3, 1)
    assert fused["arena_bytes"] >= fused["lower_bound_bytes"] == 4 * 16 * 4  # the group's result, for the class's 4 rows
    unfused = esgraph.compile(graph, fusion=False, shapes={"n": 8}).stats()
    assert (unfused["plans"], unfused["launches"], unfused["fused_groups"]) == (1, 4, 0)
    assert unfused["in_place_values"] > 0 and unfused["arena_bytes"] < unfused["no_reuse_bytes"]
    assert unfused["device_kernels"] == unfused["library_calls"] == unfused["captured"] == 0


def test_a_fused_comparison_of_float_members_compares_the_floats():
    # f64 groups run on the double/int64 tiles: a bool result of float members must compare in
    # double (0.8 > 0.2), not the members truncated to integers (0 > 0).
    x = np.array([0.4, -0.3, 1.6, 2.5], f64)
    graph, _ = build(lambda t: (t * 2.0) > (t * 3.0 - 1.0), x)
    for fusion in (True, False):
        check(esgraph.compile(graph, fusion=fusion)(x), (x * 2.0) > (x * 3.0 - 1.0))
    assert esgraph.compile(graph).stats()["fused_groups"] == 1


def _cpu_multiplies_bf16():
    with open("/proc/cpuinfo") as f:
        flags = f.read()
    return " avx512_bf16" in flags or " amx_bf16" in flags


@pytest.mark.skipif(not _cpu_multiplies_bf16(), reason="the CPU does not multiply bfloat16")
@pytest.mark.parametrize("case", ["channels+bias", "groups", "depthwise", "everything", "1x1", "split images",
                                  "split output channels", "split depthwise"])
def test_conv2d_in_bf16_is_within_bfloat16_rounding(case):
    """precision='bf16': images and filters rounded to bfloat16, products summed in f32, within
    bf16's rounding (8 bits of mantissa) of the f64 reference; the report names the precision."""
    spec = dict({**CONV_CASES, **SPLIT_CONV_CASES}[case])
    rng = rng_for(case)
    x, w = conv_data(rng, spec)
    bias = [normal(rng, (w.shape[0],))] if spec.pop("bias", False) else []
    with esgraph.GraphBuilder("conv") as b:
        a = b.input("x", esgraph.f32, x.shape)
        g = b.build([ops.relu(ops.conv2d(a, b.constant(w), bias=b.constant(bias[0]) if bias else None, **spec))])
    model = esgraph.compile(g, precision="bf16", threads=2)  # the split cases in two pieces, each rounding its own images
    want = np.maximum(conv2d_reference(x, w, *bias, **spec), 0)
    # Each product of two operands rounded to 8 bits: a relative error of 2^-8 per operand.
    bound = 2 * 2.0 ** -8 * conv2d_reference(np.abs(x), np.abs(w), **spec) + 1e-5
    assert np.all(np.abs(model(x) - want) <= bound)
    assert "(bf16)" in model.report()
    assert "(bf16)" not in esgraph.compile(g).report()


@pytest.mark.skipif(not _cpu_multiplies_bf16(), reason="the CPU does not multiply bfloat16")
@pytest.mark.parametrize("case", CONSTANT_WEIGHT_PRODUCTS)
def test_matmul_in_bf16_is_within_bfloat16_rounding(case):
    """precision='bf16' rounds a constant-weight product's operands to bfloat16 too, summing in
    f32: within bf16's rounding of the f64 product; the report marks the kernel."""
    a_shape, n = CONSTANT_WEIGHT_PRODUCTS[case]
    rng = rng_for(case, "bf16")
    x, w = normal(rng, a_shape, scale=1.0), normal(rng, (a_shape[-1], n), scale=1.0)
    with esgraph.GraphBuilder("product") as b:
        g = b.build([ops.relu(ops.matmul(b.input("x", esgraph.f32, list(x.shape)), b.constant(w)))])
    model = esgraph.compile(g, precision="bf16", threads=2)
    want = np.maximum(x.astype(f64) @ w.astype(f64), 0)
    bound = 2 * 2.0 ** -8 * (np.abs(x).astype(f64) @ np.abs(w).astype(f64)) + 1e-5
    assert np.all(np.abs(model(x) - want) <= bound)
    assert "(bf16)" in model.report() and "(bf16)" not in esgraph.compile(g).report()


def test_an_unknown_precision_is_refused():
    g = build(lambda a, b: ops.conv2d(a, b), np.ones((1, 1, 3, 3), f32), np.ones((1, 1, 1, 1), f32))[0]
    with pytest.raises(esgraph.InvalidArgumentError, match="precision 'f16'; valid: 'f32', 'bf16'"):
        esgraph.compile(g, precision="f16")
    if not _cpu_multiplies_bf16():
        with pytest.raises(esgraph.UnsupportedError, match="AVX512-BF16 or AMX-BF16"):
            esgraph.compile(g, precision="bf16")
    with pytest.raises(esgraph.UnsupportedError, match="precision 'bf16' is the CPU's"):
        esgraph.compile(g, precision="bf16", backend="ascend-sim")


@pytest.mark.parametrize("x_shape, w_shape, why", [
    ((0, 4, 5, 5), (4, 4, 3, 3), "only its reference kernel"),  # no images
    ((1, 4, 5, 5), (0, 4, 3, 3), "oneDNN: could not create"),   # no filters
])
def test_a_convolution_onednn_does_not_serve_runs_on_im2col_with_the_reason_in_the_report(x_shape, w_shape, why):
    """Alone and heading a group (its rows then run over the im2col result): the result's
    shape, empty, and the report names oneDNN's refusal (the only shapes oneDNN 2.6 refuses
    are empty ones)."""
    rng = rng_for(x_shape, w_shape)
    x, w = normal(rng, x_shape), normal(rng, w_shape)
    for fn in (lambda a, b: ops.conv2d(a, b, pads=[1, 1, 1, 1]), lambda a, b: ops.exp(ops.conv2d(a, b, pads=[1, 1, 1, 1]))):
        model = esgraph.compile(build(fn, x, w)[0])
        report = model.report()
        assert "im2col convolutions x1: " in report and why in report
        got = model(x, w)
        assert got.dtype == f32 and got.shape == conv2d_reference(x, w, pads=(1, 1, 1, 1)).shape and got.size == 0


@pytest.mark.parametrize("block", [0, 16])
def test_a_convolution_plus_its_own_images_is_not_computed_in_place(block):
    """conv(x) + x with x an intermediate that dies there: the plan may give the sum x's buffer,
    so the residual sum cannot be a post-op (oneDNN convolves out of place only); the rows add
    it instead. Values against the reference."""
    rng = rng_for("own images", block)
    x, w = normal(rng, (2, 16, 7, 7)), normal(rng, (16, 16, 3, 3), scale=0.2)
    model = esgraph.compile(build(lambda a, b: ops.conv2d(ops.relu(a), b, pads=[1, 1, 1, 1]) + ops.relu(a), x, w)[0],
                            backend_options={"channel_block": block})
    r = np.maximum(x, 0)
    np.testing.assert_allclose(model(x, w), conv2d_reference(r, w, pads=(1, 1, 1, 1)) + r, rtol=1e-5, atol=1e-5)
    assert "0 with their group as post-ops" in model.report()
