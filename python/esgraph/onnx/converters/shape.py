"""Shape manipulation, indexing and the ops that produce constants. ONNX passes shapes, axes
and sizes as tensors; here they must be known while importing (see Node.const)."""
import math

import numpy as np

from ... import _C
from ..._compose import pad_or_crop, tiled
from .. import _dtypes
from .nn import _static
from .registry import Unsupported, check_attrs, converts, reserve
from ..._sizes import element_count, expand_size, reshape_dims, shape_of, slice_end

ops = _C.ops


@converts("Constant")
def constant(n):
    (name, value), = n.attrs.items()
    if name == "sparse_value":
        raise Unsupported("sparse constants are not supported")
    if name in ("value_string", "value_strings"):
        raise Unsupported("string constants are not supported")
    dtypes = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64, "value_ints": np.int64}
    return np.asarray(value, dtype=dtypes.get(name))


@converts("Shape")
def shape(n):
    dims = n.shape(0)
    rank = len(dims)
    start, end = n.attr("start", 0), n.attr("end", rank)
    return shape_of(dims[slice(start, end)])  # symbolic dimensions give Sizes (sizes.py)


@converts("Size")
def size(n):
    return element_count(n.shape(0))  # of symbolic dimensions, Sizes (sizes.py)


def _beyond_double(value):
    """An integer a double does not hold exactly (beyond 2**53), which fill's and pad's double
    attributes would change."""
    v = value.item() if isinstance(value, np.ndarray) else value
    return isinstance(v, (int, np.integer)) and abs(int(v)) > 2**53


def _exact_float(value, what):
    if _beyond_double(value):
        raise Unsupported(f"{what} {value} is beyond the integers a double holds exactly")
    return float(value.item() if isinstance(value, np.ndarray) else value)


@converts("ConstantOfShape")
def constant_of_shape(n):
    value = n.attr("value", np.zeros(1, np.float32)).reshape(-1)[:1]
    dims = n.ints(0, "shape")
    if _beyond_double(value[0]):  # made here, exactly (fill's value is a double)
        reserve(dims, value.itemsize, "ConstantOfShape's tensor", kept=value.itemsize)
        return np.full(dims, value[0], value.dtype)
    return ops.fill(dims, value=float(value[0]), dtype=_dtypes.from_numpy(value.dtype))


@converts("Range")
def range_(n):
    check_attrs(n, ("stash_type",))
    # Opset 27's stash_type picks what f16 and bf16 ranges count in: f32 (1, the default) is what
    # range does (in doubles, each value rounded once); their own type (0) is not.
    if n.attr("stash_type", 1) != 1 and n.dtype(0) in (_C.f16, _C.bf16):
        raise Unsupported(f"stash_type {n.attr('stash_type')}: counting in {n.dtype(0).name} itself")
    values = [np.asarray(n.const(i, name)).reshape(-1)[0] for i, name in ((0, "start"), (1, "limit"), (2, "delta"))]
    if all(np.issubdtype(v.dtype, np.integer) for v in values):  # counted exactly (range's doubles stop at 2**53)
        start, limit, delta = (int(v) for v in values)
        return ops.integer_range(limit, start=start, step=delta, dtype=n.dtype(0))
    start, limit, delta = (_exact_float(v, name) for v, name in zip(values, ("start", "limit", "delta")))
    return ops.range(limit, start=start, step=delta, dtype=n.dtype(0))


@converts("EyeLike")
def eye_like(n):
    rows, cols = _static(n.shape(0), "EyeLike")
    dtype = _dtypes.esg_dtype(n.attr("dtype")) if "dtype" in n.attrs else n.dtype(0)
    itemsize = _dtypes.numpy_dtype(dtype).itemsize
    reserve([rows, cols], itemsize, "EyeLike's matrix", kept=itemsize)
    return np.eye(rows, cols, k=n.attr("k", 0), dtype=_dtypes.numpy_dtype(dtype))


@converts("Reshape")
def reshape(n):
    check_attrs(n, ("allowzero", "shape"))
    x = n.x(0)
    dims = reshape_dims(x.shape, n.sizes(1, "shape"), n.attr("allowzero", 0)) if n.opset >= 5 else list(n.attr("shape"))
    if n.attr("allowzero", 0) and 0 in dims:
        # A literal zero-size axis: only an empty input fits, and an empty tensor holds no data.
        if -1 in dims:
            raise Unsupported("allowzero=1 with both a zero and a -1 in the shape")
        if math.prod(_static(x.shape, "Reshape with allowzero")) != 0:
            raise Unsupported(f"allowzero=1: a shape with a zero axis {dims} for a non-empty input")
        return ops.fill(dims, dtype=x.dtype)
    return ops.reshape(x, dims)


