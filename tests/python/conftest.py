"""Shared fixtures of the esgraph Python API suite.

The op set comes from the YAML in op_defs/, read with the codegen's own loader, so the example
tests follow the YAML without keeping a copy of it here.
"""
import keyword
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "codegen"))

from esgraph_codegen import loader  # noqa: E402

import esgraph  # noqa: E402

OP_SET = loader.load_dir(REPO / "op_defs", REPO / "compiler_core/ir/infer_rules.def")


def py_name(op_name):
    """The name of an op in esgraph.ops: a trailing `_` where it is a Python keyword."""
    return op_name + "_" if keyword.iskeyword(op_name) else op_name


def shape_of(t):
    """A tensor's shape as a tuple (a convenience for comparing with numpy)."""
    return tuple(t.shape)


@pytest.fixture(scope="session")
def op_set():
    return OP_SET


@pytest.fixture
def b():
    """A builder entered as `with`, so that constants and generator ops find it."""
    with esgraph.GraphBuilder("test") as builder:
        yield builder


@pytest.fixture
def rng():
    """A seeded generator: the random shape tests are the same on every run."""
    return np.random.default_rng(20240611)
