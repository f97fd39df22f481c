"""One graph gives the same values whatever the compile options (fusion, memory reuse, streams,
threads), and at several sizes of a symbolic dimension.

See numerics.py for the comparison rules."""
import re

import numpy as np
import pytest

import esgraph
from esgraph import ops

from numerics import build, run, check, rng_for, normal, f32, f64, i32, i64, softmax_reference, layer_norm_reference


OPTIONS = {
    "streams=3": dict(streams=3),
    "memory_reuse=False": dict(memory_reuse=False),
    "fusion=False": dict(fusion=False),
    "verify_each_pass": dict(verify_each_pass=True),
    "all changed": dict(streams=3, memory_reuse=False, fusion=False, verify_each_pass=True),
    "threads=2": dict(threads=2),
    "threads=1": dict(threads=1),
    "threads=3, fusion=False": dict(threads=3, fusion=False),
    # Streams run concurrently when the pool has a thread per stream.
    "streams=2": dict(streams=2, threads=2),
    "streams=4, threads=4, memory_reuse=False": dict(streams=4, threads=4, memory_reuse=False),
    "streams=3, threads=3, fusion=False": dict(streams=3, threads=3, fusion=False),
}

_W = rng_for("weights").standard_normal((8, 8)).astype(f32)
_BIAS = rng_for("bias").standard_normal(8).astype(f32)


def mlp_block(x):
    """Branches, reductions, broadcasts and reshapes: several values alive at once for the planner."""
    h = x @ _W + _BIAS
    a, n = ops.relu(h), ops.layer_norm(h)
    s = ops.softmax(a * 0.5, axis=-1)
    r = ops.reduce_sum(s * n, axes=[1], keepdims=True)
    t = ops.tanh(r) + ops.sigmoid(h)
    cat = ops.concat([ops.transpose(a), ops.transpose(n)], 0)
    u = ops.reshape(ops.exp(ops.slice(x, [0], [1], axes=[0])), [1, 8])  # [1, 8] broadcast below
    v = ops.sub(u, t)
    return [t, cat, v, ops.argmax(t, axis=1), ops.cast(ops.greater(v, 0.0), esgraph.i64) + 1]


def mlp_block_reference(x):
    x = x.astype(f64)
    h = x @ _W + _BIAS
    a, n = np.maximum(h, 0), layer_norm_reference(h, -1)
    s = softmax_reference(a * 0.5, -1)
    r = (s * n).sum(1, keepdims=True)
    t = np.tanh(r) + 1 / (1 + np.exp(-h))
    cat = np.concatenate([a.T, n.T], 0)
    v = np.exp(x[:1]) - t
    return [t.astype(f32), cat.astype(f32), v.astype(f32), t.argmax(1), (v > 0).astype(i64) + 1]


def cast_chain(x):
    """Casts that widen and narrow intermediate values, each of which dies at its cast."""
    i = ops.cast(x * 3.0, esgraph.i32)
    wide = ops.cast(i + 1, esgraph.i64)
    back = ops.cast(wide * 2, esgraph.f64)
    flag = ops.cast(ops.cast(ops.less(x, 0.0), esgraph.f32) * 2.0, esgraph.bool_)
    return [ops.cast(back, esgraph.f32), ops.where(flag, x, x * 10.0)]


def cast_chain_reference(x):
    back = ((x * f32(3)).astype(i32) + 1).astype(i64) * 2
    return [back.astype(f64).astype(f32), np.where(x < 0, x, x * f32(10))]


def broadcast_chain(x):
    """Elementwise ops whose broadcast operand is an intermediate that dies at the op."""
    row = ops.exp(ops.reduce_mean(x, axes=[0], keepdims=True))          # [1, n]: dies at the mul
    col = ops.sqrt(ops.reduce_max(ops.abs(x), axes=[1], keepdims=True))  # [m, 1]: dies at the sub
    return [ops.neg(col - (row * x + 1.0))]


def broadcast_chain_reference(x):
    x = x.astype(f64)
    row, col = np.exp(x.mean(0, keepdims=True)), np.sqrt(np.abs(x).max(1, keepdims=True))
    return [(-(col - (row * x + 1))).astype(f32)]


