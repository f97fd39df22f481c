"""Elementwise ONNX ops: most map to one esgraph op; the few ONNX defines by a formula esgraph
has no op for are written as that formula over esgraph ops (the compiler fuses them back into
one kernel)."""
import math
from functools import reduce as fold_left

import numpy as np

from ... import _C
from .. import _dtypes
from .._sequences import is_collection
from .registry import Unsupported, check_attrs, converts

ops = _C.ops
_FLOATS = (_C.f32, _C.f64, _C.f16, _C.bf16)
_UNSIGNED = (_C.u8, _C.u16, _C.u32, _C.u64)

_UNARY = {
    "Abs": ops.abs, "Neg": ops.neg, "Exp": ops.exp, "Log": ops.log, "Sqrt": ops.sqrt,
    "Reciprocal": ops.reciprocal, "Sigmoid": ops.sigmoid, "Tanh": ops.tanh, "Relu": ops.relu,
    "Erf": ops.erf, "Sin": ops.sin, "Cos": ops.cos, "Floor": ops.floor, "Ceil": ops.ceil,
    "Round": ops.round, "Sign": ops.sign, "Not": ops.logical_not, "Tan": ops.tan, "Asin": ops.asin,
    "Acos": ops.acos, "Atan": ops.atan, "Sinh": ops.sinh, "Cosh": ops.cosh, "Asinh": ops.asinh,
    "Acosh": ops.acosh, "Atanh": ops.atanh, "Softplus": ops.softplus, "Softsign": ops.softsign,
    "HardSwish": ops.hard_swish, "Mish": ops.mish, "IsNaN": ops.is_nan,
}
_BINARY = {
    "Add": ops.add, "Sub": ops.sub, "Mul": ops.mul, "Div": ops.div, "Equal": ops.equal,
    "Less": ops.less, "LessOrEqual": ops.less_equal, "Greater": ops.greater,
    "GreaterOrEqual": ops.greater_equal, "And": ops.logical_and, "Or": ops.logical_or,
    "Xor": ops.not_equal,
}
_VARIADIC = {"Max": ops.maximum, "Min": ops.minimum, "Sum": ops.add}


def _unary(fn):
    def convert(n):
        check_attrs(n, ())
        return fn(n.x(0))
    return convert


def _binary(fn):
    def convert(n):
        check_attrs(n, ("broadcast",) if n.opset < 7 else ())  # legacy broadcast with `axis` is refused
        return fn(n.x(0), n.x(1))
    return convert


def _variadic(fn):
    def convert(n):
        check_attrs(n, ())
        return fold_left(fn, [n.x(i) for i in range(n.num_inputs)])
    return convert


for _op, _fn in _UNARY.items():
    converts(_op)(_unary(_fn))
for _op, _fn in _BINARY.items():
    converts(_op)(_binary(_fn))
for _op, _fn in _VARIADIC.items():
    converts(_op)(_variadic(_fn))


@converts("Mean")
def mean(n):
    check_attrs(n, ())
    return _variadic(ops.add)(n) / float(n.num_inputs)


@converts("Pow")
def pow_(n):
    check_attrs(n, ())
    base, exponent = n.x(0), n.x(1)
    if base.dtype in _FLOATS:
        # ONNX lets the exponent's type differ from the base's.
        return ops.pow(base, exponent if exponent.dtype == base.dtype else ops.cast(exponent, base.dtype))
    # Integer powers: in f64, exact for the results an integer type holds up to 2**53.
    return ops.cast(ops.round(ops.pow(ops.cast(base, _C.f64), ops.cast(exponent, _C.f64))), base.dtype)


@converts("Where")
def where(n):
    return ops.where(n.x(0), n.x(1), n.x(2))


@converts("Identity")
def identity(n):
    v = n.value(0)
    return v if is_collection(v) else n.x(0)


@converts("Dropout")
def dropout(n):
    # Inference, or training with a ratio of 0: the identity; the mask output, when asked for,
    # keeps everything. Training with another ratio draws a random mask.
    check_attrs(n, ("seed", "ratio", "is_test"))
    if n.has(2) and bool(n.const(2, "training_mode")):
        ratio = n.const(1, "ratio") if n.has(1) else np.asarray(0.5)
        if float(ratio) != 0:
            raise Unsupported(f"training_mode with a ratio of {float(ratio)} (a random mask) is not supported")
    x = n.x(0)
    if n.num_outputs > 1 and n.proto.output[1]:
        return [x, ops.fill(list(x.shape), value=1, dtype=getattr(_C, "bool"))]
    return x


@converts("Cast")
def cast(n):
    check_attrs(n, ("to", "saturate", "round_mode"))  # both for float8 types only, which esgraph has not
    return ops.cast(n.x(0), _dtypes.esg_dtype(n.attr("to")))


@converts("CastLike")
def cast_like(n):
    check_attrs(n, ("saturate", "round_mode"))
    return ops.cast(n.x(0), n.dtype(1))


