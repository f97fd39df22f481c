"""The Ascend backend on the simulated device (conftest.py says how these tests run): ops through
CANN's operator library (aclnn): gathers, slices, products, integer elementwise ops, pools,
reductions, pads, generators and scatters, and what CANN documents no op for."""
import numpy as np
import pytest

import esgraph
from esgraph import ops

from ascend_device import graph_of, check_same, calls


def test_gather_runs_as_index_select(acl_log):
    """An embedding lookup ([vocabulary, width] by [batch, tokens] indices) and a gather along a
    middle axis: aclnnIndexSelect over a flat view of the indices, its result viewed back."""
    rng = np.random.default_rng(8)
    table = rng.standard_normal((50, 16)).astype(np.float32)
    tokens = rng.integers(0, 50, (4, 7)).astype(np.int32)
    with esgraph.GraphBuilder("embedding") as b:
        g = b.build([ops.gather(b.input("t", esgraph.f32, [50, 16]), b.input("i", esgraph.i32, [4, 7])) * 2.0])
    check_same(g, [table, tokens])
    x = rng.standard_normal((3, 5, 6)).astype(np.float32)
    picks = np.array([[4, 0], [2, 2]], np.int64)
    with esgraph.GraphBuilder("middle") as b:
        g = b.build([ops.gather(b.input("x", esgraph.f32, [3, 5, 6]), b.input("i", esgraph.i64, [2, 2]), axis=-2)])
    check_same(g, [x, picks])
    assert len(calls(acl_log(), "aclnnIndexSelectGetWorkspaceSize")) == 2
    # Negative indices count from the end; CANN documents none for IndexSelect (the simulator
    # refuses them), so the device wraps them first: where(i < 0, i + dim, i) through aclnn's
    # integer ops, or a constant rewritten.
    before = len(acl_log())
    check_same(g, [x, np.array([[-1, 0], [-5, 4]], np.int64)])
    assert calls(acl_log()[before:], "aclnnSWhereGetWorkspaceSize")
    with esgraph.GraphBuilder("constant") as b:
        g = b.build([ops.gather(b.input("x", esgraph.f32, [3, 5, 6]), esgraph.constant(np.array([-1, 0, -6], np.int32)), axis=2)])
    check_same(g, [x])


def test_slices_copy_a_strided_view(acl_log):
    """A slice is a view of x (offset at its starts, strides times its steps) that
    aclnnInplaceCopy copies into the result: axes in any order, negative starts, ends past the
    end, steps; a negative step has no such view and is refused."""
    x = np.random.default_rng(9).standard_normal((6, 9, 10)).astype(np.float32)
    for kw in (dict(starts=[1], ends=[5]), dict(starts=[2, -7], ends=[100, 9], axes=[2, 1], steps=[3, 2]),
               dict(starts=[0, 1, 1], ends=[6, 9, 10], steps=[2, 4, 1])):
        check_same(graph_of(lambda a: ops.slice(a, **kw) * 2.0, x.shape), [x], ai_cores=2)
    assert len(calls(acl_log(), "aclnnInplaceCopyGetWorkspaceSize")) == 3
    with pytest.raises(esgraph.UnsupportedError, match=r"slice x1 \(a negative step"):
        esgraph.compile(graph_of(lambda a: ops.slice(a, starts=[-1], ends=[-7], steps=[-1]), x.shape), backend="ascend-sim")


