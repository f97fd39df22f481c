"""ONNX's TfIdfVectorizer over integer tokens, imported and run, against ONNX Runtime on the same
models: pools of 1- to 3-grams, gaps between an n-gram's items, every mode with and without
weights (weight i is output index i's, as ONNX Runtime reads it; ONNX's text gives it to the
i-th n-gram of the pool, the same when the pool is listed in output order), a row or a batch of
rows, int32 and int64 tokens; and the refusals by name. ONNX's own seven cases run in
tests/conformance."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import esgraph  # noqa: E402
import esgraph.onnx  # noqa: E402

from onnx_models import F32, make, vi  # noqa: E402


def _pool(rng, vocabulary):
    """1-, 2- and 3-grams over `vocabulary` tokens, no n-gram twice: (pool_int64s, ngram_counts)."""
    grams = [sorted({tuple(rng.integers(0, vocabulary, n)) for _ in range(6)}) for n in (1, 2, 3)]
    counts = np.cumsum([0] + [len(g) * n for n, g in zip((1, 2, 3), grams)])[:3]
    return [int(t) for g in grams for gram in g for t in gram], [int(c) for c in counts], sum(len(g) for g in grams)


CASES = [(mode, low, high, skips, weighted, shape, dtype)
         for mode, weighted in (("TF", False), ("IDF", False), ("IDF", True), ("TFIDF", True), ("TFIDF", False))
         for low, high, skips, shape, dtype in ((1, 3, 2, [3, 12], TensorProto.INT64), (2, 2, 0, [12], TensorProto.INT32),
                                                (1, 1, 4, [2, 7], TensorProto.INT32), (2, 3, 5, [4, 9], TensorProto.INT64))]


@pytest.mark.parametrize("mode, low, high, skips, weighted, shape, dtype", CASES,
                         ids=[f"{c[0]}{'-w' if c[4] else ''}-{c[1]}to{c[2]}-skip{c[3]}-{'x'.join(map(str, c[5]))}" for c in CASES])
def test_against_onnx_runtime(mode, low, high, skips, weighted, shape, dtype):
    rng = np.random.default_rng(len(shape) * 100 + skips * 10 + low)
    pool, counts, total = _pool(rng, 4)
    # output indexes in any order; in TF mode two left unused (ONNX Runtime 1.26 aborts the process
    # when IDF or TFIDF weights are read at output indexes past the pool's count)
    indexes = rng.permutation(total + 2)[:total] if mode == "TF" else rng.permutation(total)
    attrs = dict(mode=mode, min_gram_length=low, max_gram_length=high, max_skip_count=skips, ngram_counts=counts,
                 ngram_indexes=[int(i) for i in indexes], pool_int64s=pool)
    if weighted:
        attrs["weights"] = [float(w) for w in rng.uniform(0.5, 2.0, total)]
    def model_of(attrs):
        return make([helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)], [vi("x", dtype, shape)], [vi("y", F32, None)], opset=17)
    model = model_of(attrs)
    x = rng.integers(0, 4, shape).astype(np.int64 if dtype == TensorProto.INT64 else np.int32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = esgraph.compile(esgraph.onnx.load(model))(x)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert want.any()  # the case counts something


@pytest.mark.parametrize("attrs, message", [
    (dict(pool_strings=["a", "b"], pool_int64s=None), "pool_strings: string tensors are not supported"),
    (dict(mode="BM25"), "mode 'BM25' \\(ONNX defines TF, IDF, TFIDF\\)"),
    (dict(ngram_indexes=[0]), "ngram_indexes holds 1 entries for the pool's 2 n-grams"),
    (dict(ngram_counts=[0, 1]), "the 1-grams' span \\[0, 1\\)|the 2-grams' span \\[1, 2\\) of the pool is no whole count"),
])
def test_refusals_name_the_attribute(attrs, message):
    base = dict(mode="TF", min_gram_length=1, max_gram_length=1, max_skip_count=0, ngram_counts=[0], ngram_indexes=[0, 1],
                pool_int64s=[3, 5])
    base.update(attrs)
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **{k: v for k, v in base.items() if v is not None})
    model = make([node], [vi("x", TensorProto.INT64, [4])], [vi("y", F32, None)], opset=17)
    with pytest.raises(esgraph.onnx.ImportFailed, match=message):
        esgraph.onnx.load(model)
