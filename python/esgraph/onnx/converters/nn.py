"""Matrix products, convolution, pooling and normalization."""
import math

from ... import _C
from ..._compose import conv_nd, conv_transpose_nd, numpy_matmul, pad_or_crop, same_pads
from .registry import NeedsShape, Unsupported, check_attrs, converts

ops = _C.ops


def _static(dims, what):
    if any(not isinstance(d, int) for d in dims):
        raise NeedsShape(f"{what} needs static dimensions, got {tuple(dims)}")
    return list(dims)


@converts("MatMul")
def matmul(n):
    how = n.sharding(1)
    if how:
        return _sharded_product(n, how, transpose_b=False, product=numpy_matmul)
    return numpy_matmul(n.x(0), n.x(1))


@converts("Gemm")
def gemm(n):
    check_attrs(n, ("alpha", "beta", "transA", "transB", "broadcast"))
    alpha, beta = n.attr("alpha", 1.0), n.attr("beta", 1.0)
    bias = n.x(2) if n.has(2) and beta != 0.0 else None
    if bias is not None and beta != 1.0:
        bias = bias * beta

    def product(a, b):
        y = ops.matmul(a, b, transpose_a=bool(n.attr("transA", 0)), transpose_b=bool(n.attr("transB", 0)))
        return y * alpha if alpha != 1.0 else y

    how = n.sharding(1)
    if how == "row" and n.attr("transA", 0):
        raise Unsupported("a Gemm with transA whose weight is sharded by rows (its input's split axis would be the first)")
    if how:
        return _sharded_product(n, how, transpose_b=bool(n.attr("transB", 0)), product=product, bias=bias)
    y = product(n.x(0), n.x(1))
    return y + bias if bias is not None else y


def _sharded_product(n, how, transpose_b, product, bias=None):
    """A product whose weight (input 1) load()'s `sharding` splits over the ranks (parallel.py's
    layers, one product at a time): "column" keeps this rank's output columns and gathers the
    pieces, "row" keeps its input rows, reads the matching slice of input 0 and sums the pieces."""
    from ... import parallel
    group = parallel.Group()
    weight = n.const(1, "the sharded weight")
    if weight.ndim != 2:
        raise Unsupported(f"a sharded weight must be a matrix, got shape {weight.shape}")
    columns, rows = (0, 1) if transpose_b else (1, 0)  # the weight's axes of outputs and of inputs
    try:
        shard = group.shard(weight, axis=columns if how == "column" else rows)
    except ValueError as e:
        raise Unsupported(str(e)) from None
    if how == "column":
        y = group.all_gather(product(n.x(0), n.tensor(shard)), axis=-1)
    else:
        piece = shard.shape[rows]
        x = ops.slice(n.x(0), starts=[group.index * piece], ends=[(group.index + 1) * piece], axes=[-1])
        y = group.all_reduce(product(x, n.tensor(shard)))
    return y + bias if bias is not None else y


def _spatial(n, what, most=2):
    """The number of spatial axes of input 0, refusing what esgraph cannot run."""
    spatial = n.rank(0) - 2
    if not 1 <= spatial <= most:
        raise Unsupported(f"{what} over {spatial} spatial axes (esgraph has 1-D to {most}-D)")
    return spatial


def _pads(n, spatial, kernel, strides, dilations):
    """ONNX pads (begins then ends) for the node's auto_pad, as esgraph's [top, left, bottom, right]."""
    pads = onnx_pads(n, spatial, kernel, strides, dilations)
    if spatial == 1:  # 1-D runs as 2-D over a unit height
        pads = [0, pads[0], 0, pads[1]]
    return pads


def onnx_pads(n, spatial, kernel, strides, dilations):
    """The node's pads, all begins then all ends, with auto_pad resolved."""
    auto_pad = n.attr("auto_pad", "NOTSET")
    if auto_pad in ("NOTSET", "VALID"):
        pads = n.attr("pads", [0] * (2 * spatial)) if auto_pad == "NOTSET" else [0] * (2 * spatial)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        small, large = same_pads(_static(n.shape(0)[2:], "auto_pad=" + auto_pad), kernel, strides, dilations)
        pads = small + large if auto_pad == "SAME_UPPER" else large + small
    else:
        raise Unsupported(f"auto_pad={auto_pad}")
    return list(pads)


def _as_2d(spatial, values, fill):
    return [fill] + list(values) if spatial == 1 else list(values)


@converts("Conv")
def conv(n):
    return convolve(n, n.x(0), n.x(1), n.x(2))