def test_products_arg_reductions_and_top_k_run_on_aclnn(acl_log):
    """reduce_prod over one axis as aclnnProdDim and over all as aclnnProd (over several, one
    axis at a time); argmax and argmin as aclnnArgMax/ArgMin and top_k as aclnnTopk, whose
    indices are int64. The data has no ties, whose order CANN does not document."""
    rng = np.random.default_rng(13)
    x = rng.permutation(3 * 4 * 6).reshape(3, 4, 6).astype(np.float32) / 10 - 3  # distinct values
    for kw in (dict(axes=[1]), dict(axes=[-1], keepdims=True), dict(), dict(axes=[0, 1, 2], keepdims=True)):
        check_same(graph_of(lambda a: ops.reduce_prod(a * 0.25 + 1.0, **kw), x.shape), [x])
    # Several but not all axes: one product per axis (device lowering), then a reshape.
    for kw in (dict(axes=[0, 2]), dict(axes=[-1, 0], keepdims=True)):
        check_same(graph_of(lambda a: ops.reduce_prod(a * 0.25 + 1.0, **kw), x.shape), [x])
    for fn in (ops.argmax, ops.argmin):
        for kw in (dict(axis=1), dict(axis=-1, keepdims=True)):
            check_same(graph_of(lambda a: fn(a, **kw), x.shape), [x])
    for kw in (dict(k=3), dict(k=2, axis=1, largest=False), dict(k=0, axis=0)):
        check_same(graph_of(lambda a: ops.top_k(a, **kw), x.shape), [x])
    log = acl_log()
    assert len(calls(log, "aclnnProdDimGetWorkspaceSize")) == 2 + 4 and len(calls(log, "aclnnProdGetWorkspaceSize")) == 2
    assert len(calls(log, "aclnnArgMaxGetWorkspaceSize")) == 2 and len(calls(log, "aclnnArgMinGetWorkspaceSize")) == 2
    assert calls(log, "aclnnTopkGetWorkspaceSize")


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_elementwise_ops_run_on_aclnn(dtype, acl_log):
    """Elementwise ops of integer values run one by one through CANN's ops of the same names
    (the generated kernels compute floats and bools); a float op after them still fuses into a
    kernel. Integer division and other integer widths are refused with the reason."""
    rng = np.random.default_rng(14)
    a, b = (rng.integers(-50, 50, (4, 6)).astype(dtype) for _ in range(2))
    t = esgraph.i32 if dtype == np.int32 else esgraph.i64

    def graph(x, y):
        s = (x + y) * 3 - ops.maximum(x, y)
        m = ops.minimum(x, ops.neg(y))
        w = ops.where(ops.greater(x, y), s, ops.abs(m))
        flags = [ops.less(x, y), ops.less_equal(x, y), ops.greater_equal(x, y), ops.equal(x, s), ops.not_equal(x, y)]
        return [w, ops.cast(w, esgraph.f32) * 0.5 + 1.0, ops.cast(ops.cast(x, esgraph.f32) * 1.5, t)] + flags

    with esgraph.GraphBuilder("ints") as bld:
        outs = graph(bld.input("x", t, [4, 6]), bld.input("y", t, [1, 6]))
    g = bld.build(outs)
    cpu = esgraph.compile(g).run([a, b[:1]])
    sim = esgraph.compile(g, backend="ascend-sim").run([a, b[:1]])
    for c, s in zip(cpu, sim):
        assert s.dtype == c.dtype and s.shape == c.shape
        np.testing.assert_array_equal(s, c)
    log = acl_log()
    for name in ("aclnnAdd", "aclnnSub", "aclnnMul", "aclnnMaximum", "aclnnMinimum", "aclnnNeg", "aclnnAbs", "aclnnGtTensor",
                 "aclnnSWhere", "aclnnCast", "aclnnLtTensor", "aclnnLeTensor", "aclnnGeTensor", "aclnnEqTensor", "aclnnNeTensor"):
        assert calls(log, name + "GetWorkspaceSize"), name
    assert calls(log, "aclrtLaunchKernelWithConfig")  # the f32 mul and add: one generated kernel
    # The library's ops promise nothing about an output over an input (a cast between i32 and f32
    # would write one type over the other): none is planned in place, unlike on the CPU.
    with esgraph.GraphBuilder("chain") as bld:
        x = bld.input("x", t, [64])
        chain = bld.build([ops.cast(ops.cast(ops.neg(x + x) * 3, esgraph.f32), t) - x])
    assert esgraph.compile(chain, fusion=False).stats()["in_place_values"] > 0
    assert esgraph.compile(chain, backend="ascend-sim", fusion=False).stats()["in_place_values"] == 0
    with esgraph.GraphBuilder("div") as bld:
        x = bld.input("x", t, [4])
        q = bld.build([x / x])
    with pytest.raises(esgraph.UnsupportedError, match=r"div x1 \(integer division"):
        esgraph.compile(q, backend="ascend-sim")
    with esgraph.GraphBuilder("i8") as bld:
        x = bld.input("x", esgraph.i8, [4])
        q = bld.build([x + x])
    with pytest.raises(esgraph.UnsupportedError, match=r"add x1 \(i8 \(i32 and i64 only among integers\)"):
        esgraph.compile(q, backend="ascend-sim")
    with esgraph.GraphBuilder("f64") as bld:
        x = bld.input("x", esgraph.f64, [4])
        q = bld.build([x / x, x + x])
    with pytest.raises(esgraph.UnsupportedError, match=r"add x1 \(f64 \(f32, f16 and bf16 only among floats\)\), "
                                                       r"div x1 \(f64 division"):
        esgraph.compile(q, backend="ascend-sim")


