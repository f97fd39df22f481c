"""Python callers across API versions: code written for API 1 runs unchanged, and the options
API 2 added (softmax's `mask` input and `scale` attribute) are keyword-only extras."""
import numpy as np
import pytest

import esgraph
from esgraph import ops


def test_api1_calls_of_softmax_run_unchanged():
    with esgraph.GraphBuilder() as b:
        x = b.input("x", esgraph.f32, ["batch", 8])
        assert ops.softmax(x).shape == ("batch", 8)
        assert ops.softmax(x, axis=0).shape == ("batch", 8)
    assert "softmax" in str(b.build([ops.softmax(b.input("y", esgraph.f32, [2]))]))


def test_api2_options_are_keyword_only():
    with esgraph.GraphBuilder() as b:
        scores = b.input("scores", esgraph.f32, [2, 4, 8, 8])
        mask = np.where(np.tril(np.ones((8, 8))) > 0, 0.0, -1e9)
        out = ops.softmax(scores, mask=mask, scale=0.125)
        assert out.shape == (2, 4, 8, 8) and out.dtype == esgraph.f32
        assert "scale=0.125" in str(b.build([out]))
    with esgraph.GraphBuilder() as b:
        with pytest.raises(TypeError):
            ops.softmax(b.input("x", esgraph.f32, [2]), -1)  # axis is keyword-only


def test_a_mask_that_would_grow_the_scores_is_refused():
    with esgraph.GraphBuilder() as b:
        scores = b.input("scores", esgraph.f32, [4, 8])
        with pytest.raises(esgraph.ShapeError, match="must broadcast to x's shape"):
            ops.softmax(scores, mask=b.input("m", esgraph.f32, [2, 4, 8]))
