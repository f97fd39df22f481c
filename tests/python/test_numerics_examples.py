"""Every YAML example that gives values for all its inputs and outputs runs compiled, with the
example's input values, and must reproduce the example's output values.

See numerics.py for the comparison rules."""
import pytest

import esgraph

from esgraph_op_set import OP_SET, build_value_example, value_examples
from numerics import check


def _example_cases():
    return [pytest.param(op, example, id=f"{op.name}-{op.examples.index(example) + 1}")
            for op, example in value_examples()]


@pytest.mark.parametrize("op, example", _example_cases())
def test_yaml_example_values(op, example):
    graph, feeds, expected = build_value_example(op, example)
    got = esgraph.compile(graph).run(feeds)
    assert len(got) == len(expected)
    for g, want in zip(got, expected):
        check(g, want)


def test_every_op_but_control_flow_has_a_value_example():
    """The example test above is not vacuous: it runs at least one example of every op (send and
    recv need a peer, which one process has not: tests/distributed runs them)."""
    covered = {p.values[0].name for p in _example_cases()}
    assert {op.name for op in OP_SET.ops} - covered == {"if", "while", "send", "recv"}