@converts("Flatten")
def flatten(n):
    x = n.x(0)
    axis = n.attr("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    lead, trail = x.shape[:axis], x.shape[axis:]
    if all(isinstance(d, int) for d in trail):
        return ops.reshape(x, [-1, math.prod(trail)])
    return ops.reshape(x, [math.prod(_static(lead, "Flatten")), -1])


@converts("Transpose")
def transpose(n):
    return ops.transpose(n.x(0), perm=n.attr("perm", list(reversed(range(n.rank(0))))))


@converts("Concat")
def concat(n):
    return ops.concat([n.x(i) for i in range(n.num_inputs) if n.has(i)], n.attr("axis"))


@converts("Split")
def split(n):
    x, axis = n.x(0), n.attr("axis", 0)
    if n.has(1):
        sizes = n.ints(1, "split")
    elif "split" in n.attrs:
        sizes = list(n.attr("split"))
    else:
        length = _static([x.shape[axis]], "Split into equal parts")[0]
        parts = n.attr("num_outputs", n.num_outputs)
        chunk = -(-length // parts)  # the last part may be smaller (opset 18)
        sizes = [min(chunk, length - i * chunk) for i in range(parts)]
    return ops.split(x, sizes, axis=axis)


@converts("Slice")
def slice_(n):
    if n.opset < 10:
        starts, ends = n.attr("starts"), n.attr("ends")
        axes = n.attr("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = n.ints(1, "starts"), n.sizes(2, "ends")
        axes = n.ints(3, "axes") if n.has(3) else list(range(len(starts)))
        steps = n.ints(4, "steps") if n.has(4) else [1] * len(starts)
        x = n.x(0)
        ends = [slice_end(end, x.shape[axis]) for end, axis in zip(ends, axes)]
    return ops.slice(n.x(0), list(starts), list(ends), axes=list(axes), steps=list(steps))


@converts("Gather")
def gather(n):
    return ops.gather(n.x(0), n.x(1), axis=n.attr("axis", 0))


@converts("Expand")
def expand(n):
    # ONNX broadcasts both ways: the result has the larger of each pair of dimensions.
    # A size that is x's own (symbolic) dimension there keeps it, as a 1 would.
    x, dims = n.x(0), n.sizes(1, "shape")
    rank = max(x.ndim, len(dims))
    have = [1] * (rank - x.ndim) + list(x.shape)
    want = [1] * (rank - len(dims)) + [expand_size(w, h) for w, h in zip(dims, have[rank - len(dims):])]
    out = [h if w == 1 else w for h, w in zip(have, want)]
    if all(isinstance(d, int) for d in out):
        return ops.expand(x, out)
    # x's own symbolic sizes kept: broadcast against ones sized as the static rest (a product
    # with 1, or an `and` with true: every value kept exactly, -0 and NaN included).
    lifted = ops.unsqueeze(x, axes=list(range(rank - x.ndim))) if rank > x.ndim else x
    if out == have:
        return lifted  # x as it is
    ones = _C.constant(np.ones([d if isinstance(d, int) else 1 for d in out], bool))
    return ops.logical_and(lifted, ones) if x.dtype == _C.bool else ops.mul(lifted, ops.cast(ones, x.dtype))


def _axes_operand(n):
    return n.ints(1, "axes") if n.opset >= 13 and n.has(1) else list(n.attr("axes", []))


@converts("Squeeze")
def squeeze(n):
    return ops.squeeze(n.x(0), axes=_axes_operand(n))


@converts("Unsqueeze")
def unsqueeze(n):
    return ops.unsqueeze(n.x(0), _axes_operand(n))


@converts("Pad")
def pad(n):
    check_attrs(n, ("mode", "pads", "value"))
    x = n.x(0)
    if n.opset < 11:
        pads, value = list(n.attr("pads")), n.attr("value", 0.0)
    else:
        pads = n.ints(1, "pads")
        value = np.asarray(n.const(2, "constant_value")).reshape(-1)[0] if n.has(2) else 0.0
        if n.has(3):  # opset 18: pads for the listed axes only
            axes = [a % x.ndim for a in n.ints(3, "axes")]
            full = [0] * (2 * x.ndim)
            for i, a in enumerate(axes):
                full[a], full[x.ndim + a] = pads[i], pads[len(axes) + i]
            pads = full
    mode = n.attr("mode", "constant")
    if mode == "wrap":  # opset 19: each axis continued from its other end, one gather per axis
        dims = _static(x.shape, "Pad wrap")
        for a, size in enumerate(dims):
            begin, end = pads[a], pads[x.ndim + a]
            if begin or end:
                if size == 0 or size + begin + end < 0:
                    raise Unsupported(f"wrap pads {begin}, {end} of an axis of {size}")
                x = ops.gather(x, n.tensor(np.arange(-begin, size + end, dtype=np.int64) % size), axis=a)
        return x
    if mode not in ("constant", "reflect", "edge"):
        raise Unsupported(f"mode={mode}")
    if mode == "constant" and _beyond_double(value):
        # pad's value is a double: pad with 0, and put the exact integer where the padding is
        inside = pad_or_crop(ops.cast(ops.equal(x, x), _C.u8), pads, mode=mode, value=0.0)
        return ops.where(ops.cast(inside, _C.bool), pad_or_crop(x, pads, mode=mode, value=0.0), n.tensor(np.asarray(value)))
    return pad_or_crop(x, pads, mode=mode, value=float(value))


@converts("Tile")
def tile(n):
    x = n.x(0)
    return tiled(x, _static(x.shape, "Tile"), n.ints(1, "repeats"))


def _blocks(n):
    b = n.attr("blocksize")
    dims = _static(n.shape(0), n.op_type)
    if len(dims) != 4:
        raise Unsupported(f"{n.op_type} takes a 4-D input")
    return n.x(0), b, dims


@converts("DepthToSpace")
def depth_to_space(n):
    x, b, (N, C, H, W) = _blocks(n)
    c = C // (b * b)
    if n.attr("mode", "DCR") == "DCR":
        y = ops.transpose(ops.reshape(x, [N, b, b, c, H, W]), perm=[0, 3, 4, 1, 5, 2])
    else:
        y = ops.transpose(ops.reshape(x, [N, c, b, b, H, W]), perm=[0, 1, 4, 2, 5, 3])
    return ops.reshape(y, [N, c, H * b, W * b])


@converts("SpaceToDepth")
def space_to_depth(n):
    x, b, (N, C, H, W) = _blocks(n)
    mode = n.attr("mode", "DCR")  # opset 28; before it, always DCR
    if mode not in ("DCR", "CRD"):
        raise Unsupported(f"mode={mode}")
    perm = [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4]
    y = ops.transpose(ops.reshape(x, [N, C, H // b, b, W // b, b]), perm=perm)
    return ops.reshape(y, [N, C * b * b, H // b, W // b])


@converts("Trilu")
def trilu(n):
    x = n.x(0)
    rows, cols = _static(x.shape[-2:], "Trilu")
    k = int(n.const(1, "k")) if n.has(1) else 0
    reserve([rows, cols], 1, "Trilu's mask", kept=1)
    keep = (np.triu if n.attr("upper", 1) else np.tril)(np.ones((rows, cols), dtype=bool), k)
    return ops.where(keep, x, 0)


@converts("CenterCropPad")
def center_crop_pad(n):
    """Each named axis cut to its target around its centre (the window's start rounded down) or
    padded with zeros to it (the odd pixel on the right)."""
    check_attrs(n, ("axes",))
    x = n.x(0)
    dims = _static(x.shape, "CenterCropPad")
    target = n.ints(1, "shape")
    axes = [a % x.ndim for a in n.attr("axes", list(range(x.ndim)))]
    if len(axes) != len(target):
        raise Unsupported(f"shape {target} for axes {axes}")
    pads = [0] * (2 * x.ndim)
    for a, want in zip(axes, target):
        grow = want - dims[a]
        begin = grow // 2 if grow >= 0 else -((-grow) // 2)
        pads[a], pads[x.ndim + a] = begin, grow - begin
    return pad_or_crop(x, pads)


@converts("TensorScatter")
def tensor_scatter(n):
    """The update written into the cache along `axis` from each batch's write index (0 when
    none is given; wrapped around the cache in circular mode): one scatter_elements, its
    indices the write index plus the position within the update."""
    check_attrs(n, ("axis", "mode"))
    cache, update = n.x(0), n.x(1)
    rank, axis, mode = cache.ndim, n.attr("axis", -2) % cache.ndim, n.attr("mode", "linear")
    if mode not in ("linear", "circular") or axis == 0:
        raise Unsupported(f"mode {mode!r} on axis {axis} (linear or circular, not the batch axis)")
    shape = _static(update.shape, "TensorScatter")
    length = _static([cache.shape[axis]], "TensorScatter")[0]
    along = n.tensor(np.arange(shape[axis], dtype=np.int64).reshape([-1 if d == axis else 1 for d in range(rank)]))
    start = ops.reshape(ops.cast(n.x(2), _C.i64), [-1] + [1] * (rank - 1)) if n.has(2) else None
    index = along if start is None else along + start
    if mode == "circular":
        index = index - (index / length) * length  # the indices are not negative: division truncates
    index = ops.expand(index, shape)
    return ops.scatter_elements(cache, index, update, axis=axis)
