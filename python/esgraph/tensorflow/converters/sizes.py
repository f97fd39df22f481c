"""TF's shape arithmetic on symbolic sizes (esgraph/_sizes.py): what Keras's Flatten and
Reshape layers compute a dynamic batch's shape operand with, on `Sizes` inputs
(Shape -> StridedSlice -> Pack -> Reshape)."""
import numpy as np

from ... import _C
from ..._sizes import ELEMENTWISE, as_entries, kept_dtype, made
from .. import _tensors
from .registry import NeedsShape, converts
from .slices import slice_spec

# Ops on sizes: each takes the Node, with at least one input a Sizes and the others arrays.
SIZES_CONVERTERS = {}


def _on_sizes(*ops):
    return converts(*ops, table=SIZES_CONVERTERS)


def _entries(n, i):
    return as_entries(n.value(i))


@_on_sizes("StridedSlice")
def _strided_slice(n):
    data = _entries(n, 0)
    index = slice_spec(n, data.ndim)
    return made(data[index], kept_dtype(n))


@_on_sizes("Pack")
def _pack(n):
    axis = n.attr("axis", 0)
    return made(np.stack([_entries(n, i) for i in range(n.num_inputs)], axis=axis), kept_dtype(n))


@_on_sizes("ConcatV2")
def _concat(n):
    (axis,) = n.ints(n.num_inputs - 1, "axis")
    return made(np.concatenate([_entries(n, i) for i in range(n.num_inputs - 1)], axis=axis), kept_dtype(n))


@_on_sizes("GatherV2")
def _gather(n):
    (axis,) = n.ints(2, "axis")
    return made(np.take(_entries(n, 0), n.const(1, "indices").astype(np.int64), axis=axis), kept_dtype(n))


@_on_sizes("Cast")
def _cast(n):
    to = _tensors.esg_dtype(n.attr("DstT"))
    if to not in (_C.i64, _C.i32):
        raise NeedsShape(f"sizes cast to {to.name}: known only at run time")
    return made(_entries(n, 0), _tensors.numpy_dtype(n.attr("DstT")))


@_on_sizes("Mul", "AddV2", "Add", "Sub")
def _arithmetic(n):
    op = {"AddV2": "Add"}.get(n.op, n.op)
    return made(ELEMENTWISE[op](_entries(n, 0), _entries(n, 1)), kept_dtype(n))


@_on_sizes("Prod")
def _prod(n):
    total = _entries(n, 0)
    keep = bool(n.attr("keep_dims", False))
    for axis in sorted({a % total.ndim for a in n.ints(1, "axes")}, reverse=True) if total.ndim else []:
        total = ELEMENTWISE["Mul"].reduce(total, axis=axis, keepdims=keep)
    return made(total, kept_dtype(n))
