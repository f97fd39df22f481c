"""Reductions. A reduction of an NCHW value over its spatial axes stays in NCHW order."""
from ... import _C
from .. import _tensors
from .._layout import Nchw, TO_NCHW_AXIS
from .registry import converts

ops = _C.ops

_REDUCE = {"Mean": ops.reduce_mean, "Sum": ops.reduce_sum, "Max": ops.reduce_max, "Min": ops.reduce_min,
           "Prod": ops.reduce_prod}


@converts(*_REDUCE)
def reduce(n):
    rank = n.rank(0)
    axes = sorted({a % rank for a in n.ints(1, "axes")}) if rank else []
    keep = bool(n.attr("keep_dims", False))
    if not axes:  # TF reduces over no axis: the input as it is
        return n.value(0)
    fn = _REDUCE[n.op]
    if n.is_nchw(0):
        mapped = [TO_NCHW_AXIS[a] for a in axes]
        left = [TO_NCHW_AXIS[a] for a in range(4) if a not in axes]
        if keep:
            return Nchw(fn(n.nchw(0), axes=mapped, keepdims=True))
        if left == sorted(left):  # what is left has TF's order of axes already
            return fn(n.nchw(0), axes=mapped, keepdims=False)
    return fn(n.x(0), axes=axes, keepdims=keep)


@converts("ArgMax", "ArgMin")
def arg_extreme(n):
    (axis,) = n.ints(1, "dimension")
    fn = ops.argmax if n.op == "ArgMax" else ops.argmin
    y = fn(n.x(0), axis=axis % n.rank(0), keepdims=False)
    to = _tensors.esg_dtype(n.attr("output_type", 9))
    return ops.cast(y, to) if to != y.dtype else y
