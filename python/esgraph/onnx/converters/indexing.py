"""Indexing ops written over esgraph's gather, where, matmul and reductions, with the index
arithmetic (grids, strides) as constants from the static shapes."""
import numpy as np

from ... import _C
from ..._compose import gather_elements, numpy_matmul, wrapped
from .. import _dtypes
from .nn import _static
from .registry import Unsupported, check_attrs, converts, reserve

ops = _C.ops


@converts("OneHot")
def one_hot(n):
    indices, depth = n.x(0), int(np.asarray(n.const(1, "depth")).reshape(-1)[0])
    values = n.x(2)
    off, on = ops.split(ops.reshape(values, [2]), [1, 1])
    rank = indices.ndim
    axis = n.attr("axis", -1)
    axis = axis + rank + 1 if axis < 0 else axis
    idx = ops.cast(indices, _C.i64)  # ONNX allows float indices: truncated
    reserve([depth], 8, "OneHot's positions", kept=8)
    positions = np.arange(depth, dtype=np.int64).reshape([depth] + [1] * (rank - axis))
    hot = ops.equal(ops.unsqueeze(wrapped(idx, depth), [axis]), positions)
    return ops.where(hot, ops.reshape(on, []), ops.reshape(off, []))


@converts("Hardmax")
def hardmax(n):
    x = n.x(0)
    axis = n.attr("axis", -1 if n.opset >= 13 else 1)
    if n.opset < 13 and axis % x.ndim != x.ndim - 1:
        raise Unsupported("Hardmax before opset 13 on an axis other than the last")
    axis = axis % x.ndim
    top = ops.argmax(x, axis=axis, keepdims=True)
    positions = np.arange(x.shape[axis], dtype=np.int64).reshape([-1] + [1] * (x.ndim - 1 - axis))
    return ops.cast(ops.equal(top, positions), x.dtype)


@converts("CumSum")
def cumsum(n):
    # A product with a triangular 0/1 matrix along the axis, moved last and back.
    x = n.x(0)
    axis = int(np.asarray(n.const(1, "axis")).reshape(-1)[0]) % x.ndim
    length = _static([x.shape[axis]], "CumSum")[0]
    itemsize = np.dtype(x.dtype.numpy).itemsize
    reserve([length, length], 2 * 8 + 1 + itemsize, "CumSum's triangular matrix", kept=itemsize)
    i, j = np.meshgrid(np.arange(length), np.arange(length), indexing="ij")
    exclusive, reverse = n.attr("exclusive", 0), n.attr("reverse", 0)
    keep = (i > j if exclusive else i >= j) if reverse else (i < j if exclusive else i <= j)
    perm = [d for d in range(x.ndim) if d != axis] + [axis]
    inverse = list(np.argsort(perm))
    moved = ops.transpose(x, perm=perm) if axis != x.ndim - 1 else x
    y = numpy_matmul(moved, keep.astype(_dtypes.numpy_dtype(x.dtype)))
    return ops.transpose(y, perm=inverse) if axis != x.ndim - 1 else y


@converts("CumProd")
def cumprod(n):
    """Products of prefixes by doubling: after the step of shift s every position holds the
    product of the 2s values ending there (ones before the start), so ceil(log2(length)) steps
    of one multiply each. Exclusive shifts the values by one first; reverse runs along the
    axis reversed."""
    check_attrs(n, ("exclusive", "reverse"))
    x = n.x(0)
    axis = int(np.asarray(n.const(1, "axis")).reshape(-1)[0]) % x.ndim
    length = _static([x.shape[axis]], "CumProd")[0]
    one = np.ones([1 if d == axis else size for d, size in enumerate(_static(x.shape, "CumProd"))],
                  _dtypes.numpy_dtype(x.dtype))

    def shifted(t, s):  # t moved s places along the axis, ones coming in
        ones = n.tensor(np.repeat(one, min(s, length), axis=axis))
        if s >= length:
            return ones
        return ops.concat([ones, ops.slice(t, [0], [length - s], axes=[axis])], axis)

    def flipped(t):
        return ops.slice(t, [-1], [-length - 1], axes=[axis], steps=[-1])

    y = flipped(x) if n.attr("reverse", 0) else x
    if n.attr("exclusive", 0):
        y = shifted(y, 1)
    s = 1
    while s < length:
        y = y * shifted(y, s)
        s *= 2
    return flipped(y) if n.attr("reverse", 0) else y


@converts("GatherElements")
def gather_elements_node(n):
    return gather_elements(n.x(0), n.x(1), n.attr("axis", 0))


