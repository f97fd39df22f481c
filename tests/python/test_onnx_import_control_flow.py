"""ONNX If imported as esgraph's `if`, its bodies as subgraphs.

See onnx_models.py for the helpers."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import esgraph  # noqa: E402
import esgraph.onnx  # noqa: E402

from onnx_models import vi, init, make, run, rand, close, F32, I64  # noqa: E402


# If
def branches(then_nodes, else_nodes, then_inits=(), else_inits=()):
    then_g = helper.make_graph(then_nodes, "then", [], [vi("t", F32, None)], initializer=list(then_inits))
    else_g = helper.make_graph(else_nodes, "else", [], [vi("e", F32, None)], initializer=list(else_inits))
    return dict(then_branch=then_g, else_branch=else_g)


def test_if_with_a_constant_condition_keeps_one_branch():
    bodies = branches([helper.make_node("Mul", ["x", "two"], ["t"])], [helper.make_node("Neg", ["x"], ["e"])],
                      then_inits=[init("two", np.float32(2))])
    for cond, expected in ((True, lambda x: 2 * x), (False, lambda x: -x)):
        model = make([helper.make_node("If", ["p"], ["y"], **bodies)], [vi("x", F32, [4])], [vi("y", F32, None)],
                     [init("p", np.array(cond))])
        graph = esgraph.onnx.load(model)
        text = graph.to_text()
        assert "if(" not in text  # only the branch taken is imported
        assert ("mul(" in text) == cond and ("neg(" in text) == (not cond)
        x = rand(4, seed=27)
        close(esgraph.compile(graph)(x), expected(x))


def test_if_with_a_constant_condition_keeps_branch_values_known():
    then_g = helper.make_graph([helper.make_node("Constant", [], ["t"], value=init("v", np.array([-1, 12])))],
                               "then", [], [vi("t", I64, [2])])
    else_g = helper.make_graph([helper.make_node("Constant", [], ["e"], value=init("v", np.array([24])))],
                               "else", [], [vi("e", I64, [1])])
    nodes = [helper.make_node("If", ["p"], ["shape"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    model = make(nodes, [vi("x", F32, [2, 3, 4])], [vi("y", F32, None)], [init("p", np.array(True))])
    x = rand(2, 3, 4, seed=32)
    (y,) = run(model, x)  # the branch taken is computed from constants only
    close(y, x.reshape(2, 12))


def test_if_with_a_runtime_condition_runs_the_right_branch():
    # Both branches capture outer-scope values: the graph input x and the computed value `h`.
    bodies = branches(
        [helper.make_node("Add", ["x", "h"], ["t0"]), helper.make_node("Mul", ["t0", "three"], ["t"])],
        [helper.make_node("Sub", ["h", "x"], ["e"])],
        then_inits=[init("three", np.float32(3))])
    nodes = [helper.make_node("Exp", ["x"], ["h"]), helper.make_node("If", ["p"], ["y"], **bodies)]
    model = make(nodes, [vi("x", F32, [2, 3]), vi("p", TensorProto.BOOL, [])], [vi("y", F32, None)])
    graph = esgraph.onnx.load(model)
    assert "if(%p)" in graph.to_text()
    compiled = esgraph.compile(graph)
    x = rand(2, 3, seed=28)
    close(compiled(x, np.array(True)), (x + np.exp(x)) * 3)
    close(compiled(x, np.array(False)), np.exp(x) - x)


def test_if_branches_sharing_an_outer_initializer():
    bodies = branches([helper.make_node("Add", ["x", "c"], ["t"])], [helper.make_node("Sub", ["x", "c"], ["e"])])
    nodes = [helper.make_node("If", ["p"], ["r"], **bodies), helper.make_node("Mul", ["r", "c"], ["y"])]
    model = make(nodes, [vi("x", F32, [3]), vi("p", TensorProto.BOOL, [])], [vi("y", F32, None)],
                 [init("c", np.full(3, 10, np.float32))])
    compiled = esgraph.compile(esgraph.onnx.load(model))
    x = rand(3, seed=29)
    close(compiled(x, np.array(True)), (x + 10) * 10)
    close(compiled(x, np.array(False)), (x - 10) * 10)