def convolve(n, x, w, bias, conv2d=None):
    """Conv's attributes applied to x, w and bias (None: none): what Conv, ConvInteger and
    QLinearConv share. `conv2d(x, w, bias, **attributes)` makes a 1-D or 2-D convolution
    (ops.conv2d's form by default; QLinearConv's is its quantized one)."""
    check_attrs(n, ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))
    spatial = _spatial(n, n.op_type, most=3)
    kernel = n.attr("kernel_shape") or _static(w.shape[2:], "Conv's kernel")
    strides = n.attr("strides", [1] * spatial)
    dilations = n.attr("dilations", [1] * spatial)
    if spatial == 3:  # padded first, then 2-D convolutions per kernel depth
        pads = onnx_pads(n, spatial, kernel, strides, dilations)
        x = pad_or_crop(x, [0, 0] + pads[:3] + [0, 0] + pads[3:])
        return conv_nd(x, w, bias, strides, dilations, n.attr("group", 1))
    pads = _pads(n, spatial, kernel, strides, dilations)
    if spatial == 1:
        x, w = ops.unsqueeze(x, [2]), ops.unsqueeze(w, [2])
    y = (conv2d or _float_conv2d)(x, w, bias, strides=_as_2d(spatial, strides, 1), pads=pads,
                                  dilations=_as_2d(spatial, dilations, 1), groups=n.attr("group", 1))
    return ops.squeeze(y, axes=[2]) if spatial == 1 else y


def _float_conv2d(x, w, bias, **attributes):
    return ops.conv2d(x, w, bias=bias, **attributes)


