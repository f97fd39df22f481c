"""Limits against hostile models: loop iteration caps, cancelling a run, nesting depth, graph size."""
import threading
import time

import numpy as np
import pytest

import esgraph
from esgraph import ops


def counting_loop():
    """A loop counting i up to its input n: n iterations of its body."""
    with esgraph.GraphBuilder("count") as b:
        n = b.input("n", esgraph.i64, [])
        i = ops.while_([b.constant(np.int64(0))], lambda i: i < n, lambda i: i + 1)
    return b.build([i])


def test_a_loop_within_the_cap_runs_to_its_end():
    model = esgraph.compile(counting_loop(), max_loop_iterations=100)
    assert model(np.int64(100)) == 100  # exactly the cap: its condition turns false on time


def test_a_loop_past_the_cap_is_a_limit_error_naming_the_option():
    model = esgraph.compile(counting_loop(), max_loop_iterations=100)
    with pytest.raises(esgraph.LimitError, match=r"`while` would take the run's loops past max_loop_iterations \(100 "):
        model(np.int64(101))
    assert model(np.int64(7)) == 7  # the model stays usable


def test_the_default_cap_is_documented_and_zero_lifts_it():
    with pytest.raises(esgraph.LimitError, match=r"max_loop_iterations \(10000000 iterations in all\)"):
        esgraph.compile(counting_loop(), threads=1)(np.int64(2**40))
    assert esgraph.compile(counting_loop(), max_loop_iterations=0)(np.int64(1000)) == 1000


def test_a_limit_error_is_an_esgraph_error_and_a_runtime_error():
    assert issubclass(esgraph.LimitError, esgraph.Error) and issubclass(esgraph.LimitError, RuntimeError)
    assert issubclass(esgraph.CancelledError, esgraph.Error) and issubclass(esgraph.CancelledError, RuntimeError)


def test_negative_limits_are_refused():
    with pytest.raises(esgraph.InvalidArgumentError, match="max_loop_iterations, max_nodes, max_plans and max_memory_bytes must be 0"):
        esgraph.compile(counting_loop(), max_loop_iterations=-1)
    with pytest.raises(esgraph.InvalidArgumentError, match="max_memory_bytes must be 0"):
        esgraph.compile(counting_loop(), max_memory_bytes=-1)


def test_memory_past_the_cap_is_refused_at_compile_for_fixed_sizes():
    with esgraph.GraphBuilder("big") as b:
        x = b.input("x", esgraph.f32, [1024, 1024])
        g = b.build([ops.exp(x) + 1.0])  # 4 MiB out, and as much of working memory at most
    with pytest.raises(esgraph.LimitError, match=r"needs \d+ bytes of working memory and outputs, more than max_memory_bytes \(1000000\)"):
        esgraph.compile(g, max_memory_bytes=1_000_000)
    x = np.ones((1024, 1024), np.float32)
    np.testing.assert_allclose(esgraph.compile(g, max_memory_bytes=16 << 20)(x), np.exp(x) + 1.0, rtol=1e-6)


def test_memory_of_values_in_bodies_counts_against_the_cap():
    with esgraph.GraphBuilder("loop") as b:
        n = b.input("n", esgraph.i64, [])
        i = ops.while_([b.constant(np.int64(0))], lambda i: i < n,
                       lambda i: i + ops.cast(ops.reduce_sum(ops.fill([1 << 19], value=0.0)), esgraph.i64) + 1)
        g = b.build([i])
    with pytest.raises(esgraph.LimitError, match="max_memory_bytes"):
        esgraph.compile(g, max_memory_bytes=1 << 20)
    assert esgraph.compile(g, max_memory_bytes=4 << 20)(np.int64(3)) == 3


def test_memory_past_the_cap_fails_the_run_whose_sizes_need_it():
    """A symbolic size's class, and a shape read from data (fill_to), are checked as the run
    reaches them; the model stays usable for smaller sizes."""
    with esgraph.GraphBuilder("sym") as b:
        x = b.input("x", esgraph.f32, ["n", 256])
        g = b.build([ops.exp(x)])
    model = esgraph.compile(g, max_memory_bytes=1 << 20)
    with pytest.raises(esgraph.LimitError, match="max_memory_bytes"):
        model(np.zeros((4096, 256), np.float32))
    np.testing.assert_array_equal(model(np.zeros((8, 256), np.float32)), np.ones((8, 256), np.float32))

    # A range whose end needs more than the cap: each size is planned at its own sizes instead.
    ranged = esgraph.compile(g, max_memory_bytes=1 << 20, shapes={"n": (1, 1 << 20)})
    np.testing.assert_array_equal(ranged(np.zeros((8, 256), np.float32)), np.ones((8, 256), np.float32))
    with pytest.raises(esgraph.LimitError, match="max_memory_bytes"):
        ranged(np.zeros((4096, 256), np.float32))

    with esgraph.GraphBuilder("fill") as b:
        shape = b.input("shape", esgraph.i64, [2])
        g = b.build([ops.fill_to(shape, value=3.0)])
    model = esgraph.compile(g, max_memory_bytes=1 << 20)
    with pytest.raises(esgraph.LimitError, match=r"`fill_to` would allocate 4000000000000 bytes for the sizes its data gives, "
                                                 r"more than max_memory_bytes \(1048576\)"):
        model(np.array([1_000_000, 1_000_000], np.int64))
    np.testing.assert_array_equal(model(np.array([2, 3], np.int64)), np.full((2, 3), 3.0, np.float32))


