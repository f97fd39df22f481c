"""What the numerics suites share (test_numerics_*.py and the compile-option and run-input
suites): building a graph over arrays, running it compiled, comparing with a reference, and
seeded data per test case.

Floats are compared with rtol=1e-5, atol=1e-6; integers and bools exactly, and the dtype of
every result must be the one expected. References are computed in float64 and then cast.
"""
import math
import zlib

import numpy as np

import esgraph
from esgraph import ops

RTOL, ATOL = 1e-5, 1e-6
f32, f64, i32, i64 = np.float32, np.float64, np.int32, np.int64


def cpu_flags():
    """The CPU's feature flags as /proc/cpuinfo lists them (none where there is no such file):
    for the tests whose kernel depends on them."""
    try:
        with open("/proc/cpuinfo") as f:
            return set(next((line for line in f if line.startswith("flags")), "").split())
    except OSError:
        return set()


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


# ---- references several suites share --------------------------------------------------------
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


REDUCE = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max, "reduce_min": np.min,
          "reduce_prod": np.prod}


def softmax_reference(z, axis):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def layer_norm_reference(x, axis, scale=None, bias=None, eps=1e-5):
    axes = tuple(range(axis % x.ndim, x.ndim))
    y = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
    return y * (1 if scale is None else scale) + (0 if bias is None else bias)
