"""ATen's layers: products, convolutions, pooling, normalizations, activations with settings."""
import math

import torch

from ... import _C
from ..._compose import avg_pool_counting_padding, conv_nd, conv_transpose_nd, numpy_matmul, pad_or_crop
from ..._resize import resize_axes
from .._dtypes import FLOATS
from .registry import Unsupported, as_dtype, converts, esg_dtype, ints, ops, static


@converts("aten.mm.default", "aten.bmm.default", "aten.matmul.default")
def _mm(call, a, b):
    return numpy_matmul(a, b)


@converts("aten.addmm.default")
def _addmm(call, bias, a, b, beta=1, alpha=1):
    y = ops.matmul(a, b)
    y = y if alpha == 1 else y * float(alpha)
    return y + (bias if beta == 1 else bias * float(beta))


@converts("aten.baddbmm.default")
def _baddbmm(call, base, a, b, beta=1, alpha=1):
    return _addmm(call, base, a, b, beta, alpha)


@converts("aten.linear.default")
def _linear(call, x, w, bias=None):
    y = ops.matmul(x, w, transpose_b=True)
    return y if bias is None else y + bias


@converts("aten.convolution.default")
def _convolution(call, x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    spatial = x.ndim - 2
    stride, padding, dilation = (ints(v, "a convolution setting") for v in (stride, padding, dilation))
    if transposed:
        return conv_transpose_nd(x, w, bias, stride, dilation, groups, padding, padding, ints(output_padding, "output_padding"))
    if spatial == 1:  # a unit height: Conv1d as a 2-D convolution
        y = _convolution(call, ops.unsqueeze(x, [2]), ops.unsqueeze(w, [2]), bias, [1] + stride, [0] + padding,
                         [1] + dilation, False, [0, 0], groups)
        return ops.squeeze(y, axes=[2])
    if spatial == 2:
        return ops.conv2d(x, w, bias=bias, strides=stride, pads=padding + padding, dilations=dilation, groups=groups)
    if spatial == 3:
        return conv_nd(pad_or_crop(x, [0, 0] + padding + [0, 0] + padding), w, bias, stride, dilation, groups)
    raise Unsupported(f"a convolution over {spatial} spatial axes")


def _pool_args(kernel, stride, padding):
    kernel = ints(kernel, "a pooling window")
    kernel = kernel * 2 if len(kernel) == 1 else kernel
    stride = ints(stride, "a pooling stride") if stride else kernel
    stride = stride * 2 if len(stride) == 1 else stride
    padding = ints(padding, "a pooling padding")
    padding = padding * 2 if len(padding) == 1 else padding
    return kernel, stride, padding


@converts("aten.max_pool2d_with_indices.default", "aten.max_pool2d.default")
def _max_pool2d(call, x, kernel, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    kernel, stride, padding = _pool_args(kernel, stride, padding)
    if any(d != 1 for d in ints(dilation, "a pooling dilation")):
        raise Unsupported(f"max pooling with dilation {list(dilation)}")
    y = ops.max_pool2d(x, kernel, strides=stride, pads=padding + padding, ceil_mode=bool(ceil_mode))
    # The indices output, when a graph reads it, has no converter (getitem reports it).
    return (y, None) if call.name.endswith("with_indices.default") else y


@converts("aten.avg_pool2d.default")
def _avg_pool2d(call, x, kernel, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True, divisor_override=None):
    kernel, stride, padding = _pool_args(kernel, stride, padding)
    if divisor_override is not None:
        raise Unsupported(f"avg_pool2d with divisor_override={divisor_override}")
    if count_include_pad and any(padding):
        return avg_pool_counting_padding(x, kernel, stride, padding + padding, bool(ceil_mode))
    return ops.avg_pool2d(x, kernel, strides=stride, pads=padding + padding, ceil_mode=bool(ceil_mode))


@converts("aten._adaptive_avg_pool2d.default", "aten.adaptive_avg_pool2d.default")
def _adaptive_avg_pool2d(call, x, output_size):
    oh, ow = ints(output_size, "an adaptive pooling's output size")
    if (oh, ow) == (1, 1):  # any input size, symbolic ones included
        return ops.reduce_mean(x, axes=[x.ndim - 2, x.ndim - 1], keepdims=True)
    h, w = ints(call.arg_val(0).shape[-2:], "an adaptively pooled size")
    if h % oh or w % ow:
        raise Unsupported(f"adaptive average pooling of {h}x{w} to {oh}x{ow}, whose windows differ in size")
    return ops.avg_pool2d(x, [h // oh, w // ow], strides=[h // oh, w // ow])


@converts("aten._native_batch_norm_legit_no_training.default")
def _batch_norm(call, x, weight, bias, mean, var, momentum, eps):
    shape = [1, -1] + [1] * (x.ndim - 2)
    scale = ops.rsqrt(var + float(eps))
    if weight is not None:
        scale = scale * weight
    shift = (bias if bias is not None else 0.0) - mean * scale
    y = x * ops.reshape(scale, shape) + ops.reshape(shift, shape)
    return (y, None, None)


@converts("aten.native_layer_norm.default")
def _layer_norm(call, x, shape, weight, bias, eps):
    axes = len(shape)
    if axes == 1:
        y = ops.layer_norm(x, scale=weight, bias=bias, axis=-1, epsilon=float(eps))
    else:
        y = ops.layer_norm(x, axis=x.ndim - axes, epsilon=float(eps))
        y = y if weight is None else y * weight
        y = y if bias is None else y + bias
    return (y, None, None)


@converts("aten._softmax.default", "aten.softmax.int")
def _softmax(call, x, dim, dtype_or_half=None):
    """_softmax's third argument is half_to_float, softmax.int's a dtype: either way the
    result's dtype says what to compute in."""
    return ops.softmax(as_dtype(x, esg_dtype(call.val.dtype)), axis=dim)


@converts("aten._log_softmax.default", "aten.log_softmax.int")
def _log_softmax(call, x, dim, dtype_or_half=None):
    return ops.log_softmax(as_dtype(x, esg_dtype(call.val.dtype)), axis=dim)


@converts("aten.gelu.default")
def _gelu(call, x, approximate="none"):
    return ops.gelu(x, approximate=approximate)


@converts("aten.leaky_relu.default")
def _leaky_relu(call, x, negative_slope=0.01):
    return ops.leaky_relu(x, alpha=float(negative_slope))


@converts("aten.clamp.default")
def _clamp(call, x, lo=None, hi=None):
    """x within [lo, hi] in the result's dtype (an int tensor with a float bound is promoted)."""
    if isinstance(lo, _C.Tensor) or isinstance(hi, _C.Tensor):
        raise Unsupported("bounds that are tensors")
    x = as_dtype(x, esg_dtype(call.val.dtype))
    if x.dtype in FLOATS:
        return ops.clip(x, min=-math.inf if lo is None else float(lo), max=math.inf if hi is None else float(hi))
    y = x if lo is None else ops.maximum(x, as_dtype(lo, x.dtype))
    return y if hi is None else ops.minimum(y, as_dtype(hi, x.dtype))


@converts("aten.hardtanh.default")
def _hardtanh(call, x, lo=-1.0, hi=1.0):
    return _clamp(call, x, lo, hi)


@converts("aten.clamp_min.default")
def _clamp_min(call, x, lo):
    return _clamp(call, x, lo, None)


@converts("aten.clamp_max.default")
def _clamp_max(call, x, hi):
    return _clamp(call, x, None, hi)


@converts("aten.hardsigmoid.default")
def _hardsigmoid(call, x):
    return ops.hard_sigmoid(x, alpha=1 / 6, beta=0.5)


def _repeat_heads(t, group, shape):
    """[b, h, s, d] -> [b, h·group, s, d], each head repeated `group` times in place (sizes b
    and s may be symbolic: the repeat is a broadcast against zeros, d is static)."""
    spread = ops.unsqueeze(t, [2])
    spread = spread + as_dtype(torch.zeros(1, 1, group, 1, 1), t.dtype)
    return ops.reshape(spread, [0, int(shape[1]) * group, -1, static(shape[3], "an attention head's size")])


@converts("aten._scaled_dot_product_flash_attention_for_cpu.default", "aten.scaled_dot_product_attention.default")
def _attention(call, q, k, v, *args, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """PyTorch's attention: its CPU flash kernel (the backend's decompositions keep
    scaled_dot_product_attention as it: dropout_p and is_causal by position, a result and the
    log-sum-exp, which is not computed), or the op itself (attn_mask first; what torch.export
    keeps of grouped-query attention). [batch, heads, seq, head] operands, grouped queries
    included (k and v repeated over each group's heads), a causal or given mask; esgraph's
    attention op."""
    flash = call.name.endswith("for_cpu.default")
    positional = dict(zip(("dropout_p", "is_causal") if flash else ("attn_mask", "dropout_p", "is_causal", "scale"), args))
    attn_mask, scale = positional.get("attn_mask", attn_mask), positional.get("scale", scale)
    dropout_p, is_causal = positional.get("dropout_p", dropout_p), positional.get("is_causal", is_causal)
    if dropout_p:
        raise Unsupported(f"attention with dropout_p={dropout_p} (inference has none)")
    if q.ndim != 4:
        raise Unsupported(f"attention of rank {q.ndim} operands ([batch, heads, seq, head] only)")
    heads, kv_heads = ints([call.arg_val(0).shape[1], call.arg_val(1).shape[1]], "an attention's head count")
    if heads != kv_heads:  # grouped queries: each k and v head serves heads // kv_heads of q's
        k, v = (_repeat_heads(t, heads // kv_heads, call.arg_val(i).shape) for i, t in ((1, k), (2, v)))
    mask = None
    if attn_mask is not None:
        mask = attn_mask if attn_mask.dtype != getattr(_C, "bool") else \
            ops.where(attn_mask, as_dtype(0.0, q.dtype), as_dtype(-math.inf, q.dtype))
    if is_causal:
        lq, lk = ints([call.arg_val(0).shape[-2], call.arg_val(1).shape[-2]], "a causal attention's length")
        causal = torch.ones(lq, lk, dtype=torch.bool).tril()  # aligned top-left, as PyTorch's
        bias = torch.zeros(lq, lk).masked_fill(~causal, -math.inf)
        causal = as_dtype(bias, q.dtype)
        mask = causal if mask is None else mask + causal
    y = ops.attention(q, k, v, mask=mask, scale=0.0 if scale is None else float(scale))
    return (y, None) if flash else y


@converts("aten.native_group_norm.default")
def _group_norm(call, x, weight, bias, n, c, hw, groups, eps):
    """Each group's channels normalized together: [N, G, rest] through layer_norm's axis."""
    y = ops.layer_norm(ops.reshape(x, [0, groups, -1]), axis=2, epsilon=float(eps))
    y = ops.reshape(y, [0] + ints(call.arg_val(0).shape[1:], "a group norm's channels and spatial size"))
    shape = [-1] + [1] * (x.ndim - 2)
    y = y if weight is None else y * ops.reshape(weight, shape)
    y = y if bias is None else y + ops.reshape(bias, shape)
    return (y, None, None)


def _resized(call, x, scale_factors, method, coordinates, nearest_mode="floor"):
    dims = ints(call.arg_val(0).shape, "a resized input's size")
    out = ints(call.val.shape, "a resized size")
    # PyTorch maps positions with the scale it was given, else with the sizes' ratio.
    scales = [1.0, 1.0] + ([float(s) for s in scale_factors] if scale_factors else [o / i for o, i in zip(out[2:], dims[2:])])
    try:
        return resize_axes(x, dims, out, scales, method, coordinates, nearest_mode=nearest_mode)
    except ValueError as e:
        raise Unsupported(str(e)) from e


@converts("aten.upsample_nearest2d.vec", "aten.upsample_nearest2d.default")
def _upsample_nearest(call, x, output_size, *scales):
    factors = scales[0] if call.name.endswith(".vec") else [s for s in scales if s is not None] or None
    return _resized(call, x, factors, "nearest", "asymmetric", "floor")


@converts("aten.upsample_bilinear2d.vec")
def _upsample_bilinear(call, x, output_size, align_corners, factors):
    return _resized(call, x, factors, "linear", "align_corners" if align_corners else "pytorch_half_pixel")


@converts("aten.div.Tensor_mode", "aten.div.Scalar_mode")
def _div_mode(call, a, b, rounding_mode=None):
    """a / b rounded toward zero ("trunc") or down ("floor"), in the operands' promoted type."""
    dtype = esg_dtype(call.val.dtype)
    a, b = as_dtype(a, dtype), as_dtype(b, dtype)
    if rounding_mode is None:
        return ops.div(a, b)
    if dtype in FLOATS:
        q = ops.div(a, b)
        return ops.floor(q) if rounding_mode == "floor" else ops.sign(q) * ops.floor(ops.abs(q))
    q = ops.div(a, b)  # integers: esgraph truncates
    if rounding_mode == "trunc":
        return q
    r = a - q * b
    zero = as_dtype(0, dtype)
    off = ops.logical_and(ops.not_equal(r, zero), ops.not_equal(ops.less(r, zero), ops.less(b, zero)))
    return q - ops.cast(off, dtype)


@converts("aten.bitwise_and.Tensor", "aten.bitwise_or.Tensor", "aten.bitwise_not.default")
def _bitwise(call, a, b=None):
    """&, | and ~ of booleans (masks): logical ops. Of integers esgraph has no op."""
    if a.dtype != getattr(_C, "bool") or (b is not None and b.dtype != getattr(_C, "bool")):
        raise Unsupported(f"{call.name} of {a.dtype.name} tensors (only booleans convert, as logical ops)")
    if b is None:
        return ops.logical_not(a)
    return (ops.logical_and if "and" in call.name else ops.logical_or)(a, b)


@converts("aten.log2.default")
def _log2(call, x):
    y = as_dtype(x, esg_dtype(call.val.dtype))
    return ops.log(y) * as_dtype(1 / math.log(2), y.dtype)
