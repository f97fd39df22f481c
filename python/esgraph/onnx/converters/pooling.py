"""MaxPool, AveragePool, the global pools and MaxUnpool. 1-D and 2-D windows run on esgraph's
pooling kernels; 3-D windows, dilated windows and MaxPool's Indices output are written as one
strided slice of the (padded) input per window offset, combined elementwise — exact for any
rank, and what a window of a few elements costs anyway; MaxUnpool is a scatter."""
import itertools
import math

import numpy as np

from ... import _C
from ..._compose import avg_pool_counting_padding
from .. import _dtypes
from .nn import _as_2d, _pads, _spatial, _static, onnx_pads
from .registry import Unsupported, check_attrs, converts, reserve

ops = _C.ops


def _out_size(size, begin, end, extent, stride, ceil_mode):
    span = size + begin + end - extent
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + begin:  # a last window starting in the padding is dropped
        out -= 1
    return out


def pool_by_shifts(x, kind, kernel, strides, pads, dilations, ceil_mode, count_include_pad, want_indices,
                   column_major=False):
    """kind "max", "avg" or "sum" over windows of any rank, from strided slices of the padded input;
    with `want_indices`, max also gives each maximum's flat index into the input (its spatial
    part column-major with `column_major`, as ONNX's storage_order=1)."""
    dims = _static(x.shape, "pooling")
    batch, channels, sizes = dims[0], dims[1], dims[2:]
    rank = len(sizes)
    begins, ends = pads[:rank], pads[rank:]
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    outs = [_out_size(*a, ceil_mode) for a in zip(sizes, begins, ends, extents, strides)]
    # Padding so that every window fits: the declared pads, and past them what ceil_mode needs.
    tails = [max(0, (o - 1) * s + e - (n + b)) for o, s, e, n, b in zip(outs, strides, extents, sizes, begins)]
    np_dtype = _dtypes.numpy_dtype(x.dtype)
    lowest = -math.inf if np_dtype.kind == "f" else float(np.iinfo(np_dtype).min)
    fill = lowest if kind == "max" else 0.0
    padded = ops.pad(x, [0, 0] + begins + [0, 0] + tails, value=fill) if any(begins) or any(tails) else x
    positions = [np.arange(o) * s - b for o, s, b in zip(outs, strides, begins)]  # window starts, input coordinates
    floats = np_dtype.kind == "f"
    best = best_index = best_real = total = None
    for offset in itertools.product(*[range(k) for k in kernel]):
        starts = [b + o * d + p[0] for b, o, d, p in zip(begins, offset, dilations, positions)]
        window = ops.slice(padded, starts, [st + (o - 1) * s + 1 for st, o, s in zip(starts, outs, strides)],
                           axes=list(range(2, 2 + rank)), steps=list(strides))
        if kind != "max":
            total = window if total is None else total + window
            continue
        # Which windows hold a real input element at this offset (not padding): a maximum is
        # taken from those first, so that its index never points into the padding.
        real = _inside(sizes, positions, offset, dilations)
        index = _flat_index(batch, channels, sizes, positions, offset, dilations, column_major) if want_indices else None
        if best is None:
            best, best_index, best_real = window, index, real
            continue
        take = (window > best) | ~best_real
        if floats:  # NaN wins, as in numpy and PyTorch
            take = take | (ops.is_nan(window) & ~ops.is_nan(best))
        take = take & real
        best = ops.where(take, window, best)
        if want_indices:
            best_index = ops.where(take, index, best_index)
        best_real = best_real | real
    if kind == "max":
        return (best, best_index) if want_indices else best
    if kind == "sum":
        return total
    reserve(outs, 2 * 8, "pooling's window counts", kept=8)
    counts = np.ones([1, 1] + outs)
    for axis, (p, k, d, n, b, e) in enumerate(zip(positions, kernel, dilations, sizes, begins, ends)):
        taps = p[:, None] + np.arange(k)[None, :] * d
        low, high = (-b, n + e) if count_include_pad else (0, n)
        shape = [1] * (2 + rank)
        shape[2 + axis] = len(p)
        counts = counts * ((taps >= low) & (taps < high)).sum(1).reshape(shape)
    return total / counts.astype(np_dtype)


def _inside(sizes, positions, offset, dilations):
    """[1, 1, out...] booleans: the element at `offset` of each window lies inside the input."""
    reserve([len(p) for p in positions], 8 * len(positions) + 1, "pooling's window positions", kept=1)
    grids = np.meshgrid(*[p + o * d for p, o, d in zip(positions, offset, dilations)], indexing="ij")
    inside = np.ones(grids[0].shape, bool)
    for g, n in zip(grids, sizes):
        inside &= (g >= 0) & (g < n)
    return inside.reshape((1, 1) + inside.shape)


def _flat_index(batch, channels, sizes, positions, offset, dilations, column_major):
    """The index into the input (N, C, spatial...) of each window's element at `offset`."""
    reserve([batch, channels] + [len(p) for p in positions], 8 * (len(positions) + 2), "pooling's window indices", kept=8)
    grids = np.meshgrid(*[p + o * d for p, o, d in zip(positions, offset, dilations)], indexing="ij")
    spatial = np.zeros(grids[0].shape, np.int64)
    order = list(zip(grids, sizes))
    for g, n in (reversed(order) if column_major else order):
        spatial = spatial * n + g
    planes = (np.arange(batch)[:, None] * channels + np.arange(channels)[None, :]) * int(np.prod(sizes))
    return planes.reshape([batch, channels] + [1] * len(sizes)) + spatial