# Shapes marked True once made the planner put an output over a dying input of the same
# 64-byte-rounded size but fewer bytes (a widening cast, a broadcast operand); in-place reuse now
# requires the same shape and element width. They stay as regression cases.
GRAPHS = {  # name: (graph, numpy reference, input shape, once hit the in-place bug)
    "mlp block": (mlp_block, mlp_block_reference, (4, 8), False),
    "cast chain 3x4": (cast_chain, cast_chain_reference, (3, 4), True),
    "cast chain 16": (cast_chain, cast_chain_reference, (16,), True),
    "cast chain 4x8": (cast_chain, cast_chain_reference, (4, 8), False),
    "broadcast chain 2x8": (broadcast_chain, broadcast_chain_reference, (2, 8), True),
    "broadcast chain 4x4": (broadcast_chain, broadcast_chain_reference, (4, 4), True),
    "broadcast chain 8x16": (broadcast_chain, broadcast_chain_reference, (8, 16), False),
    # Large enough for the elementwise kernels to split their work over threads.
    "broadcast chain 300x700": (broadcast_chain, broadcast_chain_reference, (300, 700), False),
}


def _option_cases():
    """Every option set with every graph."""
    return [pytest.param(option, name, id=f"{option}-{name}") for option in OPTIONS for name in GRAPHS]


@pytest.mark.parametrize("option, graph_name", _option_cases())
def test_compile_options_give_identical_results(option, graph_name):
    fn, ref, shape, _ = GRAPHS[graph_name]
    x = normal(rng_for(graph_name), shape)
    graph, _ = build(fn, x)
    base = esgraph.compile(graph).run([x])
    other = esgraph.compile(graph, **OPTIONS[option]).run([x])
    for got, want in zip(other, base):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


def _numpy_cases():
    return [pytest.param(name, reuse, id=f"{name}-memory_reuse={reuse}") for name in GRAPHS for reuse in (True, False)]


@pytest.mark.parametrize("graph_name, memory_reuse", _numpy_cases())
def test_option_graphs_match_numpy(graph_name, memory_reuse):
    """The graphs above are right, not only consistent, with and without memory reuse."""
    fn, ref, shape, _ = GRAPHS[graph_name]
    x = normal(rng_for(graph_name), shape)
    got = run(fn, x, memory_reuse=memory_reuse)
    for g, w in zip(got, ref(x)):
        check(g, w)


@pytest.mark.parametrize("src, to", [(np.bool_, f32), (i32, i64), (f32, f64)], ids=["bool-f32", "i32-i64", "f32-f64"])
def test_in_place_widening_cast(src, to):
    """cast(neg-or-not(x)) * 2 where the cast's input is an intermediate of 4 elements."""
    x = np.array([-1, 2, -3, 4], f32)

    def graph(t):
        narrow = ops.less(t, 0.0) if src == np.bool_ else ops.cast(ops.neg(t), np.dtype(src))
        return ops.cast(narrow, np.dtype(to)) * 2

    narrow = (x < 0) if src == np.bool_ else (-x).astype(src)
    check(run(graph, x), narrow.astype(to) * to(2))


def test_in_place_broadcast_operand():
    """neg(exp(t) * c) with t: [1, 4] and c: [4, 4]; exp(t) dies at the mul and is broadcast."""
    t, c = np.array([[0, 1, 2, 3]], f32), np.full((4, 4), 2, f32)
    check(run(lambda a, b: ops.neg(ops.exp(a) * b), t, c), (-np.exp(t.astype(f64)) * 2).astype(f32) + np.zeros((4, 4), f32))


def test_in_place_reuse_happens_and_is_right_for_same_sized_values():
    """Beside the two tests above: same-shape, same-dtype chains still reuse buffers, correctly."""
    x = normal(rng_for(), (4, 4))
    graph, _ = build(lambda t: ops.neg(ops.exp(t) * t + 1.0), x)
    model = esgraph.compile(graph, fusion=False)  # fused, the chain has no intermediates to reuse
    check(model(x), (-(np.exp(x.astype(f64)) * x + 1)).astype(f32))
    assert model.stats()["in_place_values"] > 0


@pytest.mark.parametrize("rows", [1, 3, 37])  # 37 x 41 spans several 512-element tiles, unevenly
def test_fused_group_over_several_tiles_with_scalar_and_row_operands(rows):
    """One fused group: scalar constants (float and int), a broadcast row, a three-input where."""
    x = normal(rng_for(rows), (rows, 41))
    row = normal(rng_for("row"), (1, 41))

    def graph(t, r):
        y = ops.tanh(t * 1.5 + r) - 0.25
        k = ops.cast(ops.cast(t * 4.0, esgraph.i32) * 3 + 1, esgraph.f32)
        return ops.where(ops.greater(y, 0.0), ops.sigmoid(y) * k, y * 2.0 + t)

    model = esgraph.compile(build(graph, x, row)[0])
    assert model.stats()["fused_groups"] >= 1
    xd, rd = x.astype(f64), row.astype(f64)
    y = np.tanh(xd * 1.5 + rd) - 0.25
    k = ((xd * 4).astype(f32).astype(i32) * 3 + 1).astype(f64)
    check(model(x, row), np.where(y > 0, 1 / (1 + np.exp(-y)) * k, y * 2 + xd).astype(f32))


