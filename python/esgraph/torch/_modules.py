"""Converters for torch.nn layers, called with the layer and its forward's arguments.

Layers whose forward fx cannot trace symbolically (attention, transformer layers, recurrent
layers) are written here from their parameters, following the formulas of PyTorch's docs.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import _C
from .._compose import avg_pool_counting_padding, conv_nd, conv_transpose_nd, pad_or_crop
from .._recurrent import gru_cell, lstm_cell, rnn_cell, scan

ops = _C.ops


class Unsupported(Exception):
    """A layer configuration esgraph cannot express; the reason names the setting."""


def _param(p):
    return None if p is None else _C.constant(p.detach().cpu().contiguous().numpy())


def _pair(v):
    return list(v) if isinstance(v, (tuple, list)) else [v, v]


def linear(x, weight, bias=None):
    y = ops.matmul(x, weight, transpose_b=True)
    return y if bias is None else y + bias


def conv(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """F.conv2d's arguments, on a 4-D input (Conv1d comes here with a unit height)."""
    if isinstance(padding, str):
        if padding == "valid":
            pads = [0, 0, 0, 0]
        else:  # "same": stride 1; the extra element, if any, goes after (as PyTorch does)
            totals = [d * (k - 1) for d, k in zip(_pair(dilation), weight.shape[2:])]
            pads = [t // 2 for t in totals] + [t - t // 2 for t in totals]
    else:
        ph, pw = _pair(padding)
        pads = [ph, pw, ph, pw]
    return ops.conv2d(x, weight, bias=bias, strides=_pair(stride), pads=pads, dilations=_pair(dilation),
                      groups=groups)


def _pool_geometry(kernel_size, stride, padding):
    kernel = _pair(kernel_size)
    strides = kernel if stride is None or stride == [] else _pair(stride)
    ph, pw = _pair(padding)
    return kernel, strides, [ph, pw, ph, pw]


def max_pool(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """F.max_pool2d's arguments."""
    if return_indices or _pair(dilation) != [1, 1]:
        raise Unsupported("max pooling with indices or dilation")
    kernel, strides, pads = _pool_geometry(kernel_size, stride, padding)
    return ops.max_pool2d(x, kernel, strides=strides, pads=pads, ceil_mode=ceil_mode)


def avg_pool(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    """F.avg_pool2d's arguments."""
    if divisor_override is not None:
        raise Unsupported("average pooling with a divisor override")
    kernel, strides, pads = _pool_geometry(kernel_size, stride, padding)
    if count_include_pad:  # PyTorch's default: the zero padding counts
        return avg_pool_counting_padding(x, kernel, strides, pads, ceil_mode)
    return ops.avg_pool2d(x, kernel, strides=strides, pads=pads, ceil_mode=ceil_mode)


def softplus(x, beta=1, threshold=20):
    """F.softplus: log(1 + exp(beta x)) / beta; esgraph's form needs no overflow threshold."""
    return ops.softplus(x) if beta == 1 else ops.softplus(x * beta) / beta


def flatten(x, start_dim=0, end_dim=-1):
    start, end = start_dim % x.ndim, end_dim % x.ndim
    shape = list(x.shape)
    return ops.reshape(x, shape[:start] + [math.prod(shape[start:end + 1])] + shape[end + 1:])


def _activation(act):
    if act is F.relu or isinstance(act, nn.ReLU):
        return ops.relu
    if act is F.gelu:
        return ops.gelu
    if isinstance(act, nn.GELU):
        return lambda x: ops.gelu(x, approximate=act.approximate)
    raise Unsupported(f"activation {act}")


def _batch_norm(m, x):
    if not m.track_running_stats or m.running_mean is None:
        raise Unsupported("batch norm without running statistics")
    shape = [-1] + [1] * (x.ndim - 2)
    scale = ops.rsqrt(_param(m.running_var) + m.eps)
    if m.weight is not None:
        scale = scale * _param(m.weight)
    shift = -_param(m.running_mean) * scale
    if m.bias is not None:
        shift = shift + _param(m.bias)
    return x * ops.reshape(scale, shape) + ops.reshape(shift, shape)


def _conv_module(m, x):
    if m.padding_mode != "zeros":
        raise Unsupported(f"padding_mode={m.padding_mode}")
    if isinstance(m, nn.Conv1d):
        y = conv(ops.unsqueeze(x, [2]), ops.unsqueeze(_param(m.weight), [2]), _param(m.bias), [1, m.stride[0]],
                 m.padding if isinstance(m.padding, str) else [0, m.padding[0]], [1, m.dilation[0]], m.groups)
        return ops.squeeze(y, axes=[2])
    return conv(x, _param(m.weight), _param(m.bias), m.stride, m.padding, m.dilation, m.groups)


def _conv_transpose_module(m, x, output_size=None):
    if output_size is not None or m.padding_mode != "zeros":
        raise Unsupported(f"{type(m).__name__} with output_size or a padding mode")
    pads = list(m.padding)
    return conv_transpose_nd(x, _param(m.weight), _param(m.bias), list(m.stride), list(m.dilation), m.groups,
                             pads, pads, list(m.output_padding))


def _conv3d_module(m, x):
    if m.padding_mode != "zeros" or isinstance(m.padding, str):
        raise Unsupported("Conv3d with a padding mode or string padding")
    pads = list(m.padding)
    return conv_nd(pad_or_crop(x, [0, 0] + pads + [0, 0] + pads), _param(m.weight), _param(m.bias), list(m.stride),
                   list(m.dilation), m.groups)


def _adaptive_avg_pool(m, x):
    out = _pair(m.output_size)
    size = list(x.shape[-2:])
    out = [s if o is None else o for o, s in zip(out, size)]
    if out == [1, 1]:
        return ops.reduce_mean(x, axes=[-2, -1], keepdims=True)
    if any(s % o for s, o in zip(size, out)):
        raise Unsupported(f"adaptive pooling of {size} to {out} (sizes that do not divide)")
    kernel = [s // o for s, o in zip(size, out)]
    return ops.avg_pool2d(x, kernel, strides=kernel)


def multi_head_attention(m, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                         average_attn_weights=True):
    if m.bias_k is not None or m.add_zero_attn:
        raise Unsupported("attention with bias_k/bias_v or add_zero_attn")
    if not m.batch_first:  # work batch-first: [N, L, E]
        query, key, value = (ops.transpose(t, perm=[1, 0, 2]) for t in (query, key, value))
    E, H = m.embed_dim, m.num_heads
    D = E // H
    if m._qkv_same_embed_dim:
        w_q, w_k, w_v = (_param(w) for w in m.in_proj_weight.chunk(3))
    else:
        w_q, w_k, w_v = _param(m.q_proj_weight), _param(m.k_proj_weight), _param(m.v_proj_weight)
    b_q, b_k, b_v = (None,) * 3 if m.in_proj_bias is None else (_param(b) for b in m.in_proj_bias.chunk(3))

    def heads(x, w, b):  # [N, L, E] -> [N, H, L, D]
        n, length = x.shape[0], x.shape[1]
        return ops.transpose(ops.reshape(linear(x, w, b), [n, length, H, D]), perm=[0, 2, 1, 3])
    q, k, v = heads(query, w_q, b_q), heads(key, w_k, b_k), heads(value, w_v, b_v)
    mask = None
    if attn_mask is not None:  # [L, S] or [N*H, L, S]; boolean True means "masked out"
        mask = ops.where(attn_mask, -math.inf, 0.0) if attn_mask.dtype == getattr(_C, "bool") else attn_mask
        if mask.ndim == 3:
            mask = ops.reshape(mask, [-1, H] + list(mask.shape[1:]))
    if key_padding_mask is not None:  # [N, S]
        pad = key_padding_mask
        pad = ops.where(pad, -math.inf, 0.0) if pad.dtype == getattr(_C, "bool") else pad
        pad = ops.unsqueeze(pad, [1, 2])
        mask = pad if mask is None else mask + pad
    probs = ops.softmax(ops.matmul(q, k, transpose_b=True), axis=-1, mask=mask, scale=1 / math.sqrt(D))
    out = ops.transpose(ops.matmul(probs, v), perm=[0, 2, 1, 3])
    out = linear(ops.reshape(out, [out.shape[0], out.shape[1], E]), _param(m.out_proj.weight), _param(m.out_proj.bias))
    if not m.batch_first:
        out = ops.transpose(out, perm=[1, 0, 2])
    if not need_weights:
        return out, None
    return out, (ops.reduce_mean(probs, axes=[1]) if average_attn_weights else probs)


def transformer_encoder_layer(m, src, src_mask=None, src_key_padding_mask=None):
    act = _activation(m.activation)

    def norm(layer, x):
        return ops.layer_norm(x, scale=_param(layer.weight), bias=_param(layer.bias), epsilon=layer.eps)

    def attend(x):
        return multi_head_attention(m.self_attn, x, x, x, key_padding_mask=src_key_padding_mask,
                                    need_weights=False, attn_mask=src_mask)[0]

    def feed_forward(x):
        h = act(linear(x, _param(m.linear1.weight), _param(m.linear1.bias)))
        return linear(h, _param(m.linear2.weight), _param(m.linear2.bias))

    x = src
    if m.norm_first:
        x = x + attend(norm(m.norm1, x))
        return x + feed_forward(norm(m.norm2, x))
    x = norm(m.norm1, x + attend(x))
    return norm(m.norm2, x + feed_forward(x))


def recurrent(m, x, state=None):
    """nn.LSTM / nn.GRU / nn.RNN unrolled over the (static) sequence (esgraph/_recurrent.py)."""
    is_lstm, is_gru = isinstance(m, nn.LSTM), isinstance(m, nn.GRU)
    if getattr(m, "proj_size", 0):
        raise Unsupported("LSTM with proj_size")
    if not m.batch_first:
        x = ops.transpose(x, perm=[1, 0, 2])  # [N, T, F]
    n = x.shape[0]
    dirs, hidden = 2 if m.bidirectional else 1, m.hidden_size
    h0, c0 = (state if is_lstm else (state, None)) if state is not None else (None, None)
    h_n, c_n = [], []
    for layer in range(m.num_layers):
        outs = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            w_hh = _param(getattr(m, "weight_hh" + sfx))
            b_ih, b_hh = (getattr(m, name + sfx) if m.bias else None for name in ("bias_ih", "bias_hh"))
            k = layer * dirs + d
            h = ops.fill([n, hidden]) if h0 is None else _row(h0, k)
            c = ops.fill([n, hidden]) if c0 is None else _row(c0, k)
            if is_lstm:
                bias = None if b_ih is None else _param(b_ih + b_hh)
                cell = lstm_cell(w_hh, hidden, "ifgo")
            elif is_gru:  # the candidate's recurrent bias is applied inside the reset gate
                bias = None if b_ih is None else _param(b_ih + torch.cat([b_hh[:2 * hidden], torch.zeros(hidden)]))
                cell = gru_cell(w_hh, None if b_hh is None else _param(b_hh[2 * hidden:]), hidden, "rzn", True)
            else:
                bias = None if b_ih is None else _param(b_ih + b_hh)
                cell = rnn_cell(w_hh, ops.tanh if m.nonlinearity == "tanh" else ops.relu)
            y, h, c = scan(linear(x, _param(getattr(m, "weight_ih" + sfx)), bias), h, c, cell, reverse=bool(d))
            outs.append(y)
            h_n.append(ops.unsqueeze(h, [0]))
            c_n.append(ops.unsqueeze(c, [0]))
        x = outs[0] if dirs == 1 else ops.concat(outs, 2)
    out = x if m.batch_first else ops.transpose(x, perm=[1, 0, 2])
    h_n = ops.concat(h_n, 0)
    return (out, (h_n, ops.concat(c_n, 0))) if is_lstm else (out, h_n)


def _embedding(m, idx):
    if m.max_norm is not None:
        raise Unsupported("Embedding with max_norm (it renormalizes the weights as it reads them)")
    return ops.gather(_param(m.weight), idx, axis=0)


def _row(state, k):
    """Layer-and-direction k of an initial state [layers * directions, N, H]."""
    return ops.squeeze(ops.slice(state, [k], [k + 1], axes=[0]), axes=[0])


def _layer_norm(m, x):
    if m.weight is None and m.elementwise_affine:
        raise Unsupported("layer norm without weights")
    return ops.layer_norm(x, scale=_param(m.weight), bias=_param(m.bias), axis=-len(m.normalized_shape),
                          epsilon=m.eps)


MODULES = {
    nn.Linear: lambda m, x: linear(x, _param(m.weight), _param(m.bias)),
    nn.Conv1d: _conv_module, nn.Conv2d: _conv_module, nn.Conv3d: _conv3d_module,
    nn.ConvTranspose2d: _conv_transpose_module, nn.ConvTranspose3d: _conv_transpose_module,
    nn.BatchNorm1d: _batch_norm, nn.BatchNorm2d: _batch_norm,
    nn.LayerNorm: _layer_norm,
    nn.Embedding: lambda m, idx: _embedding(m, idx),
    nn.ReLU: lambda m, x: ops.relu(x), nn.GELU: lambda m, x: ops.gelu(x, approximate=m.approximate),
    nn.SiLU: lambda m, x: ops.silu(x), nn.Sigmoid: lambda m, x: ops.sigmoid(x), nn.Tanh: lambda m, x: ops.tanh(x),
    nn.LeakyReLU: lambda m, x: ops.leaky_relu(x, alpha=m.negative_slope),
    nn.Hardswish: lambda m, x: ops.hard_swish(x), nn.ELU: lambda m, x: ops.elu(x, alpha=m.alpha),
    nn.Mish: lambda m, x: ops.mish(x), nn.Softplus: lambda m, x: softplus(x, m.beta),
    nn.Softmax: lambda m, x: ops.softmax(x, axis=m.dim), nn.LogSoftmax: lambda m, x: ops.log_softmax(x, axis=m.dim),
    nn.Dropout: lambda m, x: x, nn.Identity: lambda m, x, *a, **k: x,
    nn.MaxPool2d: lambda m, x: max_pool(x, m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode,
                                        m.return_indices),
    nn.AvgPool2d: lambda m, x: avg_pool(x, m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad,
                                        m.divisor_override),
    nn.AdaptiveAvgPool2d: _adaptive_avg_pool, nn.Flatten: lambda m, x: flatten(x, m.start_dim, m.end_dim),
    nn.MultiheadAttention: multi_head_attention, nn.TransformerEncoderLayer: transformer_encoder_layer,
    nn.LSTM: recurrent, nn.GRU: recurrent, nn.RNN: recurrent,
}
