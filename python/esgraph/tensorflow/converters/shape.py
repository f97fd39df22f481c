"""Ops that move, select or reshape elements. Those that read the order of axes take TF's
layout; a transpose, a concatenation or a pad of an NCHW value stays in NCHW order."""
import math

import numpy as np

from ... import _C
from ..._compose import tiled
from ..._folding import reserve
from ..._sizes import Sizes, element_count, reshape_dims, shape_of
from .. import _tensors
from .._layout import NHWC_TO_NCHW, TO_NCHW_AXIS, Nchw
from .elementwise import operands
from .registry import NeedsValue, Unsupported, converts
from .slices import slice_spec

ops = _C.ops

# A slice end past any axis (ONNX-style clamping), and before the start of one for a step < 0.
_END, _BEFORE = 2**62, -(2**62)


def _static_shape(n, i, what):
    shape = n.shape(i)
    if any(not isinstance(d, int) for d in shape):
        raise NeedsValue(f"{what} of a tensor with symbolic dimensions {shape}")
    return list(shape)


@converts("Reshape")
def reshape(n):
    sizes = n.sizes(1, "shape")
    if 0 in sizes:  # TF's 0 is an empty axis; esgraph's would copy the input's size
        raise Unsupported(f"a reshape to an empty shape {sizes}")
    # A size that is the input's own symbolic dimension is esgraph's 0 (copied), one left unknown its -1.
    return ops.reshape(n.x(0), reshape_dims(n.shape(0), sizes, allowzero=False))


@converts("Squeeze")
def squeeze(n):
    axes = n.attr("squeeze_dims", []) or [a for a, d in enumerate(_static_shape(n, 0, "Squeeze of every unit axis")) if d == 1]
    return ops.squeeze(n.x(0), axes=[a % n.rank(0) for a in axes])


@converts("ExpandDims")
def expand_dims(n):
    (axis,) = n.ints(1, "axis")
    return ops.unsqueeze(n.x(0), [axis % (n.rank(0) + 1)])


@converts("Transpose")
def transpose(n):
    perm = [p % max(n.rank(0), 1) for p in n.ints(1, "perm")]
    if n.is_nchw(0):  # composed with the NCHW order: NHWC -> NCHW itself is no transpose at all
        perm = [TO_NCHW_AXIS[p] for p in perm]
        return n.nchw(0) if perm == [0, 1, 2, 3] else ops.transpose(n.nchw(0), perm=perm)
    return ops.transpose(n.x(0), perm=perm)


@converts("ConcatV2", "Concat")
def concat(n):
    if n.op == "Concat":  # v1: the axis first
        (axis,), values = n.ints(0, "axis"), list(range(1, n.num_inputs))
    else:
        (axis,), values = n.ints(n.num_inputs - 1, "axis"), list(range(n.num_inputs - 1))
    rank = n.rank(values[0])
    xs, wrap = operands(n, values) if rank == 4 else ([n.x(i) for i in values], lambda y: y)
    axis %= rank
    return wrap(ops.concat(xs, TO_NCHW_AXIS[axis] if wrap is Nchw else axis))


@converts("Pack")
def pack(n):
    axis = n.attr("axis", 0) % (n.rank(0) + 1)
    return ops.concat([ops.unsqueeze(n.x(i), [axis]) for i in range(n.num_inputs)], axis)


@converts("Unpack")
def unpack(n):
    axis = n.attr("axis", 0) % n.rank(0)
    count = n.attr("num")
    pieces = ops.split(n.x(0), [1] * count, axis=axis) if count > 1 else [n.x(0)]
    return [ops.squeeze(p, axes=[axis]) for p in pieces]


@converts("Shape", "Size", "Rank")
def shape(n):
    """Known sizes, or symbolic ones (esgraph/_sizes.py) that shape operands resolve."""
    dims = list(n.shape(0))
    if n.op == "Rank":
        return np.array(len(dims), np.int32)
    dtype = _tensors.numpy_dtype(n.attr("out_type", 3))
    if n.op == "Shape":
        sizes = shape_of(dims, dtype)
        if isinstance(sizes, Sizes):
            sizes.shape_of = n.value(0)
        return sizes
    count = element_count(dims)
    return count.astype(dtype) if isinstance(count, np.ndarray) else Sizes(count.values, dtype)


@converts("Fill")
def fill(n):
    dims = n.value(0)
    if isinstance(dims, Sizes) and dims.shape_of is not None:  # the shape of a tensor with symbolic sizes
        return filled_like(n, dims.shape_of, n.const(1, "value"))
    dims = n.ints(0, "dims")
    return ops.expand(ops.reshape(n.x(1), [1] * len(dims)) if dims else n.x(1), dims)


@converts("ZerosLike", "OnesLike")
def zeros_like(n):
    dtype = _tensors.numpy_dtype(n.attr("T", 1))
    return filled_like(n, n.value(0), np.array(0 if n.op == "ZerosLike" else 1, dtype))


