"""ATen's reductions."""
from ... import _C
from .registry import Unsupported, as_dtype, converts, esg_dtype, ops, static


def _axes(dims, rank):
    """ATen's reduced dims: None or an empty list for every axis."""
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    return [d + rank if d < 0 else d for d in dims] or list(range(rank))


def _reduce(op, call, x, dims, keepdim, dtype=None):
    # ATen sums integers and booleans in i64; the result's dtype says which it is.
    out = esg_dtype(dtype or call.val.dtype)
    return getattr(ops, op)(as_dtype(x, out), axes=_axes(dims, x.ndim), keepdims=bool(keepdim))


@converts("aten.sum.dim_IntList")
def _sum(call, x, dims=None, keepdim=False, dtype=None):
    return _reduce("reduce_sum", call, x, dims, keepdim)


@converts("aten.sum.default")
def _sum_all(call, x, dtype=None):
    return _reduce("reduce_sum", call, x, None, False)


@converts("aten.mean.dim")
def _mean(call, x, dims=None, keepdim=False, dtype=None):
    return _reduce("reduce_mean", call, x, dims, keepdim)


@converts("aten.mean.default")
def _mean_all(call, x, dtype=None):
    return _reduce("reduce_mean", call, x, None, False)


@converts("aten.max.default", "aten.min.default")
def _max_all(call, x):
    return _reduce("reduce_max" if call.name.startswith("aten.max") else "reduce_min", call, x, None, False)


@converts("aten.amax.default")
def _amax(call, x, dims=(), keepdim=False):
    return _reduce("reduce_max", call, x, dims, keepdim)


@converts("aten.amin.default")
def _amin(call, x, dims=(), keepdim=False):
    return _reduce("reduce_min", call, x, dims, keepdim)


@converts("aten.prod.dim_int")
def _prod(call, x, dim, keepdim=False, dtype=None):
    return _reduce("reduce_prod", call, x, dim, keepdim)


@converts("aten.argmax.default", "aten.argmin.default")
def _argmax(call, x, dim=None, keepdim=False):
    op = ops.argmax if call.name.startswith("aten.argmax") else ops.argmin
    if dim is None:
        return op(ops.reshape(x, [-1]), axis=0, keepdims=False) if not keepdim else \
            ops.reshape(op(ops.reshape(x, [-1]), axis=0, keepdims=False), [1] * x.ndim)
    return op(x, axis=dim, keepdims=bool(keepdim))


@converts("aten.max.dim", "aten.min.dim")
def _max_dim(call, x, dim, keepdim=False):
    values = _reduce("reduce_max" if call.name.startswith("aten.max") else "reduce_min", call, x, dim, keepdim, call.val[0].dtype)
    indices = (ops.argmax if call.name.startswith("aten.max") else ops.argmin)(x, axis=dim, keepdims=bool(keepdim))
    return (values, indices)


@converts("aten.var.correction")
def _var(call, x, dims=None, correction=None, keepdim=False):
    axes = _axes(dims, x.ndim)
    shape = call.arg_val(0).shape
    count = 1
    for a in axes:
        if not isinstance(shape[a], int):
            raise Unsupported(f"a variance over the symbolic size {shape[a]}")
        count *= shape[a]
    centered = x - ops.reduce_mean(x, axes=axes, keepdims=True)
    total = ops.reduce_sum(centered * centered, axes=axes, keepdims=bool(keepdim))
    correction = 1 if correction is None else correction
    if count > correction:
        return total * (1.0 / (count - correction))
    return ops.div(total, as_dtype(0.0, total.dtype))  # as PyTorch: inf, or nan where the sum is 0


@converts("aten.any.dim", "aten.any.dims", "aten.any.default")
def _any(call, x, dims=None, keepdim=False):
    """Whether any element is nonzero: the largest of 0/1 values, reduced in f32 (the CPU's
    fast reductions; PyTorch's attention decomposition asks it of every score row)."""
    nonzero = x if x.dtype == getattr(_C, "bool") else ops.not_equal(x, as_dtype(0, x.dtype))
    found = ops.reduce_max(ops.cast(nonzero, _C.f32), axes=_axes(dims, x.ndim), keepdims=bool(keepdim))
    return ops.greater(found, as_dtype(0.0, _C.f32))


@converts("aten.topk.default")
def _topk(call, x, k, dim=-1, largest=True, sorted=True):
    """The k largest or smallest along dim, in order (sorted=False allows any order: this one)."""
    return tuple(ops.top_k(x, static(k, "top-k's k"), axis=dim, largest=bool(largest)))
