"""Collectives in a world of one process (no launcher): shapes, refusals at build time, passes
that must keep them, the report and stats. tests/distributed runs them over two ranks."""
import numpy as np
import pytest

import esgraph as eg
from esgraph import ops


def test_world_of_one():
    assert eg.world() == (1, 0)


def test_each_collective_is_a_copy_in_a_world_of_one(b):
    x = b.input("x", eg.f32, [2, 4])
    outs = [ops.all_reduce(x, op="avg"), ops.all_gather(x, axis=1), ops.reduce_scatter(x, axis=1),
            ops.broadcast(x), ops.all_to_all(x, split_axis=0, concat_axis=1)]
    assert [tuple(o.shape) for o in outs] == [(2, 4)] * 5
    m = eg.compile(b.build(outs))
    xv = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    for got in m.run({"x": xv}):
        np.testing.assert_array_equal(got, xv)
    stats = m.stats()
    assert stats["collectives"] == 5 and stats["collective_bytes"] == 5 * xv.nbytes
    assert stats["streams"] == 2 and stats["reference_kernels"] == 0
    assert stats["stream_launches"][1] == {"stream": 1, "launches": 5, "runs": "collectives"}
    assert any(c["call"].startswith("all_gather f32[2,4] axis 1 over [0]") for c in stats["collective_calls"])
    assert (stats["collective_transport"], stats["world_size"]) == ("local", 1)


def test_identical_collectives_are_neither_merged_nor_dropped(b):
    x = b.input("x", eg.f32, [3])
    a, c = ops.all_reduce(x), ops.all_reduce(x)
    ops.all_reduce(x, op="max")  # read by nothing: every rank must still take part
    m = eg.compile(b.build([a + c]))
    assert m.stats()["collectives"] == 3
    np.testing.assert_array_equal(m.run({"x": np.ones(3, np.float32)})[0], np.full(3, 2, np.float32))


def test_a_collective_of_constants_is_not_folded(b):
    y = ops.all_reduce(eg.constant(np.ones(4, np.float32)))
    m = eg.compile(b.build([y]))
    assert m.stats()["collectives"] == 1


@pytest.mark.parametrize("ranks, message", [
    ([1], "names rank 1, outside the world of 1 process"),
    ([0, 0], "names rank 0 twice"),
    ([-1], "is -1, outside \\[0, inf\\]"),
])
def test_a_group_outside_the_world_is_refused_where_it_is_built(b, ranks, message):
    x = b.input("x", eg.f32, [4])
    with pytest.raises(eg.AttributeValueError, match=message):
        ops.all_reduce(x, ranks=ranks)


def test_bad_collective_attributes_are_refused_where_they_are_built(b):
    x = b.input("x", eg.f32, [4])
    i = b.input("i", eg.i32, [4])
    with pytest.raises(eg.DTypeError, match="`avg` of i32 would round"):
        ops.all_reduce(i, op="avg")
    with pytest.raises(eg.DTypeError, match="`avg` of i32"):
        ops.reduce_scatter(i, op="avg")
    with pytest.raises(eg.AttributeValueError, match="`root` = 3 is outside the world"):
        ops.broadcast(x, root=3)
    with pytest.raises(eg.AttributeValueError, match="`peer` = 0 is this process itself"):
        ops.send(x, peer=0)
    with pytest.raises(eg.AttributeValueError, match="`peer` = 2 is outside the world"):
        ops.recv(shape=[4], peer=2)
    with pytest.raises(eg.AttributeValueError, match="axis"):
        ops.all_gather(x, axis=1)
    with pytest.raises(eg.AttributeValueError):
        ops.all_reduce(x, op="mean")
    with pytest.raises(eg.DTypeError):
        ops.all_reduce(b.input("flag", eg.bool_, [2]))