def _pool(n, kind):
    check_attrs(n, ("auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads",
                    "storage_order", "strides"))
    want_indices = n.num_outputs > 1 and bool(n.proto.output[1])
    spatial = n.rank(0) - 2
    kernel = n.attr("kernel_shape")
    strides = n.attr("strides", [1] * spatial)
    dilations = n.attr("dilations", [1] * spatial)
    ceil_mode = bool(n.attr("ceil_mode", 0))
    count_pad = bool(n.attr("count_include_pad", 0))
    # (esgraph's avg_pool2d counts only the input; with ceil_mode, counting the padding too is
    # what the windows by shifts do)
    if spatial > 2 or any(d != 1 for d in dilations) or want_indices or (kind == "avg" and count_pad and ceil_mode):
        return pool_by_shifts(n.x(0), kind, kernel, strides, onnx_pads(n, spatial, kernel, strides, dilations),
                              dilations, ceil_mode, count_pad, want_indices, bool(n.attr("storage_order", 0)))
    _spatial(n, n.op_type)
    pads = _pads(n, spatial, kernel, strides, dilations)
    x = ops.unsqueeze(n.x(0), [2]) if spatial == 1 else n.x(0)
    kernel2, strides2 = _as_2d(spatial, kernel, 1), _as_2d(spatial, strides, 1)
    if kind == "avg" and count_pad:
        y = avg_pool_counting_padding(x, kernel2, strides2, pads, ceil_mode)
    else:
        y = (ops.max_pool2d if kind == "max" else ops.avg_pool2d)(x, kernel2, strides=strides2, pads=pads,
                                                                   ceil_mode=ceil_mode)
    return ops.squeeze(y, axes=[2]) if spatial == 1 else y


@converts("MaxPool")
def max_pool(n):
    return _pool(n, "max")


@converts("AveragePool")
def average_pool(n):
    return _pool(n, "avg")


def _powered(n, x, p):
    """|x| ** p, and its inverse (p = 2 as a square and a square root)."""
    if p == 2:
        return x * x, ops.sqrt
    exponent = n.tensor(np.asarray(p, _dtypes.numpy_dtype(x.dtype)))
    inverse = n.tensor(np.asarray(1 / p, _dtypes.numpy_dtype(x.dtype)))
    return ops.pow(ops.abs(x), exponent), lambda t: ops.pow(t, inverse)


@converts("LpPool")
def lp_pool(n):
    """The p-norm of each window: the sum of |x|^p over the window (padding adds nothing), to
    the power 1/p."""
    check_attrs(n, ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "p", "pads", "strides"))
    spatial = n.rank(0) - 2
    kernel = n.attr("kernel_shape")
    strides, dilations = n.attr("strides", [1] * spatial), n.attr("dilations", [1] * spatial)
    powered, root = _powered(n, n.x(0), n.attr("p", 2))
    return root(pool_by_shifts(powered, "sum", kernel, strides, onnx_pads(n, spatial, kernel, strides, dilations),
                               dilations, bool(n.attr("ceil_mode", 0)), False, False))


@converts("GlobalLpPool")
def global_lp_pool(n):
    check_attrs(n, ("p",))
    powered, root = _powered(n, n.x(0), n.attr("p", 2))
    return root(ops.reduce_sum(powered, axes=list(range(2, n.rank(0))), keepdims=True))


@converts("GlobalAveragePool")
def global_average_pool(n):
    return ops.reduce_mean(n.x(0), axes=list(range(2, n.rank(0))), keepdims=True)


@converts("GlobalMaxPool")
def global_max_pool(n):
    return ops.reduce_max(n.x(0), axes=list(range(2, n.rank(0))), keepdims=True)


@converts("MaxUnpool")
def max_unpool(n):
    """MaxPool's inverse: each value written at its flat index (MaxPool's Indices) into zeros of
    the unpooled shape, (in - 1)·stride - pads + kernel; a larger `output_shape` adds zeros at
    the end of each axis, the indices keeping their places (as ONNX's reference does)."""
    check_attrs(n, ("kernel_shape", "pads", "strides"))
    x = n.x(0)
    dims = _static(x.shape, "MaxUnpool")
    kernel = n.attr("kernel_shape")
    spatial = len(kernel)
    strides = n.attr("strides") or [1] * spatial
    pads = n.attr("pads") or [0] * (2 * spatial)
    out = dims[:2] + [(dims[2 + i] - 1) * strides[i] - pads[i] - pads[spatial + i] + kernel[i] for i in range(spatial)]
    flat = ops.fill([math.prod(out)], value=0.0, dtype=x.dtype)
    y = ops.reshape(ops.scatter_elements(flat, ops.reshape(n.x(1), [-1]), ops.reshape(x, [-1]), axis=0), out)
    if not n.has(2):
        return y
    wanted = [int(d) for d in np.asarray(n.const(2, "output_shape")).reshape(-1)]
    if len(wanted) != len(out) or any(w < o for w, o in zip(wanted, out)):
        raise Unsupported(f"output_shape {wanted} smaller than the unpooled {out}")
    return ops.pad(y, [0] * len(out) + [w - o for w, o in zip(wanted, out)])
