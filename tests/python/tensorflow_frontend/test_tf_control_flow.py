"""TF2's functional control flow (If, While and their Stateless forms, from the function
library) and TF1's conditionals and loops (Switch, Merge, Enter, Exit, NextIteration, LoopCond:
what TF's freezing writes by default) against TensorFlow."""
import numpy as np
import pytest

import esgraph
from tf_models import Frozen, assert_matches_tensorflow, rand, spec, tf


def _cond(x, flag):
    return tf.cond(flag > 0, lambda: tf.nn.relu(x) * 2.0, lambda: tf.reduce_sum(x, axis=1, keepdims=True) + x)


def test_if_on_a_condition_computed_at_run_time():
    frozen = Frozen(_cond, spec(2, 3), spec(dtype="int32"), lower_control_flow=False)
    ops = {n.op for n in frozen.graph_def.node}
    assert ops & {"If", "StatelessIf"}, ops
    model = esgraph.compile(esgraph.tensorflow.load(frozen.data))
    x = rand(2, 3)
    for flag in (1, 0):
        got = model.run({"x": x, "flag": np.array(flag, np.int32)})[0]
        np.testing.assert_allclose(got, frozen.reference(x, np.array(flag, np.int32))[0], rtol=1e-6)


def test_if_on_a_known_condition_keeps_the_branch_taken():
    frozen = Frozen(lambda x: tf.cond(tf.constant(True), lambda: x * 3.0, lambda: x - 1.0), spec(4), lower_control_flow=False)
    graph = esgraph.tensorflow.load(frozen.data)
    assert "if" not in graph.to_dot()
    assert_matches_tensorflow(frozen, rand(4))


def test_while_with_a_trip_count_computed_at_run_time():
    def fn(x, n):
        i0 = tf.constant(0)
        _, y = tf.while_loop(lambda i, y: i < n, lambda i, y: (i + 1, tf.tanh(y) * 1.5 + 0.1), [i0, x])
        return y
    frozen = Frozen(fn, spec(2, 3), spec(dtype="int32"), lower_control_flow=False)
    assert {n.op for n in frozen.graph_def.node} & {"While", "StatelessWhile"}
    model = esgraph.compile(esgraph.tensorflow.load(frozen.data))
    x = rand(2, 3)
    for n in (0, 1, 5):
        got = model.run({"x": x, "n": np.array(n, np.int32)})[0]
        np.testing.assert_allclose(got, frozen.reference(x, np.array(n, np.int32))[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("flag", [1, 0])
def test_v1_conditionals_both_branches_computed_and_merged(flag):
    """TF's default freezing lowers tf.cond to Switch and Merge; a nested one too, and a branch
    that returns a constant (tied to its branch by a control input)."""
    def fn(x, flag):
        inner = lambda: tf.cond(flag > 1, lambda: x * 5.0, lambda: tf.constant(7.0, shape=[2, 3]))  # noqa: E731
        return _cond(x, flag), tf.cond(flag > 0, inner, lambda: -x)
    frozen = Frozen(fn, spec(2, 3), spec(dtype="int32"))
    assert {"Switch", "Merge"} <= {n.op for n in frozen.graph_def.node}
    model = esgraph.compile(esgraph.tensorflow.load(frozen.data, outputs=frozen.output_names))
    x = rand(2, 3)
    for f in (flag, 2 * flag):
        got = model.run({"x": x, "flag": np.array(f, np.int32)})
        for g, w in zip(got, frozen.reference(x, np.array(f, np.int32))):
            np.testing.assert_allclose(g, w, rtol=1e-6)


@pytest.mark.parametrize("n", [0, 1, 4])
def test_v1_loops_as_esgraphs_while(n):
    """TF's default freezing lowers tf.while_loop to Enter, Merge, Switch, LoopCond,
    NextIteration and Exit; each frame becomes one while, its body reading a value from outside
    the loop (a matrix) and a loop variable the condition compares with."""
    w = rand(3, 3, seed=1) * 0.5

    def fn(x, n):
        def body(i, y, total):
            return i + 1, tf.tanh(tf.matmul(y, w)), total + tf.reduce_sum(y)
        return tf.while_loop(lambda i, y, total: i < n, body, [tf.constant(0), x, tf.constant(0.0)])[1:]
    frozen = Frozen(fn, spec(2, 3), spec(dtype="int32"))
    assert {"Enter", "NextIteration", "Exit", "LoopCond"} <= {n.op for n in frozen.graph_def.node}
    model = esgraph.compile(esgraph.tensorflow.load(frozen.data, outputs=frozen.output_names))
    assert model.input_names == ["x", "n"]  # not the Placeholders TF's lowering leaves unused
    x = rand(2, 3)
    got = model.run({"x": x, "n": np.array(n, np.int32)})
    for g, w_ in zip(got, frozen.reference(x, np.array(n, np.int32))):
        np.testing.assert_allclose(g, w_, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("flag", [1, 0])
def test_v1_loops_nested_and_inside_a_conditional(flag):
    """A loop in a loop's body reading the outer loop's value, and a loop in a tf.cond branch."""
    def fn(x, flag):
        def outer_body(i, y):
            inner = tf.while_loop(lambda j, z: j < 2, lambda j, z: (j + 1, z * 0.5 + y), [tf.constant(0), y])[1]
            return i + 1, tf.tanh(inner)
        nested = tf.while_loop(lambda i, y: i < 3, outer_body, [tf.constant(0), x])[1]
        in_branch = tf.cond(flag > 0, lambda: tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2.0),
                                                            [tf.constant(0), x])[1], lambda: x)
        return nested, in_branch
    frozen = Frozen(fn, spec(2, 3), spec(dtype="int32"))
    model = esgraph.compile(esgraph.tensorflow.load(frozen.data, outputs=frozen.output_names))
    x = rand(2, 3)
    got = model.run({"x": x, "flag": np.array(flag, np.int32)})
    for g, w in zip(got, frozen.reference(x, np.array(flag, np.int32))):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
