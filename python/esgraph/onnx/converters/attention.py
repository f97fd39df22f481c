"""ONNX's Attention (opset 23; 24 adds nonpad_kv_seqlen, 25 sliding windows), written as the
ops its definition names: heads split from rank-3 inputs, the key/value cache joined, grouped
heads repeated, scores scaled, soft-capped, biased by the mask, the causal frontier and the
windows, a softmax, a product with the values. The compiler takes the scores-softmax-values
chain into one attention op where it matches (docs/architecture.md)."""
import math

import numpy as np

from ... import _C
from .. import _dtypes
from .registry import Unsupported, check_attrs, converts

ops = _C.ops


def _heads(t, heads, what):
    """[batch, seq, heads * size] as [batch, heads, seq, size]."""
    if t.ndim == 4:
        return t
    if t.ndim != 3 or not heads:
        raise Unsupported(f"{what} of rank {t.ndim}: rank 4, or rank 3 with q_num_heads and kv_num_heads")
    size = t.shape[2]
    if not isinstance(size, int) or size % heads:
        raise Unsupported(f"{what}'s hidden size {size} is not a multiple of its {heads} heads")
    return ops.transpose(ops.reshape(t, [0, 0, heads, size // heads]), perm=[0, 2, 1, 3])


def _static(*sizes):
    if not all(isinstance(s, int) for s in sizes):
        raise Unsupported(f"sequence lengths {list(sizes)} must be static")
    return sizes


def _constant(n, value, dtype):
    """A float scalar of `dtype` (bf16 by way of f32, which numpy has)."""
    if dtype == _C.bf16:
        return ops.cast(n.tensor(np.asarray(value, np.float32)), dtype)
    return n.tensor(np.asarray(value, _dtypes.numpy_dtype(dtype)))


@converts("Attention")
def attention(n):
    check_attrs(n, ("is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode", "scale", "softcap",
                    "softmax_precision", "left_window_size", "right_window_size"))
    rank = n.rank(0)
    q = _heads(n.x(0), n.attr("q_num_heads"), "Q")
    k = _heads(n.x(1), n.attr("kv_num_heads"), "K")
    v = _heads(n.x(2), n.attr("kv_num_heads"), "V")
    dtype = q.dtype
    if n.has(4) != n.has(5):
        raise Unsupported("past_key and past_value come together")
    past = n.shape(4)[2] if n.has(4) else 0
    if n.has(4):
        k, v = ops.concat([n.x(4), k], 2), ops.concat([n.x(5), v], 2)
    present = [k, v]
    q_heads, kv_heads = q.shape[1], k.shape[1]
    if q_heads != kv_heads:  # grouped queries: each key/value head serves q_heads / kv_heads of them, in turn
        if not isinstance(q_heads, int) or not isinstance(kv_heads, int) or q_heads % kv_heads:
            raise Unsupported(f"{q_heads} query heads over {kv_heads} key/value heads")
        group = q_heads // kv_heads
        k, v = (ops.reshape(ops.concat([ops.unsqueeze(t, [2])] * group, 2), [0, q_heads, -1, t.shape[3]]) for t in (k, v))
    q_len, kv_len = _static(q.shape[2], k.shape[2])
    head_size = q.shape[3]
    scale = n.attr("scale", None)
    scale = 1 / math.sqrt(head_size) if scale is None else scale
    root = _constant(n, math.sqrt(scale), dtype)  # q and k each scaled by its root, as ONNX defines it
    raw = scores = ops.matmul(q * root, ops.transpose(k * root, perm=[0, 1, 3, 2]))
    softcap = n.attr("softcap", 0.0)
    if softcap > 0:
        cap = _constant(n, softcap, dtype)
        scores = ops.tanh(scores / cap) * cap
    capped = scores
    bias = _bias(n, dtype, q_len, kv_len, past)
    if bias is not None:
        scores = scores + bias
    biased = scores
    precision = n.attr("softmax_precision", 0)
    if precision:
        scores = ops.cast(scores, _dtypes.esg_dtype(precision))
    probs = ops.softmax(scores, axis=-1)
    if bias is not None:  # a row every key is masked from gives zeros, not NaN
        masked = ops.is_inf(ops.reduce_max(bias, axes=[-1], keepdims=True), positive=False)
        probs = ops.where(masked, _constant(n, 0.0, probs.dtype), probs)
    probs = ops.cast(probs, dtype) if probs.dtype != dtype else probs
    y = ops.matmul(probs, v)
    if rank == 3:
        y = ops.reshape(ops.transpose(y, perm=[0, 2, 1, 3]), [0, 0, -1])
    if n.num_outputs < 4 or not n.proto.output[3]:
        return [y] + present
    mode = n.attr("qk_matmul_output_mode", 0)
    if mode not in (0, 1, 2, 3):
        raise Unsupported(f"qk_matmul_output_mode={mode}")
    qk = {0: raw, 1: capped, 2: biased, 3: probs}[mode]
    return [y] + present + [ops.cast(qk, dtype) if qk.dtype != dtype else qk]


def _bias(n, dtype, q_len, kv_len, past):
    """What is added to the scores: the mask (a boolean one as 0 or -inf, padded with masked
    keys up to the cache's length), the causal frontier, the windows and the padding of
    nonpad_kv_seqlen; None when there is nothing to add."""
    neg_inf, zero = _constant(n, -math.inf, dtype), _constant(n, 0.0, dtype)
    terms = []
    if n.has(3):
        mask = n.x(3)
        if mask.dtype == _C.bool:
            mask = ops.where(mask, zero, neg_inf)
        if mask.shape[-1] != kv_len:
            pad = [0] * (2 * mask.ndim)
            pad[-1] = kv_len - _static(mask.shape[-1])[0]
            mask = ops.pad(mask, pad, value=-math.inf)
        terms.append(mask)
    nonpad = n.x(6) if n.has(6) else None
    if nonpad is not None and n.has(4):
        raise Unsupported("nonpad_kv_seqlen with past_key and past_value")
    # Where query i stands among the keys: after the cache, or (nonpad_kv_seqlen) the last q_len of each batch's keys.
    # diff: the query's position less the key's, [q, kv] (or [batch, 1, q, kv] with nonpad_kv_seqlen).
    base = (np.arange(q_len).reshape(q_len, 1) - np.arange(kv_len).reshape(1, kv_len)).astype(np.int64)
    if nonpad is None:
        diff = n.tensor(base + past)
    else:
        offset = ops.cast(nonpad, _C.i64) - n.tensor(np.asarray(q_len, np.int64))
        diff = n.tensor(base) + ops.reshape(offset, [-1, 1, 1, 1])
    allowed = []
    if n.attr("is_causal", 0):
        allowed.append(ops.greater_equal(diff, n.tensor(np.asarray(0, np.int64))))
    left, right = n.attr("left_window_size", -1), n.attr("right_window_size", -1)
    if left >= 0:
        allowed.append(ops.less_equal(diff, n.tensor(np.asarray(left, np.int64))))
    if right >= 0:
        allowed.append(ops.less_equal(ops.neg(diff), n.tensor(np.asarray(right, np.int64))))
    for a in allowed:
        terms.append(ops.where(a, zero, neg_inf))
    if nonpad is not None:
        keep = ops.less(n.tensor(np.arange(kv_len, dtype=np.int64).reshape(1, kv_len)),
                        ops.reshape(ops.cast(nonpad, _C.i64), [-1, 1]))
        terms.append(ops.reshape(ops.where(keep, zero, neg_inf), [-1, 1, 1, kv_len]))
    if not terms:
        return None
    bias = terms[0]
    for t in terms[1:]:
        bias = bias + t
    return bias


@converts("RotaryEmbedding")
def rotary_embedding(n):
    """Each head's first rotary_embedding_dim values turned pairwise by the angle of the
    token's position: pairs are the two halves, or (interleaved) neighbours. Worked in the
    [batch, seq, heads, size] layout, with the caches [batch, seq, 1, dim / 2]."""
    check_attrs(n, ("interleaved", "num_heads", "rotary_embedding_dim"))
    x = n.x(0)
    if x.ndim == 4:
        tokens = ops.transpose(x, perm=[0, 2, 1, 3])
    elif x.ndim == 3 and n.attr("num_heads"):
        tokens = ops.reshape(x, [0, 0, n.attr("num_heads"), -1])
    else:
        raise Unsupported(f"an input of rank {x.ndim}: rank 4, or rank 3 with num_heads")
    size = tokens.shape[3]
    if not isinstance(size, int):
        raise Unsupported("the head size must be static")
    dim = n.attr("rotary_embedding_dim", 0) or size
    if dim % 2 or dim > size:
        raise Unsupported(f"rotary_embedding_dim {dim} for heads of {size}")
    cos, sin = n.x(1), n.x(2)
    if n.has(3):  # the caches hold every position: each token takes its own row
        cos, sin = (ops.gather(t, ops.cast(n.x(3), _C.i64), axis=0) for t in (cos, sin))
    cos, sin = (ops.unsqueeze(t, [2]) for t in (cos, sin))
    turned = ops.slice(tokens, [0], [dim], axes=[3])
    if n.attr("interleaved", 0):
        pairs = ops.reshape(turned, [0, 0, 0, dim // 2, 2])
        x1, x2 = (ops.squeeze(ops.slice(pairs, [k], [k + 1], axes=[4]), axes=[4]) for k in (0, 1))
    else:
        x1, x2 = ops.split(turned, [dim // 2, dim // 2], axis=3)
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if n.attr("interleaved", 0):
        turned = ops.reshape(ops.concat([ops.unsqueeze(real, [4]), ops.unsqueeze(imag, [4])], 4), [0, 0, 0, dim])
    else:
        turned = ops.concat([real, imag], 3)
    y = turned if dim == size else ops.concat([turned, ops.slice(tokens, [dim], [size], axes=[3])], 3)
    return ops.transpose(y, perm=[0, 2, 1, 3]) if x.ndim == 4 else ops.reshape(y, [0, 0, -1])
