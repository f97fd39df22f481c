"""Converters for the torch functions and Tensor methods fx records (call_function and
call_method nodes); each takes the call's own arguments, with Tensors as esgraph Tensors."""
import builtins
import math
import operator

import torch
import torch.nn.functional as F

from .. import _C
from .._compose import numpy_matmul
from ._dtypes import FLOATS, TO_ESG
from ._modules import Unsupported, avg_pool, conv, flatten, linear, max_pool, softplus

ops = _C.ops
Tensor = _C.Tensor


def _axis(dim, rank):
    return dim + rank if dim < 0 else dim


def _dims(args):
    """A shape given as varargs (x.view(2, 3)) or as one sequence (x.view((2, 3)))."""
    return list(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)) else list(args)


def _reduce(fn, promotes_ints=False):
    """torch.sum / mean / amax / amin; sum and mean take `dtype`, and sum adds integers and
    booleans up in int64 as PyTorch does."""
    def convert(x, dim=None, keepdim=False, *, dtype=None):
        if dtype is not None:
            x = _cast(x, dtype)
        elif promotes_ints and x.dtype not in FLOATS:
            x = ops.cast(x, _C.i64)
        axes = [] if dim is None else ([dim] if isinstance(dim, int) else list(dim))
        return fn(x, axes=axes, keepdims=keepdim)
    return convert


def _softmax(fn):
    def convert(x, dim=None, _stacklevel=3, dtype=None):
        if dim is None:
            raise Unsupported("softmax without dim")
        return fn(x if dtype is None else _cast(x, dtype), axis=dim)
    return convert


_WIDTH = {getattr(_C, "bool"): 0, _C.u8: 1, _C.i8: 1, _C.i16: 2, _C.i32: 3, _C.i64: 4,
          _C.f16: 5, _C.bf16: 5, _C.f32: 6, _C.f64: 7}


def _promote(a, b):
    """Two tensors of different dtypes meet in the wider one, floats above integers, as
    PyTorch's type promotion does for tensors of one kind (Python scalars adapt by themselves)."""
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a.dtype != b.dtype:
        to = max(a.dtype, b.dtype, key=lambda d: _WIDTH[d])
        a, b = (v if v.dtype == to else ops.cast(v, to) for v in (a, b))
    return a, b


def _is_float(v):
    return v.dtype in FLOATS if isinstance(v, Tensor) else isinstance(v, float)


def _divide(a, b, *, rounding_mode=None):
    """torch.div: true division gives floats even for integers; "trunc" and "floor" round the
    quotient and keep an integer dtype."""
    a, b = _promote(a, b)
    floats = _is_float(a) or _is_float(b)
    if rounding_mode is None:
        if not floats:  # integers divide into the default float dtype
            a, b = (ops.cast(v, _C.f32) if isinstance(v, Tensor) else float(v) for v in (a, b))
        return a / b
    if rounding_mode not in ("trunc", "floor"):
        raise Unsupported(f"rounding_mode={rounding_mode}")
    like = a if isinstance(a, Tensor) else b
    wide = [ops.cast(v, _C.f64) if isinstance(v, Tensor) else float(v) for v in (a, b)]
    q = wide[0] / wide[1]
    q = ops.floor(q) if rounding_mode == "floor" else ops.sign(q) * ops.floor(ops.abs(q))
    return q if floats and like.dtype == _C.f64 else ops.cast(q, like.dtype)


def _getitem(x, index):
    if not isinstance(x, Tensor):
        return x[index]
    index = index if isinstance(index, tuple) else (index,)
    if any(i is Ellipsis for i in index):
        at = index.index(Ellipsis)
        fill = x.ndim - (len(index) - 1 - sum(i is None for i in index))
        index = index[:at] + (slice(None),) * fill + index[at + 1:]
    starts, ends, axes, steps, drop, insert, axis = [], [], [], [], [], [], 0
    for i in index:
        if i is None:
            insert.append(axis + len(insert))
            continue
        if isinstance(i, int):
            starts.append(i), ends.append(i + 1 if i != -1 else 2**62), axes.append(axis), steps.append(1)
            drop.append(axis)
        elif isinstance(i, slice):
            if i != slice(None):
                starts.append(0 if i.start is None else i.start)
                ends.append(2**62 if i.stop is None else i.stop)
                axes.append(axis), steps.append(1 if i.step is None else i.step)
        else:
            raise Unsupported(f"indexing with {type(i).__name__}")
        axis += 1
    y = ops.slice(x, starts, ends, axes=axes, steps=steps) if axes else x
    if drop:
        y = ops.squeeze(y, axes=drop)
    if insert:
        y = ops.unsqueeze(y, [a - sum(d < a for d in drop) for a in insert])
    return y