def test_scalar_multiply_adds_folded_into_rows_round_as_the_unfused_ops():
    """The CPU runs x*s, x+s, x-s and s-x by single-element inputs inside the rows around them
    (tanh(x*a+b)*0.5-0.125 is one row). Each rounds as its op does alone, so fused results are
    the unfused ones bit for bit, NaNs, infinities, signed zeros and denormals included; the
    scalars are graph inputs, read at every run."""
    x = normal(rng_for(), (37, 41))
    x.flat[:7] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -3e38]

    weights = normal(rng_for("w"), (41, 41), scale=0.2)

    def graph(t, a, b):
        u = ops.tanh(t * a + b) * 0.5 - 0.125
        v = ops.exp(1.0 - u) * a  # s - x on an operand; an output through a stage
        w = ops.sigmoid(ops.neg(t) * 3.0 + 2.0) - b
        r = ops.sub(b, ops.relu(t) * a) + 1.0  # s - x·a: a negated scale
        h = ops.sub(2.0, ops.tanh(ops.sub(b, (t @ weights) * a)) * 3.0)  # after a matmul head
        return [v, w + u, r, h]

    g = build(graph, x, np.float32(0), np.float32(0))[0]
    fused, unfused = esgraph.compile(g), esgraph.compile(g, fusion=False)
    # 24 ops in 8 rows: tanh(·a+b)·0.5-0.125, exp(1-·)·a, neg, sigmoid(·3+2)-b, add; relu·(-a)+b,
    # add; after the matmul tanh(·(-a)+b)·(-3)+2
    stats = fused.stats()
    assert (stats["fused_groups"], stats["fused_ops"], stats["f32_rows"], stats["epilogue_groups"]) == (3, 24, 8, 1)
    for a, b in [(1.5, 0.25), (-2.0, -0.0), (0.0, np.inf), (np.nan, 1.0), (3e38, -1e-45)]:
        feeds = [x, np.float32(a), np.float32(b)]
        for got, want in zip(fused.run(feeds), unfused.run(feeds)):
            np.testing.assert_array_equal(got, want)
            numbers = ~np.isnan(want)  # (a NaN's sign bit means nothing: x86 keeps an operand's)
            assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))
    xd, (a, b) = x[7:].astype(f64), (f64(1.5), f64(0.25))
    u = np.tanh(xd * a + b) * 0.5 - 0.125
    outs = fused.run([x, np.float32(a), np.float32(b)])
    check(outs[0][7:], (np.exp(1 - u) * a).astype(f32))
    check(outs[1][7:], (1 / (1 + np.exp(-(-xd * 3 + 2))) - b + u).astype(f32))
    check(outs[2][7:], (b - np.maximum(xd, 0) * a + 1).astype(f32))
    check(outs[3][7:], (2 - np.tanh(b - (x.astype(f64) @ weights.astype(f64))[7:] * a) * 3).astype(f32))


def test_fused_group_writing_over_an_input_it_reads_again():
    """The memory plan may put a group's output in the bytes of an input that dies there; the
    group's later members read that input again, so within a chunk no result may reach memory
    before the chunk's members all ran. Long enough for many chunks and threads."""
    x = normal(rng_for(), (300, 257))

    def graph(t):
        u = ops.transpose(t, perm=[1, 0])  # an arena value, dying in the group
        a = u * 2.0 + 1.0
        first = ops.tanh(a)  # the group's first output, computed before u is read again
        second = ops.sigmoid(a - 0.5) * u + u
        return ops.transpose(first, perm=[1, 0]) + ops.transpose(second, perm=[1, 0])

    g = build(graph, x)[0]
    ud = x.T.astype(f64)
    a = ud * 2 + 1
    want = (np.tanh(a) + 1 / (1 + np.exp(-(a - 0.5))) * ud + ud).astype(f32).T
    for threads in (1, 2):
        fused = esgraph.compile(g, threads=threads)
        assert fused.stats()["in_place_values"] > 0
        check(fused(x), want)
        np.testing.assert_array_equal(fused(x), esgraph.compile(g, fusion=False, threads=threads)(x))


