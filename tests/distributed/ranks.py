"""What each rank of an `mpirun -np 2` job runs for tests/distributed/test_multi_rank.py.

`python ranks.py <scenario>`; every rank prints `ok <scenario>` when its checks pass. The
expected values are computed here with numpy from what every rank is known to hold (rank r's
x is base + 100 r), never from esgraph's own output.
"""
import os
import sys
import time

import numpy as np

import esgraph as eg
from esgraph import ops

SIZE, RANK = eg.world()


def held(r, shape, dtype=np.float32):
    """The tensor rank r contributes."""
    return (np.arange(np.prod(shape)).reshape(shape) % 7 + 1 + 100 * r).astype(dtype)


def every(shape, dtype=np.float32):
    return [held(r, shape, dtype) for r in range(SIZE)]


def check(name, got, want, tol=0.0):
    if got.shape != want.shape or not np.allclose(got, want, rtol=tol, atol=tol):
        raise SystemExit(f"rank {RANK}: {name}: got {got.shape}\n{got}\nwant {want.shape}\n{want}")


def fails_by_name(model, feeds, *needles):
    """Runs `model`, which must raise CommunicationError with every one of `needles` in its message."""
    try:
        model.run(feeds)
    except eg.CommunicationError as e:
        print(f"rank {RANK} failed: {e}", flush=True)
        assert all(n in str(e) for n in needles), str(e)
        return
    raise SystemExit(f"rank {RANK}: no CommunicationError ({needles})")


def scenario_ops():
    x = held(RANK, [4, 6])
    b = eg.GraphBuilder("ops")
    xi = b.input("x", eg.f32, [4, 6])
    outs = [ops.all_reduce(xi, op=k) for k in ("sum", "max", "min", "prod", "avg")]
    outs += [ops.all_gather(xi, axis=0), ops.all_gather(xi, axis=1), ops.reduce_scatter(xi, axis=0),
             ops.reduce_scatter(xi, axis=1, op="max"), ops.broadcast(xi, root=1), ops.all_to_all(xi, split_axis=1, concat_axis=0),
             ops.all_gather(xi, axis=1, ranks=[1, 0])]
    m = eg.compile(b.build(outs))
    got = m.run({"x": x})
    xs = np.stack(every([4, 6]))
    check("sum", got[0], xs.sum(0))
    check("max", got[1], xs.max(0))
    check("min", got[2], xs.min(0))
    check("prod", got[3], xs.prod(0), 1e-6)
    check("avg", got[4], xs.mean(0), 1e-6)
    check("gather 0", got[5], np.concatenate(list(xs), 0))
    check("gather 1", got[6], np.concatenate(list(xs), 1))
    check("scatter 0", got[7], np.split(xs.sum(0), SIZE, 0)[RANK])
    check("scatter 1", got[8], np.split(xs.max(0), SIZE, 1)[RANK])
    check("broadcast", got[9], xs[1])
    check("all_to_all", got[10], np.concatenate([np.split(xs[r], SIZE, 1)[RANK] for r in range(SIZE)], 0))
    check("gather reversed", got[11], np.concatenate([xs[1], xs[0]], 1))
    stats = m.stats()
    assert stats["collectives"] == 12 and stats["streams"] == 2, stats
    # Other dtypes through the same calls: f16 reduces in f32 (MPI has no f16), integers exactly.
    for dt, np_dt, tol in ((eg.f16, np.float16, 1e-2), (eg.i32, np.int32, 0), (eg.u8, np.uint8, 0), (eg.f64, np.float64, 0)):
        b = eg.GraphBuilder("dtypes")
        xi = b.input("x", dt, [3, 4])
        m = eg.compile(b.build([ops.all_reduce(xi), ops.all_reduce(xi, op="max")]))
        xs = np.stack([held(r, [3, 4], np_dt) for r in range(SIZE)])
        got = m.run({"x": xs[RANK]})
        check(f"{dt} sum", got[0], xs.sum(0, dtype=np_dt), tol)
        check(f"{dt} max", got[1], xs.max(0), tol)
    # An f16 average whose sum would overflow f16 (65504): each rank's share is summed instead.
    b = eg.GraphBuilder("f16_avg")
    hi = b.input("h", eg.f16, [2])
    m = eg.compile(b.build([ops.all_reduce(hi, op="avg"), ops.reduce_scatter(hi, op="avg")]))
    got = m.run({"h": np.full(2, 40000, np.float16)})
    check("f16 avg", got[0], np.full(2, 40000, np.float16))
    check("f16 reduce_scatter avg", got[1], np.full(1, 40000, np.float16))


