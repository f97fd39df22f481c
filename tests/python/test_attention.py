"""The attention op from Python: every layout against numpy (f32 on the CPU's kernel, f64 on the
reference one), its bad input, and PyTorch's exported transformers compiling into it."""
import os
import re
import tempfile

import numpy as np
import pytest

import esgraph
import esgraph.onnx
from esgraph import ops
from torch_onnx import export_onnx

RNG = np.random.default_rng(7)


def numpy_attention(q, k, v, mask, heads, scale, layout):
    """softmax(scale·q·kᵀ + mask)·v per head, in float64, through [batch, heads, seq, size]."""
    def split(x):
        if layout == "bhsd":
            return x
        if layout == "sbe":
            x = x.transpose(1, 0, 2)
        b, s, e = x.shape
        return x.reshape(b, s, heads, e // heads).transpose(0, 2, 1, 3)

    qh, kh, vh = (split(x.astype(np.float64)) for x in (q, k, v))
    scores = qh @ kh.transpose(0, 1, 3, 2) * (scale or 1 / np.sqrt(qh.shape[-1]))
    if mask is not None:
        scores = scores + mask
    p = np.exp(scores - scores.max(-1, keepdims=True))
    y = (p / p.sum(-1, keepdims=True)) @ vh
    if layout == "bhsd":
        return y
    b, h, s, d = y.shape
    y = y.transpose(0, 2, 1, 3).reshape(b, s, h * d)
    return y.transpose(1, 0, 2) if layout == "sbe" else y


# layout, q, k, v shapes, heads, mask shape (broadcast to [batch, heads, q_seq, kv_seq])
LAYOUTS = [
    ("bhsd", (2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 4), 1, (2, 1, 1, 7)),
    ("bhsd", (1, 4, 1, 16), (1, 4, 9, 16), (1, 4, 9, 16), 4, None),  # a decoder step over its cache
    ("bse", (2, 5, 24), (2, 7, 24), (2, 7, 12), 3, (5, 7)),
    ("bse", (2, 33, 64), (2, 300, 64), (2, 300, 64), 2, (2, 2, 33, 300)),  # several blocks of query rows
    ("sbe", (5, 2, 24), (7, 2, 24), (7, 2, 24), 4, (2, 4, 1, 7)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("layout, qs, ks, vs, heads, ms", LAYOUTS)
@pytest.mark.parametrize("scale", [0.0, 0.3])
def test_every_layout_matches_numpy(layout, qs, ks, vs, heads, ms, scale, dtype):
    q, k, v = (RNG.standard_normal(s).astype(dtype) for s in (qs, ks, vs))
    mask = RNG.standard_normal(ms).astype(dtype) if ms else None
    esg_dtype = esgraph.f32 if dtype == np.float32 else esgraph.f64
    with esgraph.GraphBuilder() as b:
        ins = [b.input(name, esg_dtype, list(x.shape)) for name, x in zip("qkvm", (q, k, v, mask)) if x is not None]
        y = ops.attention(*ins[:3], mask=ins[3] if mask is not None else None, num_heads=heads if layout != "bhsd" else 1,
                          scale=scale, seq_first=layout == "sbe")
    model = esgraph.compile(b.build([y]))
    got = model.run([x for x in (q, k, v, mask) if x is not None])[0]
    want = numpy_attention(q, k, v, mask, heads if layout != "bhsd" else qs[1], scale, layout)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5 if dtype == np.float32 else 1e-12)
    kernel = "fast" if dtype == np.float32 else "reference"
    assert model.stats()[f"{kernel}_kernels"] == 1


def test_no_keys_gives_zeros_as_the_products_would():
    with esgraph.GraphBuilder() as b:
        y = ops.attention(b.input("q", esgraph.f32, [1, 2, 3, 4]), b.input("k", esgraph.f32, [1, 2, 0, 4]),
                          b.input("v", esgraph.f32, [1, 2, 0, 5]))
    out = esgraph.compile(b.build([y])).run([np.ones((1, 2, 3, 4), np.float32), np.ones((1, 2, 0, 4), np.float32),
                                             np.ones((1, 2, 0, 5), np.float32)])[0]
    assert out.shape == (1, 2, 3, 5) and not out.any()


@pytest.mark.parametrize("shapes, options, error, message", [
    (([2, 5], [2, 5], [2, 5]), {}, esgraph.ShapeError, "rank 3"),
    (([2, 5, 8], [2, 4, 7, 8], [2, 4, 7, 8]), {}, esgraph.ShapeError, "one rank"),
    (([2, 5, 12], [2, 7, 12], [2, 7, 12]), {"num_heads": 5}, esgraph.ShapeError, "not a multiple of `num_heads`"),
    (([2, 5, 12], [3, 7, 12], [3, 7, 12]), {}, esgraph.ShapeError, "the batch differs"),
    (([2, 5, 12], [2, 7, 12], [2, 6, 12]), {}, esgraph.ShapeError, "key/value sequence differs"),
    (([2, 5, 12], [2, 7, 8], [2, 7, 12]), {}, esgraph.ShapeError, "head size differs"),
    (([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4]), {"seq_first": True}, esgraph.AttributeValueError, "rank-3 inputs only"),
    (([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4]), {"num_heads": 3}, esgraph.AttributeValueError, "heads"),
    (([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4]), {"num_heads": 0}, esgraph.AttributeValueError, "num_heads"),
])
def test_bad_shapes_and_attributes_fail_where_written(shapes, options, error, message):
    with esgraph.GraphBuilder() as b:
        q, k, v = (b.input(n, esgraph.f32, s) for n, s in zip("qkv", shapes))
        with pytest.raises(error, match=re.escape(message)):
            ops.attention(q, k, v, **options)


def test_a_mask_that_would_grow_the_scores_is_refused():
    with esgraph.GraphBuilder() as b:
        q = b.input("q", esgraph.f32, [2, 5, 12])
        with pytest.raises(esgraph.ShapeError, match=re.escape("cannot broadcast [2,3,5,5] with [3,1,1,5]")):
            ops.attention(q, q, q, mask=b.input("m", esgraph.f32, [3, 1, 1, 5]), num_heads=3)
        with pytest.raises(esgraph.ShapeError, match="must broadcast to the scores"):
            ops.attention(q, q, q, mask=b.input("wide", esgraph.f32, [4, 2, 3, 5, 5]), num_heads=3)
        with pytest.raises(esgraph.DTypeError):
            ops.attention(q, q, b.input("v", esgraph.f64, [2, 5, 12]))


def launches_named(model, op):
    return len(re.findall(rf'label="{op}[ \\]', model.to_dot()))


def compiled_export(module, x):
    """The module exported by PyTorch, imported and compiled; and PyTorch's own output."""
    import torch
    path = tempfile.NamedTemporaryFile(suffix=".onnx", delete=False).name
    try:
        export_onnx(module, (x,), path, 14)
        model = esgraph.compile(esgraph.onnx.load(path))
    finally:
        os.unlink(path)
    with torch.no_grad():
        return model, module(x).numpy()


@pytest.mark.parametrize("batch_first", [True, False])
def test_torch_encoder_layers_compile_their_attention_into_one_launch(batch_first):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=batch_first).eval()
    x = torch.randn(3, 10, 64) if batch_first else torch.randn(10, 3, 64)
    model, want = compiled_export(layer, x)
    np.testing.assert_allclose(model.run([x.numpy()])[0], want, rtol=1e-4, atol=1e-4)
    # PyTorch 2's export scales q and kᵀ by √scale each: both fold into the one launch.
    assert launches_named(model, "attention") == 1
    assert launches_named(model, "softmax") == 0
    assert launches_named(model, "mul") == 0


class SplitHeads:
    """A Hugging Face style self-attention (reshape to [batch, seq, heads, size], transpose,
    causal mask added to the scaled scores), built when torch is there."""

    def __new__(cls, width, heads):
        import torch

        class Module(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.qkv = torch.nn.Linear(width, 3 * width)
                self.out = torch.nn.Linear(width, width)

            def forward(self, x):
                b, s, e = x.shape
                q, k, v = self.qkv(x).split(e, dim=-1)
                q, k, v = (t.reshape(b, s, heads, e // heads).transpose(1, 2) for t in (q, k, v))
                scores = q @ k.transpose(-1, -2) / (e // heads) ** 0.5
                causal = torch.triu(torch.full((s, s), -1e9), diagonal=1)
                p = torch.softmax(scores + causal, dim=-1)
                return self.out((p @ v).transpose(1, 2).reshape(b, s, e))

        return Module()


def test_hugging_face_style_attention_with_a_causal_mask_reads_its_heads_in_place():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    module = SplitHeads(32, 4).eval()
    x = torch.randn(2, 9, 32)
    model, want = compiled_export(module, x)
    np.testing.assert_allclose(model.run([x.numpy()])[0], want, rtol=1e-4, atol=1e-5)
    assert launches_named(model, "attention") == 1
    assert launches_named(model, "transpose") == 0


def test_the_simulated_ascend_device_runs_attention_as_its_pieces():
    q = RNG.standard_normal((2, 5, 24)).astype(np.float32)
    k = RNG.standard_normal((2, 7, 24)).astype(np.float32)
    with esgraph.GraphBuilder() as b:
        y = ops.attention(b.input("q", esgraph.f32, [2, 5, 24]), b.input("k", esgraph.f32, [2, 7, 24]),
                          b.input("v", esgraph.f32, [2, 7, 24]), num_heads=3)
    graph = b.build([y])
    want = numpy_attention(q, k, k, None, 3, 0.0, "bse")
    got = esgraph.compile(graph, backend="ascend-sim").run([q, k, k])[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
