"""ONNX's shape arithmetic on symbolic sizes (esgraph/_sizes.py): the ops exporters compute
shape operands with, on `Sizes` inputs."""
import numpy as np

from ... import _C
from ..._sizes import EQUAL, ELEMENTWISE, as_entries, kept_dtype, made
from .. import _dtypes
from .registry import NeedsShape, converts


# Ops on sizes: each takes the Node, with at least one input a Sizes, and the others arrays.
SIZES_CONVERTERS = {}


def _on_sizes(*op_types):
    return converts(*op_types, table=SIZES_CONVERTERS)


@_on_sizes("Identity")
def _identity(n):
    return n.value(0)


@_on_sizes("Shape")
def _shape(n):
    return np.array(n.shape(0), dtype=np.int64)[slice(n.attr("start", 0), n.attr("end", len(n.shape(0))))]


@_on_sizes("Cast")
def _cast(n):
    to = _dtypes.esg_dtype(n.attr("to"))
    if to not in (_C.i64, _C.i32):
        raise NeedsShape(f"sizes cast to {to.name}: known only at run time")
    return made(as_entries(n.value(0)), _dtypes.numpy_dtype(to))


@_on_sizes("Gather")
def _gather(n):
    data = as_entries(n.value(0))
    return made(np.take(data, np.asarray(n.const(1, "indices")).astype(np.int64), axis=n.attr("axis", 0)), kept_dtype(n))


@_on_sizes("Unsqueeze", "Squeeze")
def _unsqueeze(n):
    data = as_entries(n.value(0))
    axes = n.ints(1, "axes") if n.opset >= 13 and n.has(1) else list(n.attr("axes", []))
    if n.op_type == "Squeeze":
        return made(np.squeeze(data, axis=tuple(axes) if axes else None), kept_dtype(n))
    return made(np.expand_dims(data, tuple(axes)), kept_dtype(n))


@_on_sizes("Concat")
def _concat(n):
    return made(np.concatenate([as_entries(n.value(i)) for i in range(n.num_inputs) if n.has(i)], axis=n.attr("axis")), kept_dtype(n))


@_on_sizes("Slice")
def _slice(n):
    data = as_entries(n.value(0))
    if n.opset < 10:  # attributes then
        starts, ends = list(n.attr("starts")), list(n.attr("ends"))
        axes, steps = list(n.attr("axes", range(len(starts)))), [1] * len(starts)
    else:
        starts, ends = n.ints(1, "starts"), n.ints(2, "ends")
        axes = n.ints(3, "axes") if n.has(3) else list(range(len(starts)))
        steps = n.ints(4, "steps") if n.has(4) else [1] * len(starts)
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        index[axis] = slice(start, end, step)
    return made(data[tuple(index)], kept_dtype(n))


@_on_sizes("Reshape")
def _reshape(n):
    shape = n.ints(1, "shape") if n.opset >= 5 else list(n.attr("shape"))
    return made(as_entries(n.value(0)).reshape(shape), kept_dtype(n))


@_on_sizes("Mul", "Add", "Sub", "Div")
def _arithmetic(n):
    return made(ELEMENTWISE[n.op_type](as_entries(n.value(0)), as_entries(n.value(1))), kept_dtype(n))


@_on_sizes("Equal")
def _equal_op(n):
    return EQUAL(as_entries(n.value(0)), as_entries(n.value(1))).astype(bool)


@_on_sizes("Where")
def _where(n):
    condition = np.asarray(n.const(0, "condition")).astype(bool)
    return made(np.where(condition, as_entries(n.value(1)), as_entries(n.value(2))), kept_dtype(n))