# ---- esgraph.parallel on one process (tests/distributed runs it over two) ----------------------
def test_parallel_layers_are_the_whole_layers_in_a_world_of_one(b):
    from esgraph import parallel
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    w = [rng.standard_normal((8, 8)).astype(np.float32) * 0.1 for _ in range(4)]
    xi = b.input("x", eg.f32, [2, 5, 8])
    attn = parallel.ParallelAttention(*w, heads=2)(xi)
    m = eg.compile(b.build([attn]))
    got = m.run({"x": x})[0]
    q, k, v = (x @ wi for wi in w[:3])
    heads = lambda t: t.reshape(2, 5, 2, 4).transpose(0, 2, 1, 3)  # noqa: E731
    s = heads(q) @ heads(k).transpose(0, 1, 3, 2) / 2.0
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    want = (p @ heads(v)).transpose(0, 2, 1, 3).reshape(2, 5, 8) @ w[3]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert m.stats()["collectives"] == 1


def test_parallel_refuses_what_does_not_split():
    from esgraph import parallel
    with pytest.raises(ValueError, match="not in the group"):
        parallel.Group([3])
    with pytest.raises(ValueError, match="heads do not split"):
        parallel.ParallelAttention(*[np.zeros((4, 4), np.float32)] * 4, heads=3, group=_FakeGroup(2))
    with pytest.raises(ValueError, match=r"does not split in 2 along axis 1"):
        parallel.ColumnParallelLinear(np.zeros((4, 3), np.float32), group=_FakeGroup(2))


class _FakeGroup:
    """A group of `size` ranks, to check the splitting rules without a job of that size."""

    def __init__(self, size):
        from esgraph import parallel
        self.size, self.index, self.ranks = size, 0, list(range(size))
        self.shard = lambda a, axis: parallel.Group.shard(self, a, axis)


def test_parallel_helpers_are_a_group_or_its_ranks():
    from esgraph import parallel
    assert parallel.Group().ranks == [0] and parallel.Group([0]).size == 1


def test_onnx_sharding_on_one_process_and_its_refusals():
    import esgraph.onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(5)
    w, b = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "w", "b"], ["y"], alpha=0.5)], "gemm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal((2, 4)).astype(np.float32)
    for how in ("column", "row"):
        got = eg.compile(esgraph.onnx.load(model, sharding={"w": how})).run({"x": x})[0]
        np.testing.assert_allclose(got, 0.5 * x @ w + b, rtol=1e-5, atol=1e-6)
    for spec, message in (({"w": "diagonal"}, "say 'column' or 'row'"), ({"v": "row"}, "no initializer of that name"),
                          ({"b": "column"}, "no MatMul or Gemm reads it as its weight")):
        with pytest.raises(esgraph.onnx.ImportFailed, match=message):
            esgraph.onnx.load(model, sharding=spec)


# ---- on the simulated Ascend device, through the simulated HCCL --------------------------------
def test_collectives_run_through_hccl_on_the_simulated_device(b):
    x = b.input("x", eg.f32, [4, 6])
    outs = [ops.all_reduce(x), ops.all_gather(x), ops.reduce_scatter(x, op="max"), ops.broadcast(x), ops.all_to_all(x)]
    m = eg.compile(b.build(outs), backend="ascend-sim")
    xv = np.arange(24, dtype=np.float32).reshape(4, 6)
    for got in m.run({"x": xv}):
        np.testing.assert_array_equal(got, xv)
    stats = m.stats()
    assert stats["hccl_library"] == "libhccl.so"
    calls = {c["function"]: c["count"] for c in stats["hccl_calls"]}
    assert sum(calls.values()) == 5 and calls["HcclAllReduce"] == 1 and calls["HcclAlltoAll"] == 1
    # HCCL's collectives are queued as they run, not captured: the launch list is replayed.
    assert (stats["captured"], stats["capture_scope"]) == (0, "none")


