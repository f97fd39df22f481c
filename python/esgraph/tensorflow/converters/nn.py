"""Convolutions, pools, batch norm, matrix products and softmax. NHWC convolutions and pools
compute in NCHW and leave their result so (_layout.py)."""
import numpy as np

from ... import _C
from ..._compose import same_pads
from ..._einsum import einsum as compute_einsum, parse as parse_einsum
from .. import _tensors
from .._layout import Nchw, TO_NCHW_AXIS
from .elementwise import operands
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


@converts("Conv2D")
def conv2d(n):
    return _result(_conv2d(n), data_format(n))


@converts("DepthwiseConv2dNative")
def depthwise_conv2d(n):
    return _result(_depthwise_conv2d(n), data_format(n))


def _conv2d(n):
    """Conv2D's convolution, in NCHW: an HWIO filter, grouped where it reads part of the channels."""
    def groups(channels, cin, cout):
        if not isinstance(channels, int) or channels % cin:
            raise Unsupported(f"input channels {channels} are not a multiple of the filter's {cin}")
        return channels // cin
    return _convolution(n, lambda f: f.transpose(3, 2, 0, 1), groups)


def _depthwise_conv2d(n):
    """DepthwiseConv2dNative's, in NCHW: a [kh, kw, C, M] filter is [C*M, 1, kh, kw], output
    channel c*M + m reading input channel c."""
    kh, kw, channels, multiplier = n.shape(1)
    return _convolution(n, lambda f: f.reshape(kh, kw, channels * multiplier).transpose(2, 0, 1)[:, None],
                        lambda c, cin, m: cin)


def _convolution(n, to_oihw, groups):
    """The node's convolution of input 0 by its filter (input 1, a constant rearranged now by
    `to_oihw`), with `groups(input channels, filter dim 2, filter dim 3)` groups, in NCHW."""
    fmt = data_format(n)
    x, sizes = _input(n, fmt)
    if not n.known(1):
        raise Unsupported("a filter computed at run time")
    kh, kw, third, fourth = n.shape(1)
    strides = _spatial(n.attr("strides"), fmt, "strides")
    dilations = _spatial(n.attr("dilations", [1, 1, 1, 1]), fmt, "dilations")
    count = groups(x.shape[1], third, fourth)
    w = n.tensor(np.ascontiguousarray(to_oihw(n.const(1))))
    pads = _pads(n, fmt, sizes, [kh, kw], strides, dilations)
    return ops.conv2d(x, w, strides=strides, pads=pads, dilations=dilations, groups=count)


# What grappler's remapper fuses into a convolution or a product, after the BiasAdd or the
# FusedBatchNorm (TF's _FusedConv2D and _FusedMatMul `fused_ops`).
_ACTIVATIONS = {
    "Relu": ops.relu, "Relu6": lambda x: ops.clip(x, min=0.0, max=6.0), "Elu": ops.elu, "Tanh": ops.tanh,
    "Sigmoid": ops.sigmoid, "GeluExact": ops.gelu, "GeluApproximate": lambda x: ops.gelu(x, approximate="tanh"),
}