@converts("GatherND")
def gather_nd(n):
    # The leading batch_dims axes are one flattened batch axis; within an entry, the last index
    # axis addresses the next k data axes. One gather from the data flattened to
    # [batch * prod(addressed axes), rest...] at batch * prod + sum(index * stride).
    data, indices = n.x(0), n.x(1)
    shape = _static(data.shape, "GatherND")
    index_shape = _static(indices.shape, "GatherND")
    b = n.attr("batch_dims", 0)
    k = index_shape[-1]
    batch, lead, rest = int(np.prod(shape[:b])), shape[b:b + k], shape[b + k:]
    strides = np.cumprod([1] + lead[::-1])[:-1][::-1].astype(np.int64)
    idx = wrapped(ops.cast(indices, _C.i64), np.array(lead, np.int64))
    flat = ops.reduce_sum(idx * strides, axes=[-1])
    if b:
        entries = index_shape[:-1]
        batch_index = np.arange(batch, dtype=np.int64).reshape(shape[:b] + [1] * (len(entries) - b))
        flat = flat + batch_index * int(np.prod(lead))
    table = ops.reshape(data, [batch * int(np.prod(lead))] + rest)
    return ops.gather(table, flat, axis=0)


@converts("Compress")
def compress(n):
    # A known condition picks constant indices; one computed at run time picks them with nonzero,
    # whose count the run finds (the graph runs in stages around it).
    if n.known(1):
        keep = np.flatnonzero(np.asarray(n.value(1)).reshape(-1)).astype(np.int64)
    else:
        keep = ops.squeeze(ops.nonzero(ops.reshape(n.x(1), [-1])), axes=[0])
    x, axis = n.x(0), n.attr("axis")
    if axis is None:
        return ops.gather(ops.reshape(x, [-1]), keep)
    return ops.gather(x, keep, axis=axis)


@converts("NonZero")
def nonzero(n):
    return ops.nonzero(n.x(0))


@converts("Unique")
def unique(n):
    check_attrs(n, ("axis", "sorted"))
    x, axis = n.x(0), n.attr("axis")
    if axis is None:  # the distinct elements of the flattened tensor
        x, axis = ops.reshape(x, [-1]), 0
    return list(ops.unique(x, axis=axis, sorted=bool(n.attr("sorted", 1))))


@converts("NonMaxSuppression")
def non_max_suppression(n):
    check_attrs(n, ("center_point_box",))

    def scalar(i, what, default):
        return np.asarray(n.const(i, what)).reshape(-1)[0] if n.has(i) else default

    # ONNX Runtime keeps no box for a count of 0 or less.
    max_boxes = max(0, int(scalar(2, "max_output_boxes_per_class", 0)))
    return ops.non_max_suppression(n.x(0), n.x(1), max_boxes, iou_threshold=float(scalar(3, "iou_threshold", 0.0)),
                                   score_threshold=float(scalar(4, "score_threshold", -np.inf)),
                                   center_point_box=bool(n.attr("center_point_box", 0)))


@converts("ReverseSequence")
def reverse_sequence(n):
    # Each batch entry's first lens[b] steps reversed: GatherElements along the time axis with
    # the reversed positions as constant indices.
    x = n.x(0)
    dims = _static(x.shape, "ReverseSequence")
    lens = np.asarray(n.const(1, "sequence_lens")).reshape(-1)
    batch_axis, time_axis = n.attr("batch_axis", 1), n.attr("time_axis", 0)
    reserve(dims, 8 * (len(dims) + 2), "ReverseSequence's indices", kept=8)
    grids = np.meshgrid(*[np.arange(d, dtype=np.int64) for d in dims], indexing="ij")
    t, b = grids[time_axis], grids[batch_axis]
    length = lens[b]
    return gather_elements(x, np.where(t < length, length - 1 - t, t), time_axis)


@converts("TopK")
def top_k(n):
    check_attrs(n, ("axis", "largest", "sorted", "k"))
    k = int(np.asarray(n.const(1, "K")).reshape(-1)[0]) if n.opset >= 10 else n.attr("k")
    return ops.top_k(n.x(0), k, axis=n.attr("axis", -1), largest=bool(n.attr("largest", 1)))


@converts("ScatterElements", "Scatter")
def scatter_elements(n):
    check_attrs(n, ("axis", "reduction"))
    return ops.scatter_elements(n.x(0), n.x(1), n.x(2), axis=n.attr("axis", 0), reduction=n.attr("reduction", "none"))


@converts("ScatterND")
def scatter_nd(n):
    check_attrs(n, ("reduction",))
    return ops.scatter_nd(n.x(0), ops.cast(n.x(1), _C.i64), n.x(2), reduction=n.attr("reduction", "none"))