def test_repeated_runs_give_the_same_values():
    x = normal(rng_for(), (4, 8))
    graph, _ = build(mlp_block, x)
    model = esgraph.compile(graph, streams=3)
    first = model.run([x])
    for _ in range(3):
        for got, want in zip(model.run([x]), first):
            np.testing.assert_array_equal(got, want)


def test_outputs_that_are_inputs_constants_or_repeated():
    x = normal(rng_for(), (2, 3))

    def graph(t):
        y = t * 2.0
        return [t, y, y, esgraph.constant(np.arange(4, dtype=i32)), ops.reshape(t, [3, 2]), ops.exp(y), y]

    got = run(graph, x)
    y = x * f32(2)
    for g, w in zip(got, [x, y, y, np.arange(4, dtype=i32), x.reshape(3, 2), np.exp(y.astype(f64)).astype(f32), y]):
        check(g, w)
    got[1][0, 0] = 123.0  # every output is an array of its own
    assert got[2][0, 0] == y[0, 0] and got[6][0, 0] == y[0, 0]


def test_symbolic_batch_at_two_sizes():
    graph, _ = build(mlp_block, np.zeros((1, 8), f32), symbolic={0: [(0, "batch")]})
    model = esgraph.compile(graph)
    for batch in (2, 5, 2):
        x = normal(rng_for(batch), (batch, 8))
        got = model(x)
        assert isinstance(got, tuple) and len(got) == 5
        for g, w in zip(got, mlp_block_reference(x)):
            check(g, w)


def test_symbolic_batch_bound_at_compile_time():
    graph, _ = build(broadcast_chain, np.zeros((1, 8), f32), symbolic={0: [(0, "batch")]})
    for batch in (3, 6):
        x = normal(rng_for(batch), (batch, 8))
        got = esgraph.compile(graph, shapes={"batch": batch}).run({"x0": x})
        for g, w in zip(got, broadcast_chain_reference(x)):
            check(g, w)


def test_two_symbolic_dimensions():
    rng = rng_for()
    graph, _ = build(lambda a, b: ops.softmax(a @ b, axis=-1), np.zeros((1, 3), f32), np.zeros((3, 1), f32),
                     symbolic={0: [(0, "m")], 1: [(1, "n")]})
    model = esgraph.compile(graph)
    for m, n in ((2, 5), (4, 1), (1, 7)):
        a, b = normal(rng, (m, 3)), normal(rng, (3, n))
        check(model(a, b), softmax_reference(a.astype(f64) @ b.astype(f64), -1).astype(f32))


# ---- 4. bad input at run time ---------------------------------------------------------------


def test_stats_give_the_models_facts_as_data():
    x = normal(rng_for("stats"), (8, 16))
    graph, _ = build(lambda t: ops.softmax(ops.relu(t) * t + 1.0), x, symbolic={0: [(0, "n")]})  # (a constant scale would become the softmax's)
    lazy = esgraph.compile(graph)
    stats = lazy.stats()
    assert stats["plan"].startswith("none yet") and "launches" not in stats  # no shapes yet: nothing compiled
    assert stats["plans"] == 0
    lazy(x)
    lazy(x[:3])
    fused = lazy.stats()
    assert set(fused) >= {  # the C struct's fields, every one
        "plans", "launches", "fused_groups", "fused_ops", "epilogue_groups", "f32_rows", "fast_kernels", "reference_kernels",
        "arena_bytes", "lower_bound_bytes", "no_reuse_bytes", "in_place_values", "streams", "events", "device_kernels",
        "device_kernel_launches", "library_calls", "device_copies", "host_launches", "device_bytes", "device_events", "captured", "reorders", "bindings", "stages", "sized_ops",
        "collectives", "collective_bytes", "plans_loaded", "cache_hits", "cache_misses", "cache_replaced", "weights_packed",
        "weights_loaded", "device_kernels_cached", "device_kernels_loaded"} - {
        "device_kernels", "device_kernel_launches", "device_copies", "host_launches", "device_bytes", "device_events", "captured",
        "device_kernels_cached", "device_kernels_loaded"}  # Ascend's own, not the CPU's
    assert fused["backend"] == "cpu"
    assert fused["plans"] == 2 and fused["bindings"] == 2  # symbolic plans for n up to 8 and up to 4, each bound once
    # relu, mul, add in one group; softmax over the last axis on its own kernel.
    assert (fused["launches"], fused["fused_groups"], fused["fused_ops"], fused["fast_kernels"]) == (2, 1, 3, 1)
    assert fused["arena_bytes"] >= fused["lower_bound_bytes"] == 4 * 16 * 4  # the group's result, for the class's 4 rows
    unfused = esgraph.compile(graph, fusion=False, shapes={"n": 8}).stats()
    assert (unfused["plans"], unfused["launches"], unfused["fused_groups"]) == (1, 4, 0)
    assert unfused["in_place_values"] > 0 and unfused["arena_bytes"] < unfused["no_reuse_bytes"]
    assert unfused["library_calls"] == 0 and "device_kernels" not in unfused and "captured" not in unfused  # no device