def _fused(n, y, channel_axis, nhwc=False):
    """y (a convolution's NCHW result, `nhwc` when the node's own layout is NHWC, or a product's
    rows) with the node's fused_ops applied:
    BiasAdd or FusedBatchNorm, then Add (a residual, the next argument), then an activation."""
    fused = n.attr("fused_ops", [])
    rank = len(y.shape)
    per_channel = [-1] + [1] * (rank - 1 - channel_axis)
    args = list(range(2, n.num_inputs))
    steps = list(fused)
    if steps and steps[0] == "BiasAdd":
        bias = args.pop(0)
        # TF.js's converter takes an Add of a scalar or of a whole tensor into its BiasAdd too.
        if n.rank(bias) == 1:
            y = y + ops.reshape(n.x(bias), per_channel)
        elif n.rank(bias) in (0, rank):
            y = y + (n.nchw(bias) if nhwc and n.rank(bias) else n.x(bias))
        else:
            raise Unsupported(f"a BiasAdd operand of rank {n.rank(bias)} (0, 1, or the result's {rank})")
        steps.pop(0)
    elif steps and steps[0] == "NoOp":  # TF.js's: no bias
        steps.pop(0)
    elif steps and steps[0] == "FusedBatchNorm":
        scale, offset, mean, variance = (n.const(args.pop(0), what) for what in ("scale", "offset", "mean", "variance"))
        multiplier, shift = batch_norm_constants(scale, offset, mean, variance, n.attr("epsilon", 1e-4))
        y = y * n.tensor(multiplier.reshape(per_channel)) + n.tensor(shift.reshape(per_channel))
        steps.pop(0)
    if steps and steps[0] in ("Add", "AddV2"):
        residual = args.pop(0)
        y = y + (n.nchw(residual) if nhwc else n.x(residual))  # an NHWC residual joins the NCHW result
        steps.pop(0)
    if steps and steps[0] == "LeakyRelu":
        alpha = float(n.attr("leakyrelu_alpha", 0.2))
        y = ops.leaky_relu(y, alpha=alpha)
        steps.pop(0)
    elif steps and steps[0] == "Prelu":  # TF.js's: a slope per channel, the next argument
        y = prelu(y, ops.reshape(n.x(args.pop(0)), per_channel))
        steps.pop(0)
    elif steps and steps[0] in _ACTIVATIONS:
        y = _ACTIVATIONS[steps.pop(0)](y)
    if steps or not fused:
        raise Unsupported(f"fused_ops {fused}")
    return y


@converts("_FusedConv2D", "_FusedDepthwiseConv2dNative", "FusedDepthwiseConv2dNative")
def fused_conv2d(n):
    """Grappler's fused convolutions, and TF.js's fused depthwise one (the same attributes)."""
    fmt = data_format(n)
    y = _conv2d(n) if n.op == "_FusedConv2D" else _depthwise_conv2d(n)
    return _result(_fused(n, y, channel_axis=1, nhwc=fmt == "NHWC"), fmt)


@converts("_FusedMatMul")
def fused_matmul(n):
    return _fused(n, matmul(n), channel_axis=1)


def batch_norm_constants(scale, offset, mean, variance, epsilon):
    """Inference batch norm as y = x * multiplier + shift, per channel, in float32: TF computes
    (x - mean) * (scale * rsqrt(variance + epsilon)) + offset."""
    f32 = np.float32
    multiplier = (scale.astype(f32) / np.sqrt(variance.astype(f32) + f32(epsilon))).astype(f32)
    return multiplier, (offset.astype(f32) - mean.astype(f32) * multiplier).astype(f32)


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
    scale, offset, mean, variance = (n.const(i, what) for i, what in
                                     ((1, "scale"), (2, "offset"), (3, "mean"), (4, "variance")))
    multiplier, shift = batch_norm_constants(scale, offset, mean, variance, n.attr("epsilon", 1e-4))
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


@converts("Einsum")
def einsum(n):
    try:
        terms, out = parse_einsum(n.attr("equation"), [n.rank(i) for i in range(n.num_inputs)])
    except ValueError as e:
        raise Unsupported(str(e)) from None
    return compute_einsum([n.x(i) for i in range(n.num_inputs)], terms, out)


def prelu(x, alpha):
    """x where it is positive, alpha * x elsewhere (NaN stays NaN)."""
    return ops.where(ops.greater(x, 0.0), x, alpha * x)


@converts("Prelu")
def prelu_op(n):
    """TF.js's PReLU op: alpha broadcasts against x's trailing axes, as TF's do."""
    (x, alpha), wrap = operands(n, [0, 1])
    return wrap(prelu(x, alpha))