def run_in_thread(model, *args):
    """Starts model(*args) on another thread; returns the thread and where its result lands."""
    result = {}

    def target():
        try:
            result["value"] = model(*args)
        except Exception as e:  # noqa: BLE001 - the test reads what was raised
            result["error"] = e

    t = threading.Thread(target=target)
    t.start()
    return t, result


def test_cancel_stops_a_run_that_would_never_end():
    model = esgraph.compile(counting_loop(), max_loop_iterations=0)
    t, result = run_in_thread(model, np.int64(2**62))
    time.sleep(0.2)  # let it start; cancelling before it does would leave it running (by design)
    while t.is_alive():
        model.cancel()
        t.join(timeout=0.5)
    assert isinstance(result.get("error"), esgraph.CancelledError), result
    assert "cancelled" in str(result["error"])
    assert model(np.int64(5)) == 5  # later runs are not affected


def test_cancel_with_no_run_under_way_changes_nothing():
    model = esgraph.compile(counting_loop())
    model.cancel()
    assert model(np.int64(3)) == 3


def nest(p, x, depth):
    if depth == 0:
        return ops.exp(x)
    return ops.if_(p, lambda: nest(p, x, depth - 1), lambda: -x)


def test_bodies_nest_64_deep_and_no_deeper():
    with esgraph.GraphBuilder("deep") as b:
        p = b.input("p", esgraph.bool_, [])
        x = b.input("x", esgraph.f32, [2])
        y = nest(p, x, 64)
    model = esgraph.compile(b.build([y]))
    np.testing.assert_allclose(model(np.bool_(True), np.float32([0, 1])), np.exp([0, 1]), rtol=1e-6)
    with esgraph.GraphBuilder("deeper") as b:
        p = b.input("p", esgraph.bool_, [])
        x = b.input("x", esgraph.f32, [2])
        with pytest.raises(esgraph.LimitError, match="bodies nest at most 64 deep; this one would be 65 deep"):
            nest(p, x, 65)
        assert b.build([ops.exp(x)]) is not None  # the builder stays usable


def test_a_graph_over_max_nodes_is_not_compiled():
    with esgraph.GraphBuilder("chain") as b:
        x = b.input("x", esgraph.f32, [4])
        y = x
        for _ in range(50):
            y = ops.tanh(y)
    graph = b.build([y])
    with pytest.raises(esgraph.LimitError, match=r"the graph has 5\d nodes, more than max_nodes \(40\)"):
        esgraph.compile(graph, max_nodes=40)
    assert esgraph.compile(graph, max_nodes=0)(np.zeros(4, np.float32)).shape == (4,)


@pytest.mark.parametrize("op", [
    lambda x: ops.softmax(x, axis=1), lambda x: ops.log_softmax(x, axis=1), lambda x: ops.softmax(x, axis=0),
    lambda x: ops.reduce_sum(x, axes=[0, 1]), lambda x: ops.layer_norm(x, axis=-1), lambda x: ops.rms_norm(x, axis=-1),
    lambda x: ops.transpose(x, perm=[1, 0]), lambda x: ops.top_k(x, 0, axis=1)[0], lambda x: ops.exp(x) + 1.0,
], ids=["softmax", "log_softmax", "softmax-0", "reduce_sum", "layer_norm", "rms_norm", "transpose", "top_k", "elementwise"])
@pytest.mark.parametrize("shape", [(2**40, 0), (0, 2**40)], ids=["many-empty-lanes", "empty-outer"])
def test_empty_tensors_with_huge_other_sizes_take_no_time(op, shape):
    """An empty tensor's other sizes may multiply to 2^40: kernels must not walk its empty lanes
    (the graph-file fuzzer found softmax doing so)."""
    with esgraph.GraphBuilder("empty") as b:
        x = b.input("x", esgraph.f32, list(shape))
        y = op(x)
        want = tuple(y.shape)
    got = esgraph.compile(b.build([y]), threads=1)(np.zeros(shape, np.float32))
    assert got.shape == want
    assert got.size == 0 or got == 0  # the sum of nothing


def test_nested_loops_count_every_inner_iteration_against_the_cap():
    """An outer loop of 10 over an inner loop of 10: 110 iterations in the run, not 10 per loop."""
    with esgraph.GraphBuilder("nested_loops") as b:
        n = b.input("n", esgraph.i64, [])

        def outer_body(i, total):
            inner = ops.while_([b.constant(np.int64(0)), total], lambda j, t: j < n, lambda j, t: (j + 1, t + 1))
            return i + 1, inner[1]

        out = ops.while_([b.constant(np.int64(0)), b.constant(np.int64(0))], lambda i, t: i < n, outer_body)
    graph = b.build([out[1]])
    assert esgraph.compile(graph, max_loop_iterations=110)(np.int64(10)) == 100
    with pytest.raises(esgraph.LimitError, match=r"past max_loop_iterations \(109 iterations in all\)"):
        esgraph.compile(graph, max_loop_iterations=109)(np.int64(10))
