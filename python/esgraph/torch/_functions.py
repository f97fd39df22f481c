"""Converters for the torch functions and Tensor methods fx records (call_function and
call_method nodes); each takes the call's own arguments, with Tensors as esgraph Tensors."""
import builtins
import math
import operator

import torch
import torch.nn.functional as F

from .. import _C
from .._compose import numpy_matmul
from ._modules import Unsupported, conv, linear, pool

ops = _C.ops
Tensor = _C.Tensor
_DTYPES = {torch.float32: _C.f32, torch.float64: _C.f64, torch.float16: _C.f16, torch.int64: _C.i64,
           torch.int32: _C.i32, torch.bool: getattr(_C, "bool")}


def _axis(dim, rank):
    return dim + rank if dim < 0 else dim


def _dims(args):
    """A shape given as varargs (x.view(2, 3)) or as one sequence (x.view((2, 3)))."""
    return list(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)) else list(args)


def _reduce(fn):
    def convert(x, dim=None, keepdim=False, *, dtype=None):
        axes = [] if dim is None else ([dim] if isinstance(dim, int) else list(dim))
        return fn(x, axes=axes, keepdims=keepdim)
    return convert


def _softmax(fn):
    def convert(x, dim=None, _stacklevel=3, dtype=None):
        if dim is None:
            raise Unsupported("softmax without dim")
        return fn(x, axis=dim)
    return convert


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


def _flatten(x, start_dim=0, end_dim=-1):
    start, end = _axis(start_dim, x.ndim), _axis(end_dim, x.ndim)
    shape = list(x.shape)
    return ops.reshape(x, shape[:start] + [math.prod(shape[start:end + 1])] + shape[end + 1:])


def _transpose(x, a, b):
    perm = list(range(x.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return ops.transpose(x, perm=perm)


def _cast(x, dtype):
    if dtype not in _DTYPES:
        raise Unsupported(f"cast to {dtype}")
    return ops.cast(x, _DTYPES[dtype])


def _to(x, *args, **kwargs):
    dtypes = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.dtype)]
    return _cast(x, dtypes[0]) if dtypes else x


def _expand(x, *sizes):
    sizes = _dims(sizes)
    lead = len(sizes) - x.ndim
    return ops.expand(x, [x.shape[i - lead] if s == -1 else s for i, s in enumerate(sizes)])


def _gelu(x, approximate="none"):
    return ops.gelu(x, approximate=approximate)


def _layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    return ops.layer_norm(x, scale=weight, bias=bias, axis=-len(normalized_shape), epsilon=eps)


def _stack(tensors, dim=0):
    axis = _axis(dim, tensors[0].ndim + 1)
    return ops.concat([ops.unsqueeze(t, [axis]) for t in tensors], axis)


def _squeeze(x, dim=None):
    return ops.squeeze(x, axes=[] if dim is None else [dim])


def _binary(fn):
    def convert(a, b, *, alpha=None):
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
    operator.mul: operator.mul, torch.mul: operator.mul,
    operator.truediv: operator.truediv, torch.div: operator.truediv,
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
    F.softplus: lambda x, beta=1, threshold=20: ops.softplus(x) if beta == 1 else ops.softplus(x * beta) / beta,
    F.softmax: _softmax(ops.softmax), torch.softmax: _softmax(ops.softmax),
    F.log_softmax: _softmax(ops.log_softmax), torch.log_softmax: _softmax(ops.log_softmax),
    F.layer_norm: _layer_norm, F.linear: linear, F.conv2d: conv,
    F.max_pool2d: lambda x, *a, **k: pool(ops.max_pool2d, x, *a, **k),
    F.avg_pool2d: lambda x, *a, **k: pool(ops.avg_pool2d, x, *a, **k),
    F.dropout: _identity, torch.flatten: _flatten, torch.cat: lambda ts, dim=0: ops.concat(list(ts), dim),
    torch.concat: lambda ts, dim=0: ops.concat(list(ts), dim), torch.stack: _stack,
    torch.transpose: _transpose, torch.permute: lambda x, dims: ops.transpose(x, perm=list(dims)),
    torch.reshape: lambda x, shape: ops.reshape(x, list(shape)), torch.squeeze: _squeeze,
    torch.unsqueeze: lambda x, dim: ops.unsqueeze(x, [_axis(dim, x.ndim + 1)]),
    torch.mean: _reduce(ops.reduce_mean), torch.sum: _reduce(ops.reduce_sum),
    torch.amax: _reduce(ops.reduce_max), torch.amin: _reduce(ops.reduce_min),
    torch.where: ops.where, torch.maximum: ops.maximum, torch.minimum: ops.minimum,
    torch.clamp: _clamp,
    torch.chunk: _chunk, torch.split: _split,
}

METHODS = {
    "view": lambda x, *s: ops.reshape(x, _dims(s)), "reshape": lambda x, *s: ops.reshape(x, _dims(s)),
    "permute": lambda x, *d: ops.transpose(x, perm=_dims(d)), "transpose": _transpose,
    "contiguous": _identity, "size": _size, "dim": lambda x: x.ndim, "flatten": _flatten,
    "unsqueeze": lambda x, dim: ops.unsqueeze(x, [_axis(dim, x.ndim + 1)]), "squeeze": _squeeze,
    "mean": _reduce(ops.reduce_mean), "sum": _reduce(ops.reduce_sum), "softmax": _softmax(ops.softmax),
    "chunk": _chunk, "split": _split, "expand": _expand, "relu": ops.relu, "sigmoid": ops.sigmoid,
    "tanh": ops.tanh, "exp": ops.exp, "pow": operator.pow, "float": lambda x: _cast(x, torch.float32),
    "to": _to, "type_as": lambda x, other: ops.cast(x, other.dtype), "masked_fill": _masked_fill,
    "add": _binary(operator.add), "mul": operator.mul, "sub": _binary(operator.sub),
    "div": operator.truediv, "matmul": numpy_matmul, "t": lambda x: ops.transpose(x), "clamp": _clamp,
    "abs": ops.abs, "neg": ops.neg, "sqrt": ops.sqrt, "rsqrt": ops.rsqrt, "log": ops.log,
}
