"""A BERT-style encoder defined here (Keras ships none): token and position embeddings, layers
of MultiHeadAttention (TF's Einsum products), LayerNormalization and a GELU feed-forward, with a
padding mask; frozen, and saved, against TensorFlow."""
import numpy as np
import pytest

import esgraph
from tf_models import Frozen, assert_matches_tensorflow, saved, serving_reference, spec, tf

keras = pytest.importorskip("keras")


def encoder(vocab=100, length=16, hidden=64, heads=4, layers=2):
    tokens = keras.Input((length,), dtype="int32", name="tokens")
    mask = keras.Input((length,), dtype="float32", name="mask")
    positions = keras.ops.arange(length)
    x = keras.layers.Embedding(vocab, hidden)(tokens) + keras.layers.Embedding(length, hidden)(positions)
    attention_mask = keras.ops.cast(mask[:, None, :] * mask[:, :, None], "bool")
    for _ in range(layers):
        a = keras.layers.MultiHeadAttention(heads, hidden // heads)(x, x, attention_mask=attention_mask)
        x = keras.layers.LayerNormalization(epsilon=1e-12)(x + a)
        f = keras.layers.Dense(hidden, activation="relu")(keras.layers.Dense(4 * hidden, activation="gelu")(x))
        x = keras.layers.LayerNormalization(epsilon=1e-12)(x + f)
    return keras.Model([tokens, mask], keras.layers.Dense(2)(x[:, 0]))


def _inputs(batch, length=16):
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 100, (batch, length)).astype(np.int32)
    mask = np.ones((batch, length), np.float32)
    mask[:, length - 3:] = 0  # padding at the end
    return tokens, mask


def test_frozen_encoder():
    model = encoder()
    frozen = Frozen(lambda t, m: model([t, m], training=False), spec(None, 16, dtype="int32"), spec(None, 16))
    assert any(n.op == "Einsum" for n in frozen.graph_def.node)
    for batch in (1, 4):
        assert_matches_tensorflow(frozen, *_inputs(batch))


def test_saved_encoder(tmp_path):
    path = saved(encoder(), tmp_path / "encoder", keras_export=True)
    graph = esgraph.tensorflow.load(path)
    compiled = esgraph.compile(graph)
    tokens, mask = _inputs(2)
    assert compiled.input_names == ["mask", "tokens"]  # a signature's inputs, sorted by key
    got = compiled.run({"tokens": tokens, "mask": mask})[0]
    want = serving_reference(path, tokens=tokens, mask=mask)[0]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * float(np.max(np.abs(want))))
