"""Reductions, arg-reductions and Det. ONNX keeps reduced axes by default; axes move from an
attribute to an input at opset 13 (ReduceSum) or 18 (the others)."""
import math

import numpy as np

from ... import _C
from .. import _dtypes
from .registry import Unsupported, check_attrs, converts

ops = _C.ops


def _axes(n):
    if n.has(1):
        return n.ints(1, "axes")
    return list(n.attr("axes", []))


def _reduction(compose):
    def convert(n):
        check_attrs(n, ("axes", "keepdims", "noop_with_empty_axes"))
        axes = _axes(n)
        x = n.x(0)
        if not axes and n.attr("noop_with_empty_axes", 0):
            return x
        return compose(x, axes, bool(n.attr("keepdims", 1)))
    return convert


def _log_sum_exp(x, axes, keepdims):
    # max + log(sum(exp(x - max))): no overflow for large inputs; a row of -inf (whose max is
    # not finite) shifts by 0 and gives log(0) = -inf as it should, and so does no element.
    empty = _over_nothing(x, axes, keepdims, -math.inf)
    if empty is not None:
        return empty
    top = ops.reduce_max(x, axes=axes, keepdims=True)
    top = ops.where(ops.is_inf(top), 0.0, top)
    y = ops.log(ops.reduce_sum(ops.exp(x - top), axes=axes, keepdims=True)) + top
    return y if keepdims else ops.squeeze(y, axes=axes or list(range(x.ndim)))


def _extreme(reduce, empty):
    """ReduceMax or ReduceMin: booleans as 0 and 1 (False < True, opset 20); over no elements,
    the identity of the reduction (-inf or +inf, a type's bound where it has no infinity)."""
    def compose(x, axes, keepdims):
        if x.dtype == _C.bool:
            return ops.cast(compose(ops.cast(x, _C.u8), axes, keepdims), _C.bool)
        nothing = _over_nothing(x, axes, keepdims, empty(x.dtype))
        return reduce(x, axes=axes, keepdims=keepdims) if nothing is None else nothing
    return compose


def _over_nothing(x, axes, keepdims, value):
    """A reduction's result filled with `value` when an axis it reduces has no elements (a
    kernel has nothing to start from), else None."""
    reduced = [a % x.ndim for a in axes] if axes else list(range(x.ndim))
    if not any(x.shape[a] == 0 for a in reduced):
        return None
    shape = [1 if d in reduced else size for d, size in enumerate(x.shape) if keepdims or d not in reduced]
    if not all(isinstance(d, int) for d in shape):
        raise Unsupported(f"a reduction of no elements to symbolic sizes {shape}")
    if x.dtype == _C.bf16:
        return ops.fill(shape, value=float(value), dtype=x.dtype)
    return _C.constant(np.full(shape, value, _dtypes.numpy_dtype(x.dtype)))


_FLOATS = (_C.f16, _C.bf16, _C.f32, _C.f64)


def _bound(dtype, low):
    if dtype in _FLOATS:
        return -math.inf if low else math.inf
    info = np.iinfo(_dtypes.numpy_dtype(dtype))
    return info.min if low else info.max


_REDUCTIONS = {
    "ReduceSum": lambda x, a, k: ops.reduce_sum(x, axes=a, keepdims=k),
    "ReduceMean": lambda x, a, k: ops.reduce_mean(x, axes=a, keepdims=k),
    "ReduceMax": _extreme(ops.reduce_max, lambda dtype: _bound(dtype, low=True)),
    "ReduceMin": _extreme(ops.reduce_min, lambda dtype: _bound(dtype, low=False)),
    "ReduceProd": lambda x, a, k: ops.reduce_prod(x, axes=a, keepdims=k),
    "ReduceL1": lambda x, a, k: ops.reduce_sum(ops.abs(x), axes=a, keepdims=k),
    "ReduceL2": lambda x, a, k: ops.sqrt(ops.reduce_sum(x * x, axes=a, keepdims=k)),
    "ReduceSumSquare": lambda x, a, k: ops.reduce_sum(x * x, axes=a, keepdims=k),
    "ReduceLogSum": lambda x, a, k: ops.log(ops.reduce_sum(x, axes=a, keepdims=k)),
    "ReduceLogSumExp": _log_sum_exp,
}
for _op, _compose in _REDUCTIONS.items():
    converts(_op)(_reduction(_compose))


def _arg(fn):
    def convert(n):
        check_attrs(n, ("axis", "keepdims", "select_last_index"))
        x, axis, keepdims = n.x(0), n.attr("axis", 0), bool(n.attr("keepdims", 1))
        if not n.attr("select_last_index", 0):
            return fn(x, axis=axis, keepdims=keepdims)
        # The last of equal elements is the first one of the reversed axis.
        length = x.shape[axis]
        flipped = fn(ops.slice(x, [-1], [-(2**62)], axes=[axis], steps=[-1]), axis=axis, keepdims=keepdims)
        return (flipped * -1) + (length - 1)
    return convert


converts("ArgMax")(_arg(ops.argmax))
converts("ArgMin")(_arg(ops.argmin))


@converts("Det")
def det(n):
    return ops.det(n.x(0))