@pytest.mark.parametrize("build, message", [
    (lambda x, u: ops.all_reduce(u), "HCCL reduces int8, int16, int32, int64, fp16, fp32 and bf16 on Atlas A2, not u8"),
    (lambda x, u: ops.all_reduce(x, op="avg"), "HCCL has no average"),
    (lambda x, u: ops.all_gather(x, axis=1), "HCCL moves whole pieces in rank order: all_gather along axis 1 of f32\\[4,6\\]"),
])
def test_what_hccl_cannot_run_is_refused_by_name_or_runs_on_the_host(build, message):
    def graph():
        with eg.GraphBuilder("refused") as b:
            x, u = b.input("x", eg.f32, [4, 6]), b.input("u", eg.u8, [4, 6])
            y = build(x, u)
        return b.build([y])
    with pytest.raises(eg.UnsupportedError, match=message):
        eg.compile(graph(), backend="ascend-sim")
    m = eg.compile(graph(), backend="ascend-sim", host_fallback=True)
    feeds = {"x": np.arange(24, dtype=np.float32).reshape(4, 6), "u": np.arange(24, dtype=np.uint8).reshape(4, 6)}
    y = m.run(feeds)[0]
    assert y.shape in ((4, 6),) and m.stats()["host_launches"] == len(m.stats()["host_ops"]) == 1


def test_the_simulated_hccl_keeps_canns_argument_rules():
    """The simulated libhccl.so called as CANN's would be: wrong types, host memory, bad ranks refused."""
    import ctypes
    from pathlib import Path
    sim = Path(eg.__file__).resolve().parents[2] / "ascend_sim"
    acl = ctypes.CDLL(str(sim / "libascendcl.so"), mode=ctypes.RTLD_GLOBAL)
    hccl = ctypes.CDLL(str(sim / "libhccl.so"))
    assert acl.aclInit(None) in (0, 100002)  # (already initialized by an earlier test)
    assert acl.aclrtSetDevice(0) == 0
    stream = ctypes.c_void_p()
    assert acl.aclrtCreateStream(ctypes.byref(stream)) == 0
    device = ctypes.c_void_p()
    assert acl.aclrtMallocAlign32(ctypes.byref(device), ctypes.c_size_t(4096), 0) == 0
    info = ctypes.create_string_buffer(4108)
    comm = ctypes.c_void_p()
    assert hccl.HcclGetRootInfo(info) == 0
    assert hccl.HcclCommInitRootInfo(1, info, 0, ctypes.byref(comm)) == 0
    assert hccl.HcclCommInitRootInfo(1, ctypes.create_string_buffer(4108), 0, ctypes.byref(ctypes.c_void_p())) == 1  # not a root info
    args = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)
    hccl.HcclAllReduce.argtypes = args
    F32, U8, BF16, SUM, PROD = 4, 7, 11, 0, 1
    assert hccl.HcclAllReduce(device, device, 16, F32, SUM, comm, stream) == 0
    assert hccl.HcclAllReduce(device, device, 16, U8, SUM, comm, stream) == 5  # HCCL_E_NOT_SUPPORT
    assert hccl.HcclAllReduce(device, device, 16, BF16, PROD, comm, stream) == 5
    host = (ctypes.c_float * 16)()
    assert hccl.HcclAllReduce(ctypes.addressof(host), device, 16, F32, SUM, comm, stream) == 1  # HCCL_E_PARA: not device memory
    assert hccl.HcclAllReduce(device, device, 2048, F32, SUM, comm, stream) == 1  # beyond the allocation
    assert hccl.HcclAllReduce(device, device, 16, F32, SUM, None, stream) == 2  # HCCL_E_PTR
    hccl.HcclSend.argtypes = (ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int32, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p)
    assert hccl.HcclSend(device, 16, F32, 0, comm, stream) == 1  # to itself
    assert acl.aclrtSynchronizeStream(stream) == 0
    assert hccl.HcclCommDestroy(comm) == 0
    assert acl.aclrtFree(device) == 0
    assert acl.aclrtDestroyStream(stream) == 0
