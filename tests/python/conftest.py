"""Shared setup of the esgraph Python API suite.

The codegen package is put on sys.path so that the example tests can read op_defs/ with the
codegen's own loader (see esgraph_op_set.py) instead of keeping a copy of the YAML here.
"""
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "codegen") not in sys.path:
    sys.path.insert(0, str(REPO / "codegen"))

# Every model the suite compiles has its memory plan proven by the independent checker.
os.environ.setdefault("ESG_CHECK_PLANS", "1")
# A compile cache in the developer's environment would load models the tests mean to compile.
os.environ.pop("ESG_CACHE_DIR", None)

import esgraph  # noqa: E402


@pytest.fixture
def b():
    """A builder entered as `with`, so that constants and generator ops find it."""
    with esgraph.GraphBuilder("test") as builder:
        yield builder


@pytest.fixture
def mlp():
    """An ONNX MLP and its numpy reference, for the ONNX importer's suites (onnx_models.mlp_model)."""
    pytest.importorskip("onnx")
    from onnx_models import mlp_model
    return mlp_model()
