"""Shared setup of the codegen tests.

Puts codegen/ on sys.path so that `import esgraph_codegen` works without installing it, and
offers `load_yaml`, which writes YAML snippets into a temporary `op_defs/` folder and loads them
with the real inference rule names. Problems then read `op_defs/<file>:<line>: ...`.
"""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CODEGEN = REPO / "codegen"
if str(CODEGEN) not in sys.path:
    sys.path.insert(0, str(CODEGEN))

from esgraph_codegen import loader  # noqa: E402

RULES_FILE = REPO / "compiler_core" / "ir" / "infer_rules.def"
OP_DEFS = REPO / "op_defs"
HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "test_ops.yaml"


@pytest.fixture(scope="session")
def rules():
    names = loader.read_rules(RULES_FILE)
    assert names, f"no ESG_INFER_RULE(...) lines in {RULES_FILE}"
    return names


@pytest.fixture
def load_yaml(tmp_path, rules):
    """load_yaml(text) or load_yaml({"a.yaml": text, "b.yaml": text}) -> OpSet.

    The text is dedented, written to <tmp>/op_defs/ (as `ops.yaml` when only a text is given)
    and loaded with loader.load(); a mistake raises loader.LoadError.
    """
    def load(files):
        if isinstance(files, str):
            files = {"ops.yaml": files}
        op_defs = tmp_path / "op_defs"
        op_defs.mkdir(exist_ok=True)
        paths = []
        for name, text in files.items():
            path = op_defs / name
            path.write_text(textwrap.dedent(text), encoding="utf-8")
            paths.append(path)
        return loader.load(paths, rules, root=tmp_path)
    return load


@pytest.fixture(scope="session")
def fixture_opset(rules):
    """The test ops of fixtures/test_ops.yaml; locations read `fixtures/test_ops.yaml:<line>`."""
    return loader.load([FIXTURE], rules, root=HERE)


def split_args(call_args: str):
    """Splits the argument list `a, {1, 2}, f(x, y)` at the commas outside brackets."""
    args, depth, start = [], 0, 0
    for i, ch in enumerate(call_args):
        depth += ch in "({["
        depth -= ch in ")}]"
        if ch == "," and depth == 0:
            args.append(call_args[start:i].strip())
            start = i + 1
    return args + [call_args[start:].strip()]


@pytest.fixture(name="split_args")
def split_args_fixture():
    return split_args