@converts("Clip")
def clip(n):
    if n.opset < 11:
        return ops.clip(n.x(0), min=n.attr("min", -math.inf), max=n.attr("max", math.inf))
    if all(n.known(i) or not n.has(i) for i in (1, 2)):
        low, high = (float(n.const(i)) if n.has(i) else default for i, default in ((1, -math.inf), (2, math.inf)))
        return ops.clip(n.x(0), min=low, max=high)
    y = n.x(0)  # bounds computed at run time
    if n.has(1):
        y = ops.maximum(y, n.x(1))
    return ops.minimum(y, n.x(2)) if n.has(2) else y


@converts("LeakyRelu")
def leaky_relu(n):
    return ops.leaky_relu(n.x(0), alpha=n.attr("alpha", 0.01))


@converts("PRelu")
def prelu(n):
    x = n.x(0)
    return ops.where(x < 0, x * n.x(1), x)


@converts("Celu")
def celu(n):
    x, alpha = n.x(0), n.attr("alpha", 1.0)
    return ops.relu(x) + ops.minimum(alpha * (ops.exp(x / alpha) - 1), 0)


@converts("ThresholdedRelu")
def thresholded_relu(n):
    x = n.x(0)
    return ops.where(x > n.attr("alpha", 1.0), x, 0)


@converts("Shrink")
def shrink(n):
    x, bias, lambd = n.x(0), n.attr("bias", 0.0), n.attr("lambd", 0.5)
    return ops.where(x < -lambd, x + bias, ops.where(x > lambd, x - bias, 0))


@converts("Elu")
def elu(n):
    return ops.elu(n.x(0), alpha=n.attr("alpha", 1.0))


@converts("Selu")
def selu(n):
    return ops.selu(n.x(0), alpha=n.attr("alpha", 1.67326319217681884765625),
                    gamma=n.attr("gamma", 1.05070102214813232421875))


@converts("HardSigmoid")
def hard_sigmoid(n):
    return ops.hard_sigmoid(n.x(0), alpha=n.attr("alpha", 0.2), beta=n.attr("beta", 0.5))


@converts("IsInf")
def is_inf(n):
    return ops.is_inf(n.x(0), positive=bool(n.attr("detect_positive", 1)),
                      negative=bool(n.attr("detect_negative", 1)))


@converts("Mod")
def mod(n):
    check_attrs(n, ("fmod",))
    a, b = n.x(0), n.x(1)
    fmod = bool(n.attr("fmod", 0))
    if a.dtype in _FLOATS:
        if not fmod and n.opset < 28:
            raise Unsupported("fmod=0 is defined for integers only (for floats too from opset 28)")
        # In f64, so f32's quotient does not round: C's fmod truncates the quotient. A finite a
        # over an infinite b is a itself (the product below would be 0 * inf).
        wide_a, wide_b = ops.cast(a, _C.f64), ops.cast(b, _C.f64)
        q = wide_a / wide_b
        q = ops.sign(q) * ops.floor(ops.abs(q))
        r = ops.where(ops.is_inf(wide_b) & ops.logical_not(ops.is_inf(wide_a) | ops.is_nan(wide_a)), wide_a,
                      wide_a - q * wide_b)
        if not fmod:  # Python's %: the divisor's sign, one b away where the signs differ; a zero signed as b
            r = ops.where((r != 0) & ((r < 0) != (wide_b < 0)), r + wide_b, r)
            r = ops.where(r == 0, ops.sign(wide_b) * 0.0, r)
        return ops.cast(r, a.dtype)
    # Integers stay exact in their own type: division truncates (C's %, which fmod=1 asks for);
    # the default takes the divisor's sign (Python's %), one step of b away when the signs differ.
    r = a - (a / b) * b
    if fmod or a.dtype in _UNSIGNED:
        return r
    return ops.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@converts("BitShift")
def bit_shift(n):
    check_attrs(n, ("direction",))
    x, amount = n.x(0), n.x(1)
    if x.dtype not in _UNSIGNED:
        raise Unsupported(f"BitShift is defined for unsigned integers, not {x.dtype.name}")
    direction = n.attr("direction", "")
    if direction not in ("LEFT", "RIGHT"):
        raise Unsupported(f"BitShift direction '{direction}' (LEFT or RIGHT)")
    return (ops.shift_left if direction == "LEFT" else ops.shift_right)(x, amount)


@converts("Gelu")
def gelu(n):
    check_attrs(n, ("approximate",))
    approximate = n.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise Unsupported(f"approximate={approximate}")
    return ops.gelu(n.x(0), approximate=approximate)


def _swish(n, x):
    """x · sigmoid(alpha · x), silu where alpha is 1."""
    alpha = n.attr("alpha", 1.0)
    return ops.silu(x) if alpha == 1.0 else x * ops.sigmoid(x * ops.cast(n.tensor(np.asarray(alpha, np.float32)), x.dtype))


@converts("Swish")
def swish(n):
    check_attrs(n, ("alpha",))
    return _swish(n, n.x(0))


@converts("SwiGLU")
def swiglu(n):
    check_attrs(n, ("alpha",))
    a, b = n.x(0), n.x(1)
    if list(a.shape) != list(b.shape):
        raise Unsupported(f"A {list(a.shape)} and B {list(b.shape)} must have one shape (SwiGLU does not broadcast)")
    return _swish(n, a) * b
