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


def test_a_profiled_run_writes_a_chrome_trace(tmp_path):
    import json
    with esgraph.GraphBuilder() as b:
        x = b.input("x", esgraph.f32, [4, 8])
        y = ops.relu(x @ np.ones((8, 3), np.float32) + 1.0)
    model = esgraph.compile(b.build([y]))
    path = tmp_path / "trace.json"
    (out,) = model.profile(np.ones((4, 8), np.float32), path=str(path))
    np.testing.assert_array_equal(out, np.full((4, 3), 9, np.float32))
    events = json.loads(path.read_text())["traceEvents"]
    assert [e["name"] for e in events] == ["fused matmul add relu"]
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events)


def test_the_compiled_graph_exports_as_dot():
    with esgraph.GraphBuilder() as b:
        x = b.input("x", esgraph.f32, [4])
        y = ops.exp(x) + 1.0
    dot = esgraph.compile(b.build([y])).to_dot()
    assert dot.startswith('digraph "graph (compiled)"')
    assert "fused\\nexp\\nadd" in dot