@pytest.mark.parametrize("work", ["compile", "load_model"])
def test_a_compile_or_a_load_lets_other_python_threads_run(work, tmp_path):
    """compile and load_model hold no GIL while they work: a thread running another model keeps
    running while a large graph compiles, or its compiled model loads with its 64 MiB of weights
    checked (its runs are timed: with the GIL held none would fall inside the call, only right
    after it). load_model held it (issue 47)."""
    import sys
    import threading
    import time
    with esgraph.GraphBuilder() as b:
        x = b.input("x", esgraph.f32, [8])
        small = esgraph.compile(b.build([x * 2.0]))
    with esgraph.GraphBuilder() as b:
        y = b.input("y", esgraph.f32, [64, 64])
        for _ in range(2000):  # about 0.1 s to compile
            y = ops.tanh(y @ y) + 1.0
        y = y + np.ones((4096, 64, 64), np.float32)  # 64 MiB whose checksum a load checks
        large = b.build([y])
    path = tmp_path / "large.esgm"
    if work == "load_model":
        esgraph.compile(large).save(path)
    ran, done = [], threading.Event()

    def serve():
        value = np.ones(8, np.float32)
        while not done.is_set():
            small.run([value])
            ran.append(time.perf_counter())
    server = threading.Thread(target=serve)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.001)  # a load of 25 ms is then many switch intervals long
    server.start()
    try:
        time.sleep(0.05)
        t0 = time.perf_counter()
        esgraph.compile(large) if work == "compile" else esgraph.load_model(path)
        t1 = time.perf_counter()
    finally:
        done.set()
        server.join()
        sys.setswitchinterval(interval)
    # Python may hand the other thread one switch interval as the call starts and as it ends.
    margin = 2 * 0.001
    inside = sum(t0 + margin < t < t1 - margin for t in ran)
    assert t1 - t0 > 3 * margin and inside > 10, (inside, t1 - t0)


def test_an_unknown_option_is_named_with_the_options_compile_takes():
    """A misspelt option is named in one line (pybind11 printed every argument of its signature),
    for a graph, a file and a value-dependent graph alike."""
    with esgraph.GraphBuilder("g") as b:
        g = b.build([b.input("x", esgraph.f32, [2]) + 1.0])
    with pytest.raises(TypeError, match=r"^compile: no option `streems`, `thread` \(it takes streams, threads, fusion, .*shapes, "
                                        r"backend, .*max_memory_bytes, .*\)$"):
        esgraph.compile(g, streems=2, thread=1)
    with pytest.raises(TypeError, match="compile: no option `bogus`"):
        esgraph.compile("no-such-file.onnx", bogus=1)
    esgraph.compile(g, streams=2, threads=1, shapes={}, backend_options={})  # every name of the signature passes


@pytest.mark.parametrize("option, value, message", [
    ("shapes", "n", "option `shapes` takes Dict[str, object], got str 'n'"),
    ("streams", "2", "option `streams` takes int, got str '2'"),
    ("max_plans", 1.5, "option `max_plans` takes int, got float 1.5"),
    ("backend_options", {"vnni": "a"}, "option `backend_options` takes Dict[str, int], got dict {'vnni': 'a'}"),
])
def test_an_option_of_the_wrong_type_is_named(option, value, message):
    """pybind11's "incompatible function arguments" printed the whole signature (issue 47)."""
    with esgraph.GraphBuilder("g") as b:
        g = b.build([b.input("x", esgraph.f32, [2]) + 1.0])
    with pytest.raises(TypeError, match="^compile: " + re.escape(message) + "$"):
        esgraph.compile(g, **{option: value})
    esgraph.compile(g, streams=np.int64(1), fusion=np.bool_(True))  # what pybind11 converts stays accepted
    esgraph.compile(g, fusion=1, backend=b"cpu")
