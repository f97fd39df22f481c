"""Convolutions, pools, batch norm, matrix products and softmax. NHWC convolutions and pools
compute in NCHW and leave their result so (_layout.py)."""
import numpy as np

from ... import _C
from ..._compose import same_pads
from .. import _tensors
from .._layout import Nchw, TO_NCHW_AXIS
from .registry import Unsupported, converts, data_format

ops = _C.ops


def _spatial(values, fmt, what):
    """The H and W entries of a 4-entry list in the node's data_format."""
    if values is None or len(values) != 4:
        raise Unsupported(f"{what} {values}: expected 4 entries")
    h, w = (1, 2) if fmt == "NHWC" else (2, 3)
    others = [values[a] for a in range(4) if a not in (h, w)]
    if any(v != 1 for v in others):
        raise Unsupported(f"{what} {values} steps over the batch or channels")
    return [int(values[h]), int(values[w])]


def _input(n, fmt):
    """Input 0 as NCHW, and its spatial sizes."""
    x = n.nchw(0) if fmt == "NHWC" else n.x(0)
    return x, list(x.shape[2:])


def _pads(n, fmt, sizes, kernel, strides, dilations):
    """esgraph's [top, left, bottom, right] for the node's padding: VALID, SAME (TF's split:
    the odd element after) or EXPLICIT (explicit_paddings, a (begin, end) pair per axis)."""
    padding = n.attr("padding")
    if padding == "VALID":
        return [0, 0, 0, 0]
    if padding == "SAME":
        if any(not isinstance(s, int) for s in sizes):
            raise Unsupported(f"SAME padding over symbolic spatial sizes {sizes}")
        begins, ends = same_pads(sizes, kernel, strides, dilations)
        return begins + ends
    if padding == "EXPLICIT":
        pairs = n.attr("explicit_paddings", [])
        if len(pairs) != 8:
            raise Unsupported(f"explicit_paddings {pairs}: expected 8 entries")
        h, w = (1, 2) if fmt == "NHWC" else (2, 3)
        if any(pairs[2 * a] or pairs[2 * a + 1] for a in range(4) if a not in (h, w)):
            raise Unsupported(f"explicit_paddings {pairs} pad the batch or channels")
        return [pairs[2 * h], pairs[2 * w], pairs[2 * h + 1], pairs[2 * w + 1]]
    raise Unsupported(f"padding {padding}")


def _result(y, fmt):
    return Nchw(y) if fmt == "NHWC" else y


def _filter(n, i, to_oihw):
    """Filter input i in esgraph's OIHW: rearranged now when it is a constant."""
    if n.known(i):
        return n.tensor(np.ascontiguousarray(to_oihw(n.const(i))))
    raise Unsupported("a filter computed at run time")


@converts("Conv2D")
def conv2d(n):
    fmt = data_format(n)
    x, sizes = _input(n, fmt)
    kh, kw, cin, cout = n.shape(1)
    strides = _spatial(n.attr("strides"), fmt, "strides")
    dilations = _spatial(n.attr("dilations", [1, 1, 1, 1]), fmt, "dilations")
    channels = x.shape[1]
    if not isinstance(channels, int) or channels % cin:
        raise Unsupported(f"input channels {channels} are not a multiple of the filter's {cin}")
    w = _filter(n, 1, lambda f: f.transpose(3, 2, 0, 1))
    pads = _pads(n, fmt, sizes, [kh, kw], strides, dilations)
    y = ops.conv2d(x, w, strides=strides, pads=pads, dilations=dilations, groups=channels // cin)
    return _result(y, fmt)


@converts("DepthwiseConv2dNative")
def depthwise_conv2d(n):
    fmt = data_format(n)
    x, sizes = _input(n, fmt)
    kh, kw, channels, multiplier = n.shape(1)
    strides = _spatial(n.attr("strides"), fmt, "strides")
    dilations = _spatial(n.attr("dilations", [1, 1, 1, 1]), fmt, "dilations")
    # [kh, kw, C, M] -> [C*M, 1, kh, kw]: output channel c*M + m reads input channel c.
    w = _filter(n, 1, lambda f: f.reshape(kh, kw, channels * multiplier).transpose(2, 0, 1)[:, None])
    pads = _pads(n, fmt, sizes, [kh, kw], strides, dilations)
    y = ops.conv2d(x, w, strides=strides, pads=pads, dilations=dilations, groups=channels)
    return _result(y, fmt)


def _pool(n, pool):
    fmt = data_format(n)
    x, sizes = _input(n, fmt)
    kernel = _spatial(n.attr("ksize"), fmt, "ksize")
    strides = _spatial(n.attr("strides"), fmt, "strides")
    pads = _pads(n, fmt, sizes, kernel, strides, [1, 1])
    return _result(pool(x, kernel, strides=strides, pads=pads), fmt)


@converts("MaxPool")
def max_pool(n):
    return _pool(n, ops.max_pool2d)


@converts("AvgPool")
def avg_pool(n):
    # TF's SAME average divides by the elements inside the input, as esgraph's avg_pool2d does.
    return _pool(n, ops.avg_pool2d)


@converts("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
def fused_batch_norm(n):
    if n.attr("is_training", True):
        raise Unsupported("batch norm in training mode (is_training) is not supported")
    fmt = data_format(n)
    eps = float(n.attr("epsilon", 1e-3))
    scale, offset, mean, variance = (n.const(i, what) for i, what in
                                     ((1, "scale"), (2, "offset"), (3, "mean"), (4, "variance")))
    # TF computes (x - mean) * (scale * rsqrt(variance + eps)) + offset.
    multiplier = (scale.astype(np.float32) / np.sqrt(variance.astype(np.float32) + np.float32(eps))).astype(np.float32)
    shift = (offset - mean * multiplier).astype(np.float32)
    x = n.nchw(0) if fmt == "NHWC" else n.x(0)
    per_channel = (-1, 1, 1)
    y = x * n.tensor(multiplier.reshape(per_channel)) + n.tensor(shift.reshape(per_channel))
    # The other outputs are the batch statistics, which inference passes through.
    return [_result(y, fmt), n.value(3), n.value(4), n.value(3), n.value(4), n.value(3)]


@converts("BiasAdd", "BiasAddV1")
def bias_add(n):
    fmt = data_format(n) if n.op == "BiasAdd" else "NHWC"
    if fmt == "NCHW" and n.rank(0) >= 3:
        return n.x(0) + ops.reshape(n.x(1), [-1] + [1] * (n.rank(0) - 2))
    if n.is_nchw(0):
        return Nchw(n.nchw(0) + ops.reshape(n.x(1), [-1, 1, 1]))
    return n.x(0) + n.x(1)


@converts("MatMul")
def matmul(n):
    return ops.matmul(n.x(0), n.x(1), transpose_a=bool(n.attr("transpose_a", False)),
                      transpose_b=bool(n.attr("transpose_b", False)))


@converts("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def batch_matmul(n):
    y = ops.matmul(n.x(0), n.x(1), transpose_a=bool(n.attr("adj_x", False)), transpose_b=bool(n.attr("adj_y", False)))
    if n.op == "BatchMatMulV3" and n.attr("Tout") is not None:
        to = _tensors.esg_dtype(n.attr("Tout"))
        y = ops.cast(y, to) if to != y.dtype else y
    return y


@converts("Softmax", "LogSoftmax")
def softmax(n):
    fn = ops.softmax if n.op == "Softmax" else ops.log_softmax
    if n.is_nchw(0):
        return Nchw(fn(n.nchw(0), axis=TO_NCHW_AXIS[3]))
    return fn(n.x(0), axis=-1)