@converts("ConvTranspose")
def conv_transpose(n):
    check_attrs(n, ("auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads",
                    "strides"))
    spatial = _spatial(n, "ConvTranspose", most=3)
    x, w = n.x(0), n.x(1)
    sizes = _static(x.shape[2:], "ConvTranspose")
    kernel = n.attr("kernel_shape") or _static(w.shape[2:], "ConvTranspose's kernel")
    strides = n.attr("strides", [1] * spatial)
    dilations = n.attr("dilations", [1] * spatial)
    extra = n.attr("output_padding", [0] * spatial)
    groups = n.attr("group", 1)
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    auto_pad = n.attr("auto_pad", "NOTSET")
    out_shape = n.attr("output_shape")
    if out_shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = [i * s for i, s in zip(sizes, strides)]
    if out_shape is not None:
        out_shape = list(out_shape)[-spatial:]
        total = [s * (i - 1) + e + op - o for s, i, e, op, o in zip(strides, sizes, extents, extra, out_shape)]
        upper = auto_pad == "SAME_UPPER"
        begins = [t // 2 if upper else t - t // 2 for t in total]
        ends = [t - t // 2 if upper else t // 2 for t in total]
    elif auto_pad in ("NOTSET", "VALID"):
        pads = n.attr("pads", [0] * (2 * spatial)) if auto_pad == "NOTSET" else [0] * (2 * spatial)
        begins, ends = list(pads[:spatial]), list(pads[spatial:])
    else:
        raise Unsupported(f"auto_pad={auto_pad}")
    if spatial == 1:  # 1-D runs as 2-D over a unit height
        x, w = ops.unsqueeze(x, [2]), ops.unsqueeze(w, [2])
        strides, dilations = [1] + list(strides), [1] + list(dilations)
        begins, ends, extra = [0] + begins, [0] + ends, [0] + list(extra)
    y = conv_transpose_nd(x, w, n.x(2), strides, dilations, groups, begins, ends, extra)
    return ops.squeeze(y, axes=[2]) if spatial == 1 else y


def _per_channel(t, rank):
    """A [C] parameter shaped [1, C, 1, ...] to broadcast along axis 1 of a rank-`rank` input (at
    the input's rank, so that kernels over blocked channels read it per channel)."""
    return ops.reshape(t, [1, -1] + [1] * (rank - 2))


@converts("BatchNormalization")
def batch_norm(n):
    check_attrs(n, ("epsilon", "momentum", "training_mode", "spatial", "is_test", "consumed_inputs"))
    if not n.attr("spatial", 1):
        raise Unsupported("spatial=0 (per-element statistics) is not supported")
    x, rank = n.x(0), n.rank(0)
    scale, bias, mean, var = (_per_channel(n.x(i), rank) for i in (1, 2, 3, 4))
    # Training mode (opset 14's attribute; before it, asking for the statistics outputs):
    # normalized by the batch's own mean and (population) variance, which also update the
    # running ones: running · momentum + batch · (1 - momentum).
    if not (n.attr("training_mode", 0) or any(o for o in n.proto.output[1:])):
        return (x - mean) * (scale * ops.rsqrt(var + n.attr("epsilon", 1e-5))) + bias
    axes = [0] + list(range(2, rank))
    batch_mean = ops.reduce_mean(x, axes=axes, keepdims=True)
    centered = x - batch_mean
    batch_var = ops.reduce_mean(centered * centered, axes=axes, keepdims=True)
    y = centered * (scale * ops.rsqrt(batch_var + n.attr("epsilon", 1e-5))) + bias
    momentum = n.attr("momentum", 0.9)
    running = [ops.reshape(old * momentum + new * (1 - momentum), [-1]) for old, new in ((mean, batch_mean), (var, batch_var))]
    return [y] + running + ([ops.reshape(batch_mean, [-1]), ops.reshape(batch_var, [-1])] if n.opset < 14 else [])


@converts("InstanceNormalization")
def instance_norm(n):
    x, rank = n.x(0), n.rank(0)
    y = ops.layer_norm(x, axis=2, epsilon=n.attr("epsilon", 1e-5))
    return y * _per_channel(n.x(1), rank) + _per_channel(n.x(2), rank)


@converts("LayerNormalization")
def layer_norm(n):
    check_attrs(n, ("axis", "epsilon", "stash_type"))
    x, axis, epsilon = n.x(0), n.attr("axis", -1), n.attr("epsilon", 1e-5)
    normalized = list(x.shape[axis:])

    def trailing(t):  # ONNX lets scale and bias broadcast; esgraph wants the normalized shape
        return t if t is None or list(t.shape) == normalized else ops.expand(t, _static(normalized, "a broadcast scale"))
    y = ops.layer_norm(x, scale=trailing(n.x(1)), bias=trailing(n.x(2)), axis=axis, epsilon=epsilon)
    if n.num_outputs == 1:
        return y
    # The statistics outputs, when asked for, keep the normalized axes as size 1.
    axes = list(range(axis % x.ndim, x.ndim))
    mean = ops.reduce_mean(x, axes=axes, keepdims=True)
    centered = x - mean
    inv_std = ops.rsqrt(ops.reduce_mean(centered * centered, axes=axes, keepdims=True) + epsilon)
    return [y, mean, inv_std]


def _softmax(n, fn):
    x = n.x(0)
    if n.opset >= 13:
        return fn(x, axis=n.attr("axis", -1))
    # Before opset 13 the input is seen as a matrix [prod(shape[:axis]), prod(shape[axis:])].
    axis = n.attr("axis", 1) % max(x.ndim, 1)
    if axis == x.ndim - 1:
        return fn(x, axis=-1)
    inner = math.prod(_static(x.shape[axis:], f"{n.op_type} before opset 13"))
    y = fn(ops.reshape(x, [-1, inner]), axis=-1)
    return ops.reshape(y, _static(x.shape, f"{n.op_type} before opset 13"))


@converts("Softmax")
def softmax(n):
    return _softmax(n, ops.softmax)


@converts("LogSoftmax")
def log_softmax(n):
    return _softmax(n, ops.log_softmax)


@converts("MeanVarianceNormalization")
def mean_variance_normalization(n):
    # ONNX's definition: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes`.
    x, axes = n.x(0), list(n.attr("axes", [0, 2, 3]))
    mean = ops.reduce_mean(x, axes=axes, keepdims=True)
    std = ops.sqrt(ops.reduce_mean(x * x, axes=axes, keepdims=True) - mean * mean)
    return (x - mean) / (std + 1e-9)


@converts("LpNormalization")
def lp_normalization(n):
    x, axis, p = n.x(0), n.attr("axis", -1), n.attr("p", 2)
    if p == 1:
        norm = ops.reduce_sum(ops.abs(x), axes=[axis], keepdims=True)
    elif p == 2:
        norm = ops.sqrt(ops.reduce_sum(x * x, axes=[axis], keepdims=True))
    else:
        raise Unsupported(f"p={p}")
    return ops.where(norm == 0, x * 0.0, x / norm)  # a zero vector stays zero


def _stashed(n, x):
    """x in the precision of stash_type's first stage (f32 by default, as ONNX's 1 says)."""
    stash = n.attr("stash_type", 1)
    if stash not in (1, 11):
        raise Unsupported(f"stash_type {stash} (FLOAT or DOUBLE)")
    want = _C.f32 if stash == 1 else _C.f64
    return x if x.dtype == want else ops.cast(x, want)


@converts("RMSNormalization")
def rms_norm(n):
    check_attrs(n, ("axis", "epsilon", "stash_type"))
    x = n.x(0)
    y = ops.rms_norm(_stashed(n, x), axis=n.attr("axis", -1), epsilon=n.attr("epsilon", 1e-5))
    y = ops.cast(y, x.dtype) if y.dtype != x.dtype else y
    return y * n.x(1)


@converts("GroupNormalization")
def group_norm(n):
    """The statistics per instance and group of channels (x as [N, groups, rest]); scale and
    bias per channel from opset 21, per group before it."""
    check_attrs(n, ("epsilon", "num_groups", "stash_type"))
    x, rank, groups = n.x(0), n.rank(0), n.attr("num_groups")
    rest = list(x.shape[1:])
    if not all(isinstance(d, int) for d in rest):
        raise NeedsShape(f"GroupNormalization of symbolic sizes {rest}")
    grouped = ops.reshape(_stashed(n, x), [0, groups, -1])
    normalized = ops.layer_norm(grouped, axis=2, epsilon=n.attr("epsilon", 1e-5))
    y = ops.reshape(ops.cast(normalized, x.dtype) if normalized.dtype != x.dtype else normalized, [0] + rest)
    scale, bias = n.x(1), n.x(2)
    if n.opset < 21:  # one value per group: repeated over the group's channels
        channels = rest[0]
        scale, bias = (ops.reshape(ops.concat([ops.unsqueeze(t, [1])] * (channels // groups), 1), [-1]) for t in (scale, bias))
    return y * _per_channel(scale, rank) + _per_channel(bias, rank)
