"""Writes tests/compat/fixtures/model-v1.esgm, the compiled-model file of format version 1 that
every later esgraph must load (tests/python/test_model_file.py checks it against numpy). Run it
once per new format version, with the version in the name; never rewrite an old fixture.

    PYTHONPATH=build/default/python .venv/bin/python tests/compat/write_model_fixture.py
"""
import os

import numpy as np

import esgraph
from esgraph import ops


def fixture_graph():
    """relu(x @ w1 + b1) @ w2 over a symbolic batch, its weights from arange (nothing random)."""
    w1 = (np.arange(16 * 32, dtype=np.float32).reshape(16, 32) % 7 - 3) / 8
    b1 = np.linspace(-1, 1, 32, dtype=np.float32)
    w2 = (np.arange(32 * 8, dtype=np.float32).reshape(32, 8) % 5 - 2) / 4
    with esgraph.GraphBuilder("fixture") as b:
        x = b.input("x", esgraph.f32, ["batch", 16])
        y = ops.relu(x @ w1 + b1) @ w2
    return b.build([y]), lambda x: np.maximum(x @ w1 + b1, 0) @ w2


if __name__ == "__main__":
    graph, _ = fixture_graph()
    model = esgraph.compile(graph, shapes={"batch": (1, 8)}, threads=1)
    model(np.zeros((8, 16), np.float32))  # the range's symbolic plan, planned for 8
    fixed = esgraph.compile(graph, shapes={"batch": 2})
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    model.save(os.path.join(out, "model-v1.esgm"))
    fixed.save(os.path.join(out, "model-v1-fixed.esgm"))