def filled_like(n, like, value):
    """`value` (an array of one element) spread over the shape of `like` (a tensor, or an NCHW
    one) without reading its values: where(x != x, v, v) is v wherever x is, NaN or not."""
    x = like.tensor if isinstance(like, Nchw) else n.tensor(like)
    v = n.tensor(value.reshape(()))
    y = ops.where(ops.not_equal(x, x), v, v)
    return Nchw(y) if isinstance(like, Nchw) else y


@converts("StridedSlice")
def strided_slice(n):
    rank = n.rank(0)
    starts, ends, steps, axes, shrink, new = [], [], [], [], [], []
    axis = 0
    for item in slice_spec(n, rank):
        if item is None:  # a new axis, at this place of the result
            new.append(axis - len(shrink) + len(new))
            continue
        if isinstance(item, int):  # one element, the axis dropped
            starts.append(item)
            ends.append(item + 1 if item != -1 else _END)
            steps.append(1)
            axes.append(axis)
            shrink.append(axis)
        elif item != slice(None):
            step = 1 if item.step is None else item.step
            starts.append(item.start if item.start is not None else 0 if step > 0 else _END)
            ends.append(item.stop if item.stop is not None else _END if step > 0 else _BEFORE)
            steps.append(step)
            axes.append(axis)
        axis += 1
    y = ops.slice(n.x(0), starts, ends, axes=axes, steps=steps) if axes else n.x(0)
    if shrink:
        y = ops.squeeze(y, axes=shrink)
    return ops.unsqueeze(y, new) if new else y


@converts("Slice")
def slice_(n):
    begin, size = n.ints(1, "begin"), n.ints(2, "size")
    ends = [b + s if s != -1 else _END for b, s in zip(begin, size)]
    return ops.slice(n.x(0), begin, ends, axes=list(range(len(begin))))


@converts("GatherV2", "Gather")
def gather(n):
    if n.attr("batch_dims", 0):
        raise Unsupported(f"batch_dims {n.attr('batch_dims')}")
    (axis,) = n.ints(2, "axis") if n.op == "GatherV2" else (0,)
    return ops.gather(n.x(0), n.x(1), axis=axis % n.rank(0))


@converts("Pad", "PadV2", "MirrorPad")
def pad(n):
    paddings = n.const(1, "paddings").astype(np.int64).reshape(-1, 2)
    mode = {"REFLECT": "reflect"}.get(n.attr("mode"), "constant") if n.op == "MirrorPad" else "constant"
    if n.op == "MirrorPad" and n.attr("mode") != "REFLECT":
        raise Unsupported(f"MirrorPad mode {n.attr('mode')}")
    value = float(n.const(2, "constant_values").reshape(-1)[0]) if n.op == "PadV2" else 0.0
    if n.is_nchw(0):
        rows = paddings[NHWC_TO_NCHW]
        return Nchw(ops.pad(n.nchw(0), [int(v) for v in rows[:, 0]] + [int(v) for v in rows[:, 1]], mode=mode, value=value))
    return ops.pad(n.x(0), [int(v) for v in paddings[:, 0]] + [int(v) for v in paddings[:, 1]], mode=mode, value=value)


@converts("Split")
def split(n):
    (axis,) = n.ints(0, "split_dim")
    axis %= n.rank(1)
    count = n.attr("num_split")
    size = n.shape(1)[axis]
    if not isinstance(size, int) or size % count:
        raise Unsupported(f"Split of an axis of {size} into {count}")
    return ops.split(n.x(1), [size // count] * count, axis=axis)


@converts("SplitV")
def split_v(n):
    sizes = n.ints(1, "size_splits")
    (axis,) = n.ints(2, "axis")
    axis %= n.rank(0)
    if -1 in sizes:
        total = n.shape(0)[axis]
        if not isinstance(total, int):
            raise NeedsValue(f"SplitV's -1 over a symbolic axis {total}")
        sizes[sizes.index(-1)] = total - (sum(sizes) + 1)
    return ops.split(n.x(0), sizes, axis=axis)


@converts("Range")
def range_(n):
    start, limit, delta = (n.const(i, what).item() for i, what in ((0, "start"), (1, "limit"), (2, "delta")))
    if delta == 0:
        raise Unsupported("a Range of step 0")
    dtype = _tensors.numpy_dtype(n.attr("Tidx", 3))
    reserve([max(math.ceil((limit - start) / delta), 0)], dtype.itemsize, "Range's values", kept=dtype.itemsize)
    return np.arange(start, limit, delta, dtype=dtype)


@converts("Tile")
def tile(n):
    try:
        return tiled(n.x(0), list(n.shape(0)), n.ints(1, "multiples"))
    except ValueError as e:
        raise Unsupported(str(e)) from None
