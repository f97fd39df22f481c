"""Small compositions of esgraph ops that the importers share."""
import numpy as np

from . import _C
from ._folding import reserve
from ._frontend import NeedsShape

ops = _C.ops


def numpy_matmul(a, b):
    """matmul with numpy's (and ONNX's, and PyTorch's) 1-D rules: a vector operand gets a unit
    axis for the product (in front of `a`, after `b`), removed from the result."""
    squeeze = []
    if b.ndim == 1:
        b, squeeze = ops.unsqueeze(b, [1]), [-1]
    if a.ndim == 1:
        a, squeeze = ops.unsqueeze(a, [0]), [-2] + squeeze
    y = ops.matmul(a, b)
    return ops.squeeze(y, axes=[y.ndim + s for s in squeeze]) if squeeze else y


def same_pads(sizes, kernel, strides, dilations):
    """The padding that keeps ceil(size / stride) outputs per spatial axis (TF's SAME, ONNX's
    SAME_UPPER), as (begins, ends): the smaller half before, the odd element after."""
    begins, ends = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
        begins.append(total // 2)
        ends.append(total - total // 2)
    return begins, ends


def avg_pool_counting_padding(x, kernel, strides, pads, ceil_mode):
    """Average pooling whose divisor counts the zero padding (ONNX count_include_pad=1,
    PyTorch's default); esgraph's avg_pool2d averages over the elements inside the input.
    Padding first is exact without ceil_mode; with it, windows that start in the padding
    would be kept, so that combination is refused."""
    if not any(pads):
        return ops.avg_pool2d(x, kernel, strides=strides, pads=pads, ceil_mode=ceil_mode)
    if ceil_mode:
        raise ValueError("average pooling that counts the padding with ceil_mode is not supported")
    top, left, bottom, right = pads
    padded = ops.pad(x, [0, 0, top, left, 0, 0, bottom, right])
    return ops.avg_pool2d(padded, kernel, strides=strides, pads=[0, 0, 0, 0])


def pad_or_crop(x, pads, mode="constant", value=0.0):
    """ONNX-style pads (all begins, then all ends) where a negative amount crops: pad by the
    positive parts, then slice the negative ones away."""
    y = ops.pad(x, [max(p, 0) for p in pads], mode=mode, value=value) if any(p > 0 for p in pads) else x
    if any(p < 0 for p in pads):
        rank = x.ndim
        axes = [a for a in range(rank) if pads[a] < 0 or pads[rank + a] < 0]
        starts = [-min(pads[a], 0) for a in axes]
        ends = [min(pads[rank + a], 0) or 2**62 for a in axes]
        y = ops.slice(y, starts, ends, axes=axes)
    return y


def _static_dims(t, what):
    if any(not isinstance(d, int) for d in t.shape):
        raise ValueError(f"{what} needs static shapes, got {t.shape}")
    return list(t.shape)


def conv_nd(x, w, bias=None, strides=None, dilations=None, groups=1):
    """Convolution over 2 or 3 spatial axes, unpadded (pad first). 3-D runs as one 2-D
    convolution per kernel depth over the depth slices it reads, summed: the depth axis folds
    into the batch."""
    spatial = x.ndim - 2
    strides, dilations = list(strides or [1] * spatial), list(dilations or [1] * spatial)
    if spatial == 2:
        return ops.conv2d(x, w, bias=bias, strides=strides, dilations=dilations, groups=groups)
    if spatial != 3:
        raise ValueError(f"convolution over {spatial} spatial axes")
    n, c, depth, h, wd = _static_dims(x, "a 3-D convolution")
    o, _, kd, kh, kw = _static_dims(w, "a 3-D convolution")
    out_depth = (depth - (kd - 1) * dilations[0] - 1) // strides[0] + 1
    planes = ops.transpose(x, perm=[0, 2, 1, 3, 4])  # [N, D, C, H, W]
    total = None
    for k in range(kd):
        start = k * dilations[0]
        taken = ops.slice(planes, [start], [start + (out_depth - 1) * strides[0] + 1], axes=[1], steps=[strides[0]])
        kernel = ops.reshape(ops.slice(w, [k], [k + 1], axes=[2]), [o, -1, kh, kw])
        y = ops.conv2d(ops.reshape(taken, [n * out_depth, c, h, wd]), kernel, strides=strides[1:],
                       dilations=dilations[1:], groups=groups)
        total = y if total is None else total + y
    out = ops.transpose(ops.reshape(total, [n, out_depth] + list(total.shape[1:])), perm=[0, 2, 1, 3, 4])
    return out if bias is None else out + ops.reshape(bias, [-1, 1, 1, 1])


def conv_transpose_nd(x, w, bias, strides, dilations, groups, begins, ends, output_padding):
    """A transposed convolution over 2 or 3 spatial axes (w: [C_in, C_out / groups, k...]) as
    the direct one it equals: the input spread out by the strides (zeros between), padded by
    (kernel extent - 1 - pad) on each side (output_padding added at the end), then convolved
    at stride 1 with the kernel flipped and its in/out channels swapped per group."""
    dims = _static_dims(x, "a transposed convolution")
    wdims = _static_dims(w, "a transposed convolution")
    batch, channels, sizes = dims[0], dims[1], dims[2:]
    c_in, c_out_per_group, kernel = wdims[0], wdims[1], wdims[2:]
    spatial = len(sizes)
    if any(s != 1 for s in strides):  # a unit axis after each spatial one, padded to the stride
        spread = ops.reshape(x, [batch, channels] + [v for n in sizes for v in (n, 1)])
        tail = [v for s in strides for v in (0, s - 1)]
        spread = ops.pad(spread, [0] * (2 + 2 * spatial) + [0, 0] + tail)
        x = ops.reshape(spread, [batch, channels] + [n * s for n, s in zip(sizes, strides)])
        x = ops.slice(x, [0] * spatial, [(n - 1) * s + 1 for n, s in zip(sizes, strides)],
                      axes=list(range(2, 2 + spatial)))
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    x = pad_or_crop(x, [0, 0] + [e - 1 - b for e, b in zip(extents, begins)] +
                    [0, 0] + [e - 1 - p + op for e, p, op in zip(extents, ends, output_padding)])
    axes = list(range(2, 2 + spatial))
    flipped = ops.slice(w, [-1] * spatial, [-(2**62)] * spatial, axes=axes, steps=[-1] * spatial)
    per_group = ops.reshape(flipped, [groups, c_in // groups, c_out_per_group] + kernel)
    swapped = ops.reshape(ops.transpose(per_group, perm=[0, 2, 1] + [3 + i for i in range(spatial)]),
                          [groups * c_out_per_group, c_in // groups] + kernel)
    return conv_nd(x, swapped, bias, dilations=list(dilations), groups=groups)


def tiled(x, dims, repeats):
    """x (of `dims`) repeated `repeats` times along each axis (ONNX's Tile, TF's): a unit axis
    interleaved before each axis, broadcast to the repeat count, the pairs merged. Where a size
    is symbolic, the copies along each repeated axis are concatenated instead."""
    if any(not isinstance(d, int) for d in dims):
        if any(r > 4096 for r in repeats):
            raise ValueError(f"a tile of symbolic sizes repeated {max(repeats)} times (at most 4096, as copies)")
        for axis, r in enumerate(repeats):
            x = ops.concat([x] * r, axis) if r != 1 else x
        return x
    spread = ops.reshape(x, [v for d in dims for v in (1, d)])
    expanded = ops.expand(spread, [v for r, d in zip(repeats, dims) for v in (r, d)])
    return ops.reshape(expanded, [r * d for r, d in zip(repeats, dims)])


def wrapped(idx, size):
    """Negative indices count from the end (a tensor, or a numpy array known while importing)."""
    if isinstance(idx, np.ndarray):
        return np.where(idx < 0, idx + size, idx)
    return ops.where(idx < 0, idx + size, idx)


def gather_elements(data, indices, axis):
    """data's elements at `indices` along `axis` (a tensor or a numpy array), elsewhere at the
    index's own position: one gather from the flattened data at computed flat offsets."""
    shape, out = list(data.shape), list(indices.shape)
    if any(not isinstance(d, (int, np.integer)) for d in shape + out):  # a frontend waits for the run's shapes
        raise NeedsShape(f"GatherElements needs static dimensions, got {tuple(shape)} and {tuple(out)}")
    axis = axis % len(shape)
    reserve(out, 8 * (len(out) + 2), "GatherElements' indices", kept=8)
    strides = np.cumprod([1] + shape[::-1])[:-1][::-1].astype(np.int64)
    grids = np.meshgrid(*[np.arange(s, dtype=np.int64) for s in out], indexing="ij") if out else []
    base = sum((g * strides[d] for d, g in enumerate(grids) if d != axis), np.zeros(out, np.int64))
    idx = indices.astype(np.int64) if isinstance(indices, np.ndarray) else ops.cast(indices, _C.i64)
    flat = wrapped(idx, shape[axis]) * int(strides[axis]) + base
    return ops.gather(ops.reshape(data, [-1]), flat)
