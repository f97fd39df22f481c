"""ONNX's node test suite under pytest: a case esgraph imports must give ONNX's expected
outputs. Cases it cannot import are skipped with the importer's reason (docs/conformance.md
lists them); a wrong result or a crash fails."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_node_suite as suite  # noqa: E402
from report import KNOWN_DEVIATIONS, model_scope, scope_of  # noqa: E402

import esgraph  # noqa: E402
import esgraph.onnx  # noqa: E402,F401

os.environ.setdefault("ESG_CHECK_PLANS", "1")
CASES = suite.collect()
OP_OF = suite.ops_of(CASES)
MODELS = suite.collect_models()


@pytest.mark.conformance
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node_case(case):
    op = OP_OF[case.name]
    why = scope_of(case.name, op)
    if why:
        pytest.skip(f"out of scope ({why})")
    result = suite.run_case(case, op, esgraph)
    if result.status == suite.UNSUPPORTED:
        pytest.skip(result.reason)
    if case.name in KNOWN_DEVIATIONS:
        assert result.status == suite.MISMATCH, f"{case.name} passes now: remove it from KNOWN_DEVIATIONS"
        pytest.xfail(KNOWN_DEVIATIONS[case.name])
    assert result.status == suite.PASS, result.reason


@pytest.mark.conformance
@pytest.mark.parametrize("case", MODELS, ids=[c.name for c in MODELS])
def test_model_case(case):
    # Every in-scope model case passes: none may be skipped as unsupported.
    why = model_scope(case)
    if why:
        pytest.skip(f"out of scope ({why})")
    result = suite.run_case(case, "model", esgraph)
    assert result.status == suite.PASS, result.reason


def test_suite_is_collected():
    # The generators must be found; an empty suite would make every test above vacuous.
    assert len(CASES) > 800
    assert len(set(OP_OF.values())) > 150
    assert len(MODELS) == 23