def scenario_parallel_layers():
    # esgraph.parallel's layers against numpy on the full weights.
    from esgraph import parallel
    rng = np.random.default_rng(1)  # the same on every rank
    x = rng.standard_normal((3, 8)).astype(np.float32)
    w1, b1 = rng.standard_normal((8, 6)).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    w2, b2 = rng.standard_normal((6, 8)).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    with eg.GraphBuilder("layers") as b:
        xi = b.input("x", eg.f32, [3, 8])
        column = parallel.ColumnParallelLinear(w1, b1, gather_output=True)(xi)
        row = parallel.RowParallelLinear(w1, b1, input_is_parallel=False)(xi)
        mlp = parallel.ParallelMLP(w1, b1, w2, b2, activation=ops.relu)(xi)
    got = eg.compile(b.build([column, row, mlp])).run({"x": x})
    check("column", got[0], x @ w1 + b1, 1e-5)
    check("row", got[1], x @ w1 + b1, 1e-5)
    check("mlp", got[2], np.maximum(x @ w1 + b1, 0) @ w2 + b2, 1e-4)


def mlp_model():
    """An ONNX MLP (MatMul, Relu, Gemm with a bias) and its weights, the same on every rank."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    w1, w2, b2 = (rng.standard_normal(s).astype(np.float32) for s in ((8, 6), (8, 6), (8,)))
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1)], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 8])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b2, "b2")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), w1, w2, b2


def scenario_onnx_sharding():
    import esgraph.onnx
    model, w1, w2, b2 = mlp_model()
    x = np.random.default_rng(4).standard_normal((3, 8)).astype(np.float32)
    want = np.maximum(x @ w1, 0) @ w2.T + b2
    for spec in ({"w1": "column", "w2": "row"}, {"w1": "row", "w2": "column"}):
        m = eg.compile(esgraph.onnx.load(model, sharding=spec))
        check(f"sharded {spec}", m.run({"x": x})[0], want, 1e-5)
        assert m.stats()["collectives"] == 2


def scenario_ascend():
    # The same ops on the simulated Ascend device, through the simulated HCCL over MPI.
    x = held(RANK, [4, 6])
    b = eg.GraphBuilder("ascend")
    xi = b.input("x", eg.f32, [4, 6])
    hi = b.input("h", eg.f16, [4, 6])
    peer = 1 - RANK
    outs = [ops.all_reduce(xi), ops.all_reduce(hi, op="max"), ops.all_gather(xi, axis=0), ops.reduce_scatter(xi, axis=0, op="min"),
            ops.broadcast(xi, root=1), ops.all_to_all(xi, split_axis=0, concat_axis=0)]
    with b:  # HCCL's sends are synchronous: one rank sends first, the other receives first
        if RANK == 0:
            ops.send(xi * 2.0, peer=peer)
            outs.append(ops.recv(shape=[4, 6], peer=peer))
        else:
            outs.append(ops.recv(shape=[4, 6], peer=peer))
            ops.send(xi * 2.0, peer=peer)
    m = eg.compile(b.build(outs), backend="ascend-sim")
    got = m.run({"x": x, "h": x.astype(np.float16)})
    xs = np.stack(every([4, 6]))
    check("ascend sum", got[0], xs.sum(0))
    check("ascend f16 max", got[1].astype(np.float32), xs.max(0))
    check("ascend gather", got[2], np.concatenate(list(xs), 0))
    check("ascend scatter", got[3], np.split(xs.min(0), SIZE, 0)[RANK])
    check("ascend broadcast", got[4], xs[1])
    check("ascend all_to_all", got[5], np.concatenate([np.split(xs[r], SIZE, 0)[RANK] for r in range(SIZE)], 0))
    check("ascend recv", got[6], xs[peer] * 2)
    calls = {c["function"]: c["count"] for c in m.stats()["hccl_calls"]}
    assert (calls["HcclAllReduce"], calls["HcclSend"], calls["HcclRecv"]) == (2, 1, 1), calls


def scenario_send_recv():
    # A two-stage pipeline: rank 0 computes and sends, rank 1 receives, computes, sends back.
    b = eg.GraphBuilder("pipe")
    if RANK == 0:
        x = b.input("x", eg.f32, [8])
        ops.send(ops.mul(x, x), peer=1)
        with b:
            y = ops.recv(shape=[8], peer=1)
        m = eg.compile(b.build([y]))
        got = m.run({"x": np.arange(8, dtype=np.float32)})[0]
        check("round trip", got, np.arange(8, dtype=np.float32) ** 2 + 1)
    else:
        with b:
            h = ops.recv(shape=[8], peer=0)
            done = ops.send(ops.add(h, eg.constant(np.ones(8, np.float32))), peer=0)
        m = eg.compile(b.build([done]))
        m.run({})
    assert m.stats()["collectives"] == 2


def scenario_mismatch():
    # The ranks build all_reduces of different shapes: every rank fails before running any.
    n = 4 + RANK
    b = eg.GraphBuilder("mismatch")
    x = b.input("x", eg.f32, [n])
    m = eg.compile(b.build([ops.all_reduce(x)]))
    fails_by_name(m, {"x": np.ones(n, np.float32)}, "ranks build different collectives", "all_reduce sum f32[")


def scenario_unpaired():
    # Both ranks send first, then receive: the shapes match, the order does not (a deadlock on
    # HCCL, whose sends are synchronous). Both ranks fail before running.
    b = eg.GraphBuilder("unpaired")
    x = b.input("x", eg.f32, [4])
    with b:
        ops.send(x, peer=1 - RANK)
        y = ops.recv(shape=[4], peer=1 - RANK)
    m = eg.compile(b.build([y]))
    fails_by_name(m, {"x": np.ones(4, np.float32)}, "do not pair up", "#0 here is send f32[4] to rank")


def scenario_timeout():
    # Rank 1 never runs: rank 0's check names it within the timeout. The job then ends (exit 1).
    b = eg.GraphBuilder("late")
    x = b.input("x", eg.f32, [4])
    m = eg.compile(b.build([ops.all_reduce(x)]))
    if RANK == 1:
        time.sleep(30)  # longer than the test allows: the job must end because rank 0 ends it
        return
    fails_by_name(m, {"x": np.ones(4, np.float32)}, "rank 1 has entered 0")


def scenario_late_group():
    # A group other than the world ([1, 0]) whose rank 1 never comes: rank 0 names it within the
    # timeout while making the group's communicator, before the first run.
    b = eg.GraphBuilder("late_group")
    x = b.input("x", eg.f32, [4])
    m = eg.compile(b.build([ops.all_reduce(x, ranks=[1, 0])]))
    if RANK == 1:
        time.sleep(30)
        return
    fails_by_name(m, {"x": np.ones(4, np.float32)}, "making the communicator of the group [1,0] did not finish within 2000 ms: rank 1 did not come")


def scenario_prepared():
    # Prepared runs of collectives with compute around them, many times over the same arrays
    # (new values each time), interleaved with plain runs of the same model.
    b = eg.GraphBuilder("prepared")
    xi = b.input("x", eg.f32, [256])
    m = eg.compile(b.build([ops.all_reduce(xi * 2.0) + 1.0, ops.all_gather(xi, axis=0)]))
    x = held(RANK, [256])
    p = m.prepare([x])
    for step in range(50):
        x += 1  # every rank alike: rank r holds held(r) + step + 1
        got = p.run() if step % 5 else m.run({"x": x})
        xs = np.stack([held(r, [256]) + step + 1 for r in range(SIZE)])
        check(f"prepared sum {step}", got[0], (2 * xs).sum(0) + 1)
        check(f"prepared gather {step}", got[1], xs.reshape(-1))
    # A collective inside a loop's body (run by the evaluator, not a launch of the plan's):
    # three all_reduces of v, each summing the ranks' copies.
    b = eg.GraphBuilder("body_collective")
    vi = b.input("v", eg.f32, [8])
    i, v = ops.while_([b.constant(np.int64(0)), vi], lambda i, v: i < 3, lambda i, v: (i + 1, ops.all_reduce(v)))
    m = eg.compile(b.build([v]))
    v0 = held(RANK, [8])
    p = m.prepare([v0])
    for _ in range(3):
        check("a body's all_reduce", p.run()[0], sum(held(r, [8]) for r in range(SIZE)) * SIZE ** 2)
        check("a body's all_reduce, run", m.run({"v": v0})[0], sum(held(r, [8]) for r in range(SIZE)) * SIZE ** 2)


def ran_once_then_rank_1_stops(n):
    """An all_reduce of f32[n] that both ranks pass the check for and run once; then rank 1
    stops taking part (None there)."""
    b = eg.GraphBuilder("late_run")
    x = b.input("x", eg.f32, [n])
    m = eg.compile(b.build([ops.all_reduce(x)]))
    m.run({"x": np.ones(n, np.float32)})
    print(f"ok first run rank {RANK}", flush=True)
    if RANK == 1:
        time.sleep(30)
        return None
    return m


def scenario_late_run():
    # Rank 0's second run waits in a blocking all_reduce: the watchdog names rank 1 and ends the job.
    m = ran_once_then_rank_1_stops(4)
    if m:
        m.run({"x": np.ones(4, np.float32)})
        raise SystemExit("rank 0: the second run finished without rank 1")


def scenario_late_large_run():
    # The same over ESG_MPI_BLOCKING_BELOW (the test sets it to 1 KiB): rank 0's second run is
    # nonblocking, so it fails with an error it can catch, naming rank 1.
    m = ran_once_then_rank_1_stops(1024)
    if m:
        fails_by_name(m, {"x": np.ones(1024, np.float32)}, "all_reduce sum f32[1024] over [0,1]",
                      "rank 1 has entered 2 of this group's collectives, this rank 3")


if __name__ == "__main__":
    name = sys.argv[1]
    globals()["scenario_" + name]()
    print(f"ok {name} rank {RANK}", flush=True)
