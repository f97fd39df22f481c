"""The transformer ops ONNX added after opset 18 (Attention, RMSNormalization,
RotaryEmbedding, Gelu, Swish, GroupNormalization-21), imported and run against numpy written
from their definitions."""
import math

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnx_models import F32, I64, close, init, make, rand, run, vi


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_attention(q, k, v, mask=None, causal_offset=None, scale=None):
    """[b, h, s, d] inputs, k/v with fewer heads repeated in turn; mask added; causal: j <= i + offset."""
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(0, 1, 3, 2) * scale
    if mask is not None:
        scores = scores + mask
    if causal_offset is not None:
        i, j = np.arange(q.shape[2])[:, None], np.arange(k.shape[2])[None, :]
        scores = np.where(j <= i + causal_offset, scores, -np.inf)
    return np_softmax(scores) @ v


def heads(x, h):
    b, s, hidden = x.shape
    return x.reshape(b, s, h, hidden // h).transpose(0, 2, 1, 3)


def test_attention_3d_grouped_causal_with_a_cache():
    b, s, past, d, hq, hkv = 2, 3, 4, 8, 4, 2
    q, k, v = rand(b, s, hq * d, seed=1), rand(b, s, hkv * d, seed=2), rand(b, s, hkv * d, seed=3)
    pk, pv = rand(b, hkv, past, d, seed=4), rand(b, hkv, past, d, seed=5)
    node = helper.make_node("Attention", ["q", "k", "v", "", "pk", "pv"], ["y", "present_k", "present_v"],
                            q_num_heads=hq, kv_num_heads=hkv, is_causal=1)
    model = make([node], [vi("q", F32, [b, s, hq * d]), vi("k", F32, [b, s, hkv * d]), vi("v", F32, [b, s, hkv * d]),
                          vi("pk", F32, [b, hkv, past, d]), vi("pv", F32, [b, hkv, past, d])],
                 [vi("y"), vi("present_k"), vi("present_v")], opset=23)
    y, present_k, present_v = run(model, q, k, v, pk, pv)
    full_k, full_v = np.concatenate([pk, heads(k, hkv)], 2), np.concatenate([pv, heads(v, hkv)], 2)
    want = np_attention(heads(q, hq), full_k, full_v, causal_offset=past)
    close(y, want.transpose(0, 2, 1, 3).reshape(b, s, hq * d), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(present_k, full_k)
    np.testing.assert_array_equal(present_v, full_v)


def test_attention_4d_boolean_mask_and_scale_and_a_fully_masked_row():
    q, k, v = rand(1, 2, 3, 4, seed=6), rand(1, 2, 5, 4, seed=7), rand(1, 2, 5, 4, seed=8)
    mask = np.random.default_rng(9).random((3, 5)) > 0.3
    mask[1] = False  # no key for query 1: its row is zeros, not NaN
    node = helper.make_node("Attention", ["q", "k", "v", "m"], ["y"], scale=0.3)
    model = make([node], [vi("q", F32, [1, 2, 3, 4]), vi("k", F32, [1, 2, 5, 4]), vi("v", F32, [1, 2, 5, 4]),
                          vi("m", TensorProto.BOOL, [3, 5])], [vi("y")], opset=23)
    y = run(model, q, k, v, mask)[0]
    with np.errstate(invalid="ignore"):  # numpy's softmax of the masked row is NaN
        want = np_attention(q, k, v, mask=np.where(mask, 0, -np.inf).astype(np.float32), scale=0.3)
    want[:, :, 1] = 0
    close(y, want.astype(np.float32), rtol=1e-4, atol=1e-5)


def test_rms_normalization():
    x, scale = rand(2, 3, 8, seed=10), rand(8, seed=11)
    model = make([helper.make_node("RMSNormalization", ["x", "s"], ["y"], epsilon=1e-3)],
                 [vi("x", F32, [2, 3, 8]), vi("s", F32, [8])], [vi("y")], opset=23)
    want = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-3) * scale
    close(run(model, x, scale)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_with_position_ids_and_a_partial_rotation(interleaved):
    b, s, h, d, dim = 2, 3, 2, 8, 4
    x = rand(b, h, s, d, seed=12)
    angles = rand(10, dim // 2, seed=13)
    cos, sin = np.cos(angles), np.sin(angles)
    pos = np.array([[0, 1, 2], [5, 6, 9]], np.int64)
    node = helper.make_node("RotaryEmbedding", ["x", "c", "s", "p"], ["y"], interleaved=interleaved,
                            rotary_embedding_dim=dim)
    model = make([node], [vi("x", F32, [b, h, s, d]), vi("c", F32, [10, dim // 2]), vi("s", F32, [10, dim // 2]),
                          vi("p", I64, [b, s])], [vi("y")], opset=23)
    c, sn = cos[pos][:, None], sin[pos][:, None]  # [b, 1, s, dim/2]
    want = x.copy()
    if interleaved:
        x1, x2 = x[..., 0:dim:2], x[..., 1:dim:2]
        want[..., 0:dim:2], want[..., 1:dim:2] = c * x1 - sn * x2, sn * x1 + c * x2
    else:
        x1, x2 = x[..., :dim // 2], x[..., dim // 2:dim]
        want[..., :dim // 2], want[..., dim // 2:dim] = c * x1 - sn * x2, sn * x1 + c * x2
    close(run(model, x, cos, sin, pos)[0], want, rtol=1e-5, atol=1e-6)


def test_gelu_tanh_and_swish():
    x = rand(4, 5, seed=14) * 3
    model = make([helper.make_node("Gelu", ["x"], ["g"], approximate="tanh"),
                  helper.make_node("Swish", ["x"], ["w"], alpha=0.5)], [vi("x", F32, [4, 5])], [vi("g"), vi("w")], opset=24)
    g, w = run(model, x)
    close(g, 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))), rtol=1e-5, atol=1e-5)
    close(w, x / (1 + np.exp(-0.5 * x)), rtol=1e-5, atol=1e-6)


def test_group_normalization_21_scales_per_channel():
    x, scale, bias = rand(2, 6, 3, 3, seed=15), rand(6, seed=16), rand(6, seed=17)
    model = make([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3, epsilon=1e-4)],
                 [vi("x", F32, [2, 6, 3, 3])], [vi("y")], [init("s", scale), init("b", bias)], opset=21)
    g = x.reshape(2, 3, -1)
    normalized = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-4)).reshape(x.shape)
    close(run(model, x)[0], normalized * scale[:, None, None] + bias[:, None, None], rtol=1e-4, atol=1e-5)