def _size(x, dim=None):
    return tuple(x.shape) if dim is None else x.shape[dim]


def _chunk(x, chunks, dim=0):
    length = x.shape[dim]
    step = -(-length // chunks)
    return ops.split(x, [min(step, length - s) for s in range(0, length, step)], axis=dim)


def _split(x, size, dim=0):
    length = x.shape[dim]
    sizes = list(size) if isinstance(size, (list, tuple)) else [min(size, length - s) for s in range(0, length, size)]
    return ops.split(x, sizes, axis=dim)


def _transpose(x, a, b):
    perm = list(range(x.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return ops.transpose(x, perm=perm)


def _cast(x, dtype):
    if dtype not in TO_ESG:
        raise Unsupported(f"cast to {dtype}")
    return ops.cast(x, TO_ESG[dtype])


def _to(x, *args, **kwargs):
    """Tensor.to: a dtype, or another tensor's dtype; devices and flags change nothing here."""
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.dtype):
            return _cast(x, a)
        if isinstance(a, Tensor):
            return ops.cast(x, a.dtype)
    return x


def _expand(x, *sizes):
    sizes = _dims(sizes)
    lead = len(sizes) - x.ndim
    return ops.expand(x, [x.shape[i - lead] if s == -1 else s for i, s in enumerate(sizes)])


def _repeat(x, *repeats):
    """Tensor.repeat: each axis tiled its count of times, more counts than axes adding leading
    ones. As views: x with a unit axis before each of its own, expanded to the counts, reshaped."""
    repeats = _dims(repeats)
    if len(repeats) < x.ndim:
        raise Unsupported(f"repeat with {len(repeats)} counts for a tensor of rank {x.ndim}")
    shape = [1] * (len(repeats) - x.ndim) + list(x.shape)
    if not all(isinstance(d, int) for d in shape):
        raise Unsupported("repeat of a tensor with symbolic sizes")
    interleaved = [d for s in shape for d in (1, s)]
    tiled = ops.expand(ops.reshape(x, interleaved), [d for r, s in zip(repeats, shape) for d in (r, s)])
    return ops.reshape(tiled, [r * s for r, s in zip(repeats, shape)])


def _gelu(x, approximate="none"):
    return ops.gelu(x, approximate=approximate)


def _layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    return ops.layer_norm(x, scale=weight, bias=bias, axis=-len(normalized_shape), epsilon=eps)


def _stack(tensors, dim=0):
    axis = _axis(dim, tensors[0].ndim + 1)
    return ops.concat([ops.unsqueeze(t, [axis]) for t in tensors], axis)


def _squeeze(x, dim=None):
    if dim is not None and x.shape[dim] != 1:
        return x  # PyTorch leaves an axis that is not 1 alone
    return ops.squeeze(x, axes=[] if dim is None else [dim])


def _binary(fn):
    """add, sub, mul (and their methods) with type promotion and add/sub's `alpha`."""
    def convert(a, b, *, alpha=None):
        a, b = _promote(a, b)
        if alpha is not None and alpha != 1:
            b = b * alpha
        return fn(a, b)
    return convert


def _identity(x, *args, **kwargs):
    return x


def _clamp(x, min=None, max=None):
    return ops.clip(x, min=-math.inf if min is None else min, max=math.inf if max is None else max)


def _masked_fill(x, mask, value):
    return ops.where(mask, value, x)


FUNCTIONS = {
    operator.add: _binary(operator.add), torch.add: _binary(operator.add),
    operator.sub: _binary(operator.sub), torch.sub: _binary(operator.sub),
    operator.mul: _binary(operator.mul), torch.mul: _binary(operator.mul),
    operator.truediv: _divide, torch.div: _divide, torch.true_divide: _divide,
    operator.neg: operator.neg, torch.neg: operator.neg,
    operator.pow: operator.pow, torch.pow: operator.pow,
    operator.matmul: numpy_matmul, torch.matmul: numpy_matmul, torch.bmm: ops.matmul,
    operator.getitem: _getitem, builtins.getattr: builtins.getattr,
    operator.floordiv: operator.floordiv, operator.mod: operator.mod,
    torch.relu: ops.relu, F.relu: lambda x, inplace=False: ops.relu(x),
    torch.sigmoid: ops.sigmoid, torch.tanh: ops.tanh, torch.exp: ops.exp, torch.log: ops.log,
    torch.sqrt: ops.sqrt, torch.rsqrt: ops.rsqrt, torch.abs: ops.abs, torch.erf: ops.erf,
    F.gelu: _gelu, F.silu: lambda x, inplace=False: ops.silu(x),
    F.leaky_relu: lambda x, negative_slope=0.01, inplace=False: ops.leaky_relu(x, alpha=negative_slope),
    F.hardswish: lambda x, inplace=False: ops.hard_swish(x), F.mish: lambda x, inplace=False: ops.mish(x),
    F.elu: lambda x, alpha=1.0, inplace=False: ops.elu(x, alpha=alpha),
    F.softplus: softplus,
    F.softmax: _softmax(ops.softmax), torch.softmax: _softmax(ops.softmax),
    F.log_softmax: _softmax(ops.log_softmax), torch.log_softmax: _softmax(ops.log_softmax),
    F.layer_norm: _layer_norm, F.linear: linear, F.conv2d: conv,
    F.max_pool2d: max_pool, F.avg_pool2d: avg_pool,
    F.dropout: _identity, torch.flatten: flatten, torch.cat: lambda ts, dim=0: ops.concat(list(ts), dim),
    torch.concat: lambda ts, dim=0: ops.concat(list(ts), dim), torch.stack: _stack,
    torch.transpose: _transpose, torch.permute: lambda x, dims: ops.transpose(x, perm=list(dims)),
    torch.reshape: lambda x, shape: ops.reshape(x, list(shape)), torch.squeeze: _squeeze,
    torch.unsqueeze: lambda x, dim: ops.unsqueeze(x, [_axis(dim, x.ndim + 1)]),
    torch.mean: _reduce(ops.reduce_mean), torch.sum: _reduce(ops.reduce_sum, promotes_ints=True),
    torch.amax: _reduce(ops.reduce_max), torch.amin: _reduce(ops.reduce_min),
    torch.where: ops.where, torch.maximum: ops.maximum, torch.minimum: ops.minimum,
    torch.clamp: _clamp,
    torch.chunk: _chunk, torch.split: _split,
}

METHODS = {
    "view": lambda x, *s: ops.reshape(x, _dims(s)), "reshape": lambda x, *s: ops.reshape(x, _dims(s)),
    "permute": lambda x, *d: ops.transpose(x, perm=_dims(d)), "transpose": _transpose,
    "contiguous": _identity, "size": _size, "dim": lambda x: x.ndim, "flatten": flatten,
    "unsqueeze": lambda x, dim: ops.unsqueeze(x, [_axis(dim, x.ndim + 1)]), "squeeze": _squeeze,
    "mean": _reduce(ops.reduce_mean), "sum": _reduce(ops.reduce_sum, promotes_ints=True), "softmax": _softmax(ops.softmax),
    "chunk": _chunk, "split": _split, "expand": _expand, "repeat": _repeat, "relu": ops.relu, "sigmoid": ops.sigmoid,
    "tanh": ops.tanh, "exp": ops.exp, "pow": operator.pow, "float": lambda x: _cast(x, torch.float32),
    "to": _to, "type_as": lambda x, other: ops.cast(x, other.dtype), "masked_fill": _masked_fill,
    "add": _binary(operator.add), "mul": _binary(operator.mul), "sub": _binary(operator.sub),
    "div": _divide, "matmul": numpy_matmul, "t": lambda x: ops.transpose(x), "clamp": _clamp,
    "abs": ops.abs, "neg": ops.neg, "sqrt": ops.sqrt, "rsqrt": ops.rsqrt, "log": ops.log,
}
