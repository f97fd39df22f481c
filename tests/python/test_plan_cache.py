"""Symbolic plans: one per size class (a declared range, or sizes up to the next power of two),
bound to each run's sizes; at most `max_plans` bindings and as many symbolic plans kept, the
least recently run dropped and compiled again when its sizes return; a graph no symbolic plan
follows compiles per set of input shapes; sizes bound at compile time stay fixed, and one
symbol must have one size across the inputs of a run."""
import threading

import numpy as np
import pytest

import esgraph
from esgraph import ops

W = np.random.default_rng(0).standard_normal((8, 5)).astype(np.float32)


def batch_graph():
    with esgraph.GraphBuilder() as b:
        x = b.input("x", esgraph.f32, ["batch", 8])
        y = ops.relu(x @ W)
    return b.build([y])


def run_and_check(model, batch):
    x = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)
    np.testing.assert_allclose(model(x), np.maximum(x @ W, 0), rtol=1e-5, atol=1e-5)


def kept(model):
    return model.stats()["plans_kept"]


def symbolic_kept(model):
    return model.stats()["symbolic_plans_kept"]


def test_one_plan_per_size_class_bound_to_each_size():
    model = esgraph.compile(batch_graph(), max_plans=3)
    for batch in range(1, 11):
        run_and_check(model, batch)
    # Classes up to 1, 2, 4, 8 and 16; the last three kept, as are the last three bindings.
    stats = model.stats()
    assert (stats["plans"], stats["bindings"], kept(model), symbolic_kept(model)) == (5, 10, 3, 3)
    run_and_check(model, 9)  # its binding is kept: nothing new
    assert (model.stats()["plans"], model.stats()["bindings"]) == (5, 10)
    run_and_check(model, 7)  # its class is kept: bound again, no compile
    assert (model.stats()["plans"], model.stats()["bindings"]) == (5, 11)
    run_and_check(model, 1)  # its class was dropped: compiled again
    assert (model.stats()["plans"], model.stats()["bindings"]) == (6, 12)
    stats = model.stats()
    assert stats["max_plans"] == 3
    assert {c["inputs"][0]["type"] for c in stats["size_classes"]} == {"f32[batch,8]"}


def test_a_range_is_one_plan_for_all_its_sizes():
    model = esgraph.compile(batch_graph(), shapes={"batch": (1, 100)})
    for batch in (100, 1, 37, 64, 2, 99):
        run_and_check(model, batch)
    assert (model.stats()["plans"], model.stats()["bindings"]) == (1, 6)


def test_a_range_grown_on_demand_plans_memory_per_class_up_to_its_end():
    w2 = np.ones((5, 3), np.float32)
    with esgraph.GraphBuilder() as b:
        x = b.input("x", esgraph.f32, ["batch", 8])
        y = ops.relu(x @ W) @ w2  # relu(x @ W) lives in the arena: [batch, 5]
    graph = b.build([y])
    x = np.ones((3, 8), np.float32)
    at_once = esgraph.compile(graph, shapes={"batch": (1, 4096)})
    grown = esgraph.compile(graph, shapes={"batch": (1, 4096)}, grow_memory=True)
    np.testing.assert_allclose(grown(x), at_once(x), rtol=1e-6)
    assert at_once.stats()["arena_bytes"] >= 4096 * 5 * 4
    assert grown.stats()["arena_bytes"] < 4 * 5 * 4 + 64  # planned for 4, the class of 3
    big = np.ones((3000, 8), np.float32)
    np.testing.assert_allclose(grown(big), at_once(big), rtol=1e-6)
    assert grown.stats()["plans"] == 2 and at_once.stats()["plans"] == 1
    assert grown.stats()["arena_bytes"] >= 3000 * 5 * 4  # the class of 3000 ends at the range's 4096
    with pytest.raises(esgraph.ShapeError, match="outside the range 1..4096"):
        grown(np.ones((5000, 8), np.float32))


def test_a_graph_with_a_body_compiles_per_set_of_shapes():
    with esgraph.GraphBuilder() as b:
        p = b.input("p", esgraph.bool_, [])
        x = b.input("x", esgraph.f32, ["n", 3])
        y = ops.if_(p, lambda: ops.exp(x), lambda: -x)
    model = esgraph.compile(b.build([y]))
    for n in (1, 2, 3):
        x = np.full((n, 3), 0.5, np.float32)
        np.testing.assert_allclose(model(np.array(True), x), np.exp(x), rtol=1e-6)
        np.testing.assert_allclose(model(np.array(False), x), -x)
    assert (model.stats()["plans"], model.stats()["bindings"]) == (3, 0)
    assert model.stats()["no_symbolic_plan"].startswith("compile: no symbolic plan for a graph with a body")


