"""Elementwise ops. They keep an NCHW value NCHW: an operand of lower rank broadcasts against
TF's trailing axes, so it is given the same transpose (a per-channel [C] becomes [C, 1, 1])."""
import numpy as np

from ... import _C
from .. import _tensors
from .._layout import NHWC_TO_NCHW, Nchw
from .registry import Unsupported, converts

ops = _C.ops

_UNARY = {
    "Relu": ops.relu, "Relu6": lambda x: ops.clip(x, min=0.0, max=6.0), "Elu": ops.elu, "Selu": ops.selu,
    "Sigmoid": ops.sigmoid, "Tanh": ops.tanh, "Softplus": ops.softplus, "Softsign": ops.softsign,
    "Exp": ops.exp, "Log": ops.log, "Sqrt": ops.sqrt, "Rsqrt": ops.rsqrt, "Square": lambda x: x * x,
    "Neg": ops.neg, "Abs": ops.abs, "Floor": ops.floor, "Ceil": ops.ceil, "Round": ops.round, "Sign": ops.sign,
    "Erf": ops.erf, "Erfc": lambda x: 1.0 - ops.erf(x), "Reciprocal": ops.reciprocal, "Inv": ops.reciprocal, "Sin": ops.sin, "Cos": ops.cos,
    "Tan": ops.tan, "Asin": ops.asin, "Acos": ops.acos, "Atan": ops.atan, "Sinh": ops.sinh, "Cosh": ops.cosh,
    "Asinh": ops.asinh, "Acosh": ops.acosh, "Atanh": ops.atanh, "LogicalNot": ops.logical_not,
    "IsNan": ops.is_nan, "IsInf": ops.is_inf, "_MklSwish": ops.silu,  # grappler's x * sigmoid(x) on oneDNN builds
}

_BINARY = {
    "Add": ops.add, "AddV2": ops.add, "Sub": ops.sub, "Mul": ops.mul, "RealDiv": ops.div, "Div": ops.div,
    "Maximum": ops.maximum, "Minimum": ops.minimum, "Pow": ops.pow,
    "SquaredDifference": lambda a, b: (a - b) * (a - b),
    "Equal": ops.equal, "NotEqual": ops.not_equal, "Less": ops.less, "LessEqual": ops.less_equal,
    "Greater": ops.greater, "GreaterEqual": ops.greater_equal, "LogicalAnd": ops.logical_and,
    "LogicalOr": ops.logical_or,
}


def operands(n, indices):
    """The node's inputs `indices` for an elementwise op, and how to wrap its result: in NCHW
    (Nchw) when one of them is NCHW and every one has rank 4 or less, else in TF's layout."""
    if any(n.is_nchw(i) for i in indices) and all(n.rank(i) <= 4 for i in indices):
        return [_as_nchw(n, i) for i in indices], Nchw
    return [n.x(i) for i in indices], lambda y: y


def _as_nchw(n, i):
    v = n.value(i)
    if isinstance(v, Nchw) or n.rank(i) == 4:
        return n.nchw(i)
    if isinstance(v, np.ndarray):
        if v.size == 1:
            return n.tensor(v)
        full = v.reshape((1,) * (4 - v.ndim) + v.shape)
        return n.tensor(np.ascontiguousarray(full.transpose(NHWC_TO_NCHW)))
    if v.ndim == 0:
        return v
    full = ops.unsqueeze(v, list(range(4 - v.ndim))) if v.ndim < 4 else v  # TF broadcasts from the right
    return ops.transpose(full, perm=NHWC_TO_NCHW)


def unary(n, fn):
    (x,), wrap = operands(n, [0])
    return wrap(fn(x))


@converts(*_UNARY)
def unary_op(n):
    return unary(n, _UNARY[n.op])


@converts(*_BINARY)
def binary_op(n):
    if n.op in ("Div", "RealDiv") and n.dtype(0) not in (_C.f32, _C.f16, _C.bf16, _C.f64):
        raise Unsupported(f"{n.op} of integers (TF truncates them; not supported)")
    (a, b), wrap = operands(n, [0, 1])
    return wrap(_BINARY[n.op](a, b))


@converts("LeakyRelu")
def leaky_relu(n):
    return unary(n, lambda x: ops.leaky_relu(x, alpha=float(n.attr("alpha", 0.2))))


@converts("Cast")
def cast(n):
    to = _tensors.esg_dtype(n.attr("DstT"))
    return unary(n, lambda x: ops.cast(x, to))


@converts("Select", "SelectV2")
def select(n):
    if n.op == "Select" and n.rank(0) == 1 and n.rank(1) > 1:  # v1 Select picks whole rows by a vector
        cond = ops.reshape(n.x(0), [0] + [1] * (n.rank(1) - 1))
        return ops.where(cond, n.x(1), n.x(2))
    (c, a, b), wrap = operands(n, [0, 1, 2])
    return wrap(ops.where(c, a, b))


@converts("AddN")
def add_n(n):
    xs, wrap = operands(n, list(range(n.num_inputs)))
    y = xs[0]
    for x in xs[1:]:
        y = y + x
    return wrap(y)