POOLS = [dict(kernel=[2, 2]), dict(kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
         dict(kernel=[3, 2], strides=[2, 3], ceil_mode=True), dict(kernel=[3, 3], strides=[2, 2], pads=[1, 0, 2, 1])]


@pytest.mark.parametrize("pool", ["max_pool2d", "avg_pool2d"])
def test_pooling_runs_on_aclnn(pool, acl_log):
    """max_pool2d as aclnnMaxPool (four pads), avg_pool2d as aclnnAvgPool2d (the mean of the
    window's elements inside the input, one pad per axis of at most half the window): other
    padding becomes an explicit pad, a pool without padding and a factor per position (window
    area over its elements inside the input), so the mean still counts only those."""
    x = np.random.default_rng(10).standard_normal((2, 3, 9, 10)).astype(np.float32)
    fn = getattr(ops, pool)
    for kw in POOLS + [dict(kernel=[3, 3], pads=[2, 2, 2, 2]), dict(kernel=[2, 3], strides=[2, 2], pads=[0, 0, 1, 1], ceil_mode=True)]:
        if pool == "max_pool2d" and kw.get("pads") == [2, 2, 2, 2]:
            continue
        check_same(graph_of(lambda a: fn(a, **kw) + 1.0, x.shape), [x])
    log = acl_log()
    assert calls(log, "aclnnMaxPoolGetWorkspaceSize" if pool == "max_pool2d" else "aclnnAvgPool2dGetWorkspaceSize")
    if pool == "avg_pool2d":
        assert len(calls(log, "aclnnConstantPadNdGetWorkspaceSize")) == 3
    # More padding than CANN takes (a window's worth in all for MaxPool; for AvgPool2d, a
    # ceil-mode window reaching past the padded input) is refused with the reason.
    why = "more padding than the window" if pool == "max_pool2d" else "asymmetric padding"
    kw = dict(kernel=[3, 3], pads=[2, 2, 2, 2]) if pool == "max_pool2d" else dict(kernel=[3, 3], strides=[2, 2], pads=[0, 0, 1, 0], ceil_mode=True)
    with pytest.raises(esgraph.UnsupportedError, match=why):
        esgraph.compile(graph_of(lambda a: fn(a, **kw), (2, 3, 7, 6)), backend="ascend-sim")


def test_what_cann_documents_no_aclnn_op_for_is_refused_by_name():
    """The limits of CANN's operator documentation: 6 dims at most for matmul, no bool
    aclnnArange (a range too large to fold), conv2d padding within 255 on Atlas A2."""
    cases = [
        (graph_of(lambda a, w: ops.matmul(a, w), (1,) * 5 + (2, 3), (3, 4)), r"rank 7 \(aclnnMatmul takes at most 6 dims\)"),
        (graph_of(lambda a: ops.where(ops.range(limit=70000.0, dtype=esgraph.bool_), a, a), (70000,)), "aclnnArange makes"),
        (graph_of(lambda a, w: ops.conv2d(a, w, pads=[256, 256, 256, 256]), (1, 1, 3, 3), (1, 1, 3, 3)), "padding beyond 255"),
    ]
    for graph, why in cases:
        with pytest.raises(esgraph.UnsupportedError, match=why):
            esgraph.compile(graph, backend="ascend-sim")


@pytest.mark.parametrize("reduce", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min"])
def test_reductions_run_on_aclnn(reduce):
    x = np.random.default_rng(11).standard_normal((3, 4, 5, 6)).astype(np.float32)
    fn = getattr(ops, reduce)
    for kw in (dict(axes=[2, 3], keepdims=True), dict(axes=[-1]), dict()):
        check_same(graph_of(lambda a: fn(a, **kw), x.shape), [x])


# ---- ops through CANN's operator library (aclnn) -----------------------------------------------------
def test_aclnn_ops_match_the_cpu():
    rng = np.random.default_rng(6)

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    a, b, batch = r(6, 5), r(5, 7), r(3, 6, 5)
    check_same(graph_of(lambda x, y: ops.matmul(x, y), a.shape, b.shape), [a, b])
    check_same(graph_of(lambda x, y: ops.matmul(x, y, transpose_a=True, transpose_b=True), (5, 6), (7, 5)), [a.T.copy(), b.T.copy()])
    check_same(graph_of(lambda x, y: ops.matmul(x, y), batch.shape, b.shape), [batch, b])  # batch broadcast
    x = r(4, 6, 10)
    for axis in (-1, 1, 0):
        check_same(graph_of(lambda t: ops.softmax(t, axis=axis), x.shape), [x])
    check_same(graph_of(lambda t: ops.layer_norm(t), x.shape), [x])
    check_same(graph_of(lambda t, s, c: ops.layer_norm(t, scale=s, bias=c, axis=1, epsilon=1e-3), x.shape, (6, 10), (6, 10)),
               [x, r(6, 10), r(6, 10)])
    for axes, keep in (([], False), ([1], True), ([-1, 0], False)):
        check_same(graph_of(lambda t: ops.reduce_sum(t, axes=axes, keepdims=keep), x.shape), [x])
    for perm in ([2, 0, 1], [0, 2, 1], []):
        check_same(graph_of(lambda t: ops.transpose(t, perm=perm), x.shape), [x])
    check_same(graph_of(lambda t, u: ops.concat([t, u, t], axis=1), x.shape, (4, 2, 10)), [x, r(4, 2, 10)])
    image, w, wg, bias = r(2, 4, 9, 11), r(6, 4, 3, 3), r(6, 2, 3, 3), r(6)
    check_same(graph_of(lambda t, k: ops.conv2d(t, k), image.shape, w.shape), [image, w])
    check_same(graph_of(lambda t, k, c: ops.relu(ops.conv2d(t, k, bias=c, strides=[2, 1], pads=[1, 2, 1, 2], dilations=[1, 2],
                                                             groups=2)), image.shape, wg.shape, bias.shape), [image, wg, bias])
    # More padding on one side (TF's SAME at stride 2, one-sided): an explicit pad, then a
    # symmetric convolution.
    for pads, strides in (([0, 0, 1, 1], [2, 2]), ([2, 1, 0, 3], [1, 1])):
        check_same(graph_of(lambda t, k: ops.conv2d(t, k, pads=pads, strides=strides), image.shape, w.shape), [image, w])


def test_pad_runs_on_aclnn(acl_log):
    """pad in constant mode as aclnnConstantPadNd (pairs from the last axis on, the value as a
    scalar); reflect and edge are refused with the reason."""
    x = np.random.default_rng(12).standard_normal((2, 3, 5, 4)).astype(np.float32)
    for kw in (dict(pads=[0, 0, 1, 2, 0, 0, 3, 0]), dict(pads=[1, 0, 0, 1, 0, 2, 2, 0], value=-1.5)):
        check_same(graph_of(lambda a: ops.pad(a, **kw) * 2.0, x.shape), [x])
    half = x.astype(np.float16)
    with esgraph.GraphBuilder("f16") as b:
        y = ops.pad(b.input("x", esgraph.f16, list(x.shape)), [0, 1, 0, 0, 0, 0, 2, 1], value=0.5)
    g = b.build([y])
    np.testing.assert_array_equal(esgraph.compile(g, backend="ascend-sim").run([half])[0], esgraph.compile(g).run([half])[0])
    assert len(calls(acl_log(), "aclnnConstantPadNdGetWorkspaceSize")) == 3


@pytest.mark.parametrize("mode, aclnn", [("reflect", "aclnnReflectionPad2d"), ("edge", "aclnnReplicationPad2d")])
def test_border_pads_run_on_aclnn(mode, aclnn, acl_log):
    """reflect and edge pads of the last two axes (of a tensor of any rank, viewed as 3-D) as
    CANN's 2-D border pads; other axes, and pads of an axis's length or more, are refused."""
    rng = np.random.default_rng(14)
    for shape, pads in (((2, 3, 5, 4), [0, 0, 1, 2, 0, 0, 3, 0]), ((6,), [2, 5]), ((4, 5), [3, 0, 1, 4]),
                        ((2, 2, 2, 4, 5), [0, 0, 0, 2, 1, 0, 0, 0, 3, 4])):
        x = rng.standard_normal(shape).astype(np.float32)
        check_same(graph_of(lambda a: ops.pad(a, pads, mode=mode) + 1.0, x.shape), [x])
    assert len(calls(acl_log(), aclnn + "GetWorkspaceSize")) == 4
    with pytest.raises(esgraph.UnsupportedError, match=r"pad x1 \(reflect or edge padding of other axes than the last two"):
        esgraph.compile(graph_of(lambda a: ops.pad(a, [1, 0, 0, 0, 0, 0], mode=mode), (3, 4, 5)), backend="ascend-sim")
    with pytest.raises(esgraph.UnsupportedError, match=r"pad x1 \(reflect or edge padding of an axis by its length or more"):
        esgraph.compile(graph_of(lambda a: ops.pad(a, [0, 4, 0, 0], mode="edge"), (3, 4)), backend="ascend-sim")
    with pytest.raises(esgraph.UnsupportedError, match=r"pad x1 \(reflect or edge padding of a rank-0 tensor"):
        esgraph.compile(graph_of(lambda a: ops.pad(a, [], mode=mode) * 2.0, ()), backend="ascend-sim")


def test_large_generators_run_on_aclnn(acl_log):
    """fill and range fold into constants up to 65,536 elements; larger ones are made on the
    device, by aclnnInplaceFillScalar and aclnnArange."""
    n = 70000
    x = np.random.default_rng(16).standard_normal(n).astype(np.float32)
    with esgraph.GraphBuilder("generators") as b:
        xi = b.input("x", esgraph.f32, [n])
        g = b.build([xi * ops.fill([n], value=2.5), ops.range(n * 0.5, start=-3.0, step=0.5),
                     ops.range(n, dtype=esgraph.i32) + ops.fill([n], value=7, dtype=esgraph.i32)])
    check_same(g, [x])
    log = acl_log()
    assert len(calls(log, "aclnnInplaceFillScalarGetWorkspaceSize")) == 2 and len(calls(log, "aclnnArangeGetWorkspaceSize")) == 2


@pytest.mark.parametrize("reduction", ["none", "add", "mul"])
def test_scatters_run_on_aclnn(reduction, acl_log):
    """scatter_elements as aclnnScatter (its reduction as CANN's reduce), scatter_nd as
    aclnnScatterNd (replacing only); negative indices, from an input or a constant, are wrapped
    first, as for gather."""
    rng = np.random.default_rng(15)
    data = rng.standard_normal((4, 6)).astype(np.float32)
    updates = rng.standard_normal((3, 6)).astype(np.float32)
    # Distinct positions per column: which of several updates wins is undocumented for CANN.
    indices = np.array([[0, -1, 2, 3, -4, 1], [1, 0, -1, 2, 3, 3], [3, 2, 0, -1, 1, 0]], np.int64)
    with esgraph.GraphBuilder("elements") as b:
        d, i, u = b.input("d", esgraph.f32, [4, 6]), b.input("i", esgraph.i64, [3, 6]), b.input("u", esgraph.f32, [3, 6])
        g = b.build([ops.scatter_elements(d, i, u, axis=0, reduction=reduction) * 2.0])
    check_same(g, [data, indices, updates])
    with esgraph.GraphBuilder("constant") as b:
        d, u = b.input("d", esgraph.f32, [4, 6]), b.input("u", esgraph.f32, [4, 2])
        g = b.build([ops.scatter_elements(d, esgraph.constant(np.array([[-1, 0]] * 4, np.int32)), u, axis=-1, reduction=reduction)])
    check_same(g, [data, rng.standard_normal((4, 2)).astype(np.float32)])
    assert len(calls(acl_log(), "aclnnScatterGetWorkspaceSize")) == 2
    with esgraph.GraphBuilder("nd") as b:
        d, i, u = b.input("d", esgraph.f32, [4, 6]), b.input("i", esgraph.i64, [2, 1]), b.input("u", esgraph.f32, [2, 6])
        g = b.build([ops.scatter_nd(d, i, u, reduction=reduction)])
    if reduction != "none":
        with pytest.raises(esgraph.UnsupportedError, match=r"scatter_nd x1 \(a reduction \(aclnnScatterNd replaces\)"):
            esgraph.compile(g, backend="ascend-sim")
        return
    check_same(g, [data, np.array([[-1], [1]], np.int64), updates[:2].copy()])
    assert len(calls(acl_log(), "aclnnScatterNdGetWorkspaceSize")) == 1


def test_an_executor_planned_and_never_run_is_freed(acl_log, monkeypatch):
    """Each aclnn op is planned when the model is built, for its capture or first run; opbase
    frees an executor only when it is queued, so a model dropped before that frees its own with
    aclDestroyAclOpExecutor, and one whose executors were queued frees none twice (the simulated
    library refuses a second free, and an executor run after it was freed)."""
    x = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)
    graph = graph_of(lambda a: ops.matmul(a, ops.transpose(a)), x.shape)

    def destroyed(build):
        before = len(acl_log())
        build()
        return [line for line in acl_log()[before:] if line.startswith("aclDestroyAclOpExecutor")]
    assert destroyed(lambda: esgraph.compile(graph, backend="ascend-sim")) == []  # the capture queued it
    monkeypatch.setenv("ACLSIM_NO_CAPTURE", "1")  # replayed instead: the first run queues it
    assert destroyed(lambda: esgraph.compile(graph, backend="ascend-sim")) == ["aclDestroyAclOpExecutor aclnnMatmul"]

    def run_once():
        np.testing.assert_allclose(esgraph.compile(graph, backend="ascend-sim")(x), x @ x.T, rtol=1e-5, atol=1e-5)
    assert destroyed(run_once) == []


def test_f32_products_on_310p_ask_for_its_float16_math(monkeypatch):
    """310P's aclnnMatmul refuses KEEP_DTYPE for FLOAT (ops-nn's rule for it computes f32
    products in FLOAT16; the simulated library refuses it too): there the backend asks for
    ALLOW_FP32_DOWN_PRECISION; elsewhere f32 stays f32. (The simulator multiplies in f32 either
    way; ascend-check bounds the device's FLOAT16 products on a 310P.)"""
    monkeypatch.setenv("ACLSIM_SOC", "Ascend310P3")
    x = np.random.default_rng(6).standard_normal((4, 8)).astype(np.float32)
    graph = graph_of(lambda a: ops.matmul(a, ops.transpose(a)), x.shape)
    np.testing.assert_allclose(esgraph.compile(graph, backend="ascend-sim")(x), x @ x.T, rtol=1e-5, atol=1e-5)