def test_sizes_a_symbolic_plan_cannot_take_fail_naming_the_op_and_the_model_runs_on():
    with esgraph.GraphBuilder() as b:
        y = ops.matmul(b.input("a", esgraph.f32, ["m", "k"]), b.input("b", esgraph.f32, ["j", 2]))
    model = esgraph.compile(b.build([y]))
    a, w = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)
    np.testing.assert_array_equal(model(a, w), np.full((2, 2), 3.0))
    with pytest.raises(esgraph.ShapeError, match=r"matmul: .*\[2,3\].*\[4,2\]"):
        model(a, np.ones((4, 2), np.float32))
    np.testing.assert_array_equal(model(a, w), np.full((2, 2), 3.0))


def test_no_limit_keeps_every_plan():
    model = esgraph.compile(batch_graph(), max_plans=0)
    for batch in range(1, 21):
        run_and_check(model, batch)
    assert kept(model) == 20 and symbolic_kept(model) == 6 and model.stats()["max_plans"] == 0


def test_runs_on_many_threads_while_plans_are_dropped_stay_right():
    model = esgraph.compile(batch_graph(), max_plans=2, threads=1)
    errors = []

    def worker(first):
        try:
            for i in range(40):
                run_and_check(model, 1 + (first + i) % 7)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and kept(model) == 2


def test_a_size_bound_at_compile_time_is_fixed():
    model = esgraph.compile(batch_graph(), shapes={"batch": 8})
    run_and_check(model, 8)
    # No internal name before it (it said "output_shapes: input 0 ...", a function the caller never called).
    with pytest.raises(esgraph.ShapeError, match=r"^input 0 \(x: f32\[batch,8\]\) has batch = 7 on axis 0, but the model "
                                                 r"was compiled with batch = 8"):
        model(np.zeros((7, 8), np.float32))
    run_and_check(model, 8)  # still usable


def test_one_symbol_has_one_size_across_the_inputs():
    with esgraph.GraphBuilder() as b:
        y = b.input("a", esgraph.f32, ["n", 4]) + b.input("b", esgraph.f32, ["n", 4])
    model = esgraph.compile(b.build([y]))
    with pytest.raises(esgraph.ShapeError, match=r"input 1 \(b: .*\) has n = 5 on axis 0, but input 0 \(a\) has n = 3"):
        model(np.zeros((3, 4), np.float32), np.zeros((5, 4), np.float32))
    np.testing.assert_array_equal(model(np.ones((3, 4), np.float32), np.ones((3, 4), np.float32)), np.full((3, 4), 2.0))


def test_a_negative_limit_is_refused():
    with pytest.raises(esgraph.InvalidArgumentError, match="max_plans"):
        esgraph.compile(batch_graph(), max_plans=-1)


def test_a_range_declares_the_sizes_a_run_may_have():
    model = esgraph.compile(batch_graph(), shapes={"batch": (2, 6)})
    for batch in (2, 4, 6):
        run_and_check(model, batch)
    for batch in (1, 7):
        with pytest.raises(esgraph.ShapeError, match=rf"input 0 \(x: f32\[batch,8\]\) has batch = {batch} on axis 0, "
                                                     r"outside the range 2\.\.6 the model was compiled for"):
            model(np.zeros((batch, 8), np.float32))
    run_and_check(model, 3)  # still usable


@pytest.mark.parametrize("shapes, message", [
    ({"batch": (5, 2)}, "empty or negative"),
    ({"batch": (-1, 2)}, "empty or negative"),
    ({"seq": (1, 2)}, "no such symbol"),
])
def test_bad_ranges_are_refused_when_compiling(shapes, message):
    with pytest.raises(esgraph.InvalidArgumentError, match=message):
        esgraph.compile(batch_graph(), shapes=shapes)
    with pytest.raises(ValueError, match="a size or a \\(min, max\\) pair"):
        esgraph.compile(batch_graph(), shapes={"batch": (1, 2, 3)})


@pytest.mark.parametrize("value", ["8", (1, "a"), 2.5, True])
def test_a_shape_that_is_not_a_size_or_a_pair_of_sizes_is_a_type_error(value):
    with pytest.raises(TypeError, match=r'shapes\["batch"\] must be a size or a \(min, max\) pair of ints'):
        esgraph.compile(batch_graph(), shapes={"batch": value})


def test_numpy_integers_are_sizes():
    model = esgraph.compile(batch_graph(), shapes={"batch": np.int64(4)})
    run_and_check(model, 4)
    run_and_check(esgraph.compile(batch_graph(), shapes={"batch": (np.int32(1), np.int64(5))}), 5)
