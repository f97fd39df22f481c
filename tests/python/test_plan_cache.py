"""Plans per set of input shapes: at most `max_plans` kept, the least recently run dropped and
compiled again when its shapes return; sizes bound at compile time stay fixed, and one symbol
must have one size across the inputs of a run."""
import re
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
    return int(re.search(r"plans: (\d+) kept", model.report()).group(1))


def test_the_least_recently_run_plan_is_dropped_and_compiled_again_when_its_shapes_return():
    model = esgraph.compile(batch_graph(), max_plans=3)
    for batch in range(1, 11):
        run_and_check(model, batch)
    assert kept(model) == 3 and model.stats()["plans"] == 10
    run_and_check(model, 9)  # still kept: no new plan
    assert model.stats()["plans"] == 10
    run_and_check(model, 1)  # dropped long ago: compiled again
    assert model.stats()["plans"] == 11 and kept(model) == 3
    assert "at most 3" in model.report()


def test_no_limit_keeps_every_plan():
    model = esgraph.compile(batch_graph(), max_plans=0)
    for batch in range(1, 21):
        run_and_check(model, batch)
    assert kept(model) == 20 and "no limit" in model.report()


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
    with pytest.raises(esgraph.ShapeError, match=r"input 0 \(x: f32\[batch,8\]\) has batch = 7 on axis 0, but the model "
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
