"""The Ascend backend on the simulated device (conftest.py says how these tests run): the launch
protocol, read from the simulator's call log: one and two streams, replays, events beyond the
device's limit, the kernel cache."""
import re

import numpy as np
import pytest

import esgraph
from esgraph import ops

from ascend_device import RTOL, ATOL, graph_of, check_same, calls


# ---- the launch protocol, from the call log --------------------------------------------------------


def test_protocol_of_a_single_stream_model(acl_log):
    x = np.random.default_rng(4).standard_normal(5000).astype(np.float32)
    g = graph_of(lambda a: ops.tanh(ops.exp(a) - 1.0), x.shape)
    model = esgraph.compile(g, backend="ascend-sim")
    built = len(acl_log())
    for _ in range(3):
        np.testing.assert_allclose(model(x), np.tanh(np.exp(x) - 1.0), rtol=RTOL, atol=ATOL)
    log = acl_log()
    runs = log[built:]
    assert len(calls(log, "aclrtMallocAlign32")) == 1  # one device allocation per model
    # Model sinking: each run is inputs in, one replay of the captured launches, outputs out,
    # and the only host wait at its end.
    assert [line.split(" ")[0] for line in runs] == ["aclrtSetCurrentContext", "aclrtMemcpyAsync", "aclmdlRIExecuteAsync",
                                                     "aclrtMemcpyAsync", "aclrtSynchronizeStream"] * 3
    assert model.stats()["captured"] == 1
    del model
    log = acl_log()
    for create, destroy in (("aclrtCreateStream", "aclrtDestroyStream"), ("aclrtMallocAlign32", "aclrtFree"),
                            ("aclrtCreateContext", "aclrtDestroyContext"), ("aclrtSetDevice", "aclrtResetDevice"),
                            ("aclrtBinaryLoadFromFile", "aclrtBinaryUnLoad"), ("aclmdlRICaptureEnd", "aclmdlRIDestroy"),
                            ("aclrtMallocHost", "aclrtFreeHost")):
        assert len(calls(log, create)) == len(calls(log, destroy)) >= 1, create
    assert not any("FAILED" in line for line in log)


def two_stream_model():
    x = np.random.default_rng(5).standard_normal((4, 256)).astype(np.float32)
    g = graph_of(lambda a, b: (ops.tanh(ops.exp(a) * 2.0), ops.sigmoid(ops.log(ops.abs(b) + 1.0))), x.shape, x.shape)
    want = esgraph.compile(g, streams=2).run([x, x])
    model = esgraph.compile(g, backend="ascend-sim", streams=2, fusion=False)
    for _ in range(3):
        for c, s in zip(want, model.run([x, x])):
            np.testing.assert_allclose(s, c, rtol=RTOL, atol=ATOL)
    assert model.stats()["streams"] == 2
    return model


def check_event_order(lines):
    """Every wait is for an event already recorded."""
    recorded = set()
    for line in lines:
        event = re.search(r"event#\d+", line)
        if line.startswith("aclrtRecordEvent"):
            recorded.add(event.group(0))
        elif line.startswith("aclrtStreamWaitEvent"):
            assert event.group(0) in recorded, line


def test_protocol_of_a_two_stream_model(acl_log):
    """Model sinking across streams: stream 1 joins the capture of stream 0 by waiting on the
    event stream 0 records first, and merges back at the end (CANN's cross-stream capture, its
    events made with ACL_EVENT_SYNC); a run is one replay and one wait on stream 0."""
    x = np.random.default_rng(5).standard_normal((4, 256)).astype(np.float32)

    def branches(a):
        parts = [ops.exp(ops.slice(a, [i], [i + 1], axes=[0]) * float(i + 1)) for i in range(4)]
        return ops.concat([ops.tanh(p) for p in parts], axis=0)
    # The slices and the concat on aclnn, the branches' kernels generated, over two streams.
    check_same(graph_of(branches, x.shape), [x], streams=2)
    before = len(acl_log())
    model = two_stream_model()
    assert (model.stats()["captured"], model.stats()["streams"]) == (1, 2)
    log = acl_log()[before:]
    assert calls(log, "aclrtCreateEventExWithFlag") and not calls(log, "aclrtCreateEvent")
    assert all(line.endswith("flag=1") for line in calls(log, "aclrtCreateEventExWithFlag"))
    begin = next(i for i, line in enumerate(log) if line.startswith("aclmdlRICaptureBegin"))
    end = next(i for i, line in enumerate(log) if line.startswith("aclmdlRICaptureEnd"))
    captured = log[begin:end + 1]
    assert captured[-1].endswith("streams=2")
    streams = {re.search(r"stream#\d+", line).group(0) for line in calls(captured, "aclrtLaunchKernelWithConfig")}
    assert len(streams) == 2
    assert sum("(joins the capture)" in line for line in captured) == 1
    check_event_order(captured)
    runs = log[end + 1:]
    assert [line.split(" ")[0] for line in runs] == ["aclrtSetCurrentContext", "aclrtMemcpyAsync", "aclrtMemcpyAsync", "aclmdlRIExecuteAsync",
                                                     "aclrtMemcpyAsync", "aclrtMemcpyAsync", "aclrtSynchronizeStream"] * 3


def test_protocol_of_a_replayed_two_stream_model(acl_log, monkeypatch):
    """Without capture the launch list is replayed on both streams: events recorded before they
    are waited on, every stream synchronized once, after the outputs' copies are queued."""
    monkeypatch.setenv("ACLSIM_NO_CAPTURE", "1")
    model = two_stream_model()  # kept alive: its teardown would end the log
    assert model.stats()["captured"] == 0
    log = acl_log()
    run_start = max(i for i, line in enumerate(log) if line.startswith("aclrtSetCurrentContext"))
    run = log[run_start:]
    stream_of_launch = [re.search(r"stream#\d+", line).group(0) for line in calls(run, "aclrtLaunchKernelWithConfig")]
    assert len(set(stream_of_launch)) == 2
    check_event_order(run)
    names = [line.split(" ")[0] for line in run]
    first_sync = names.index("aclrtSynchronizeStream")
    assert set(names[first_sync:]) == {"aclrtSynchronizeStream"} and len(names[first_sync:]) == 2
    assert "aclrtMemcpyAsync" in names[:first_sync] and names[first_sync - 1] == "aclrtMemcpyAsync"


def ladder(a, b, steps=6):
    """Two chains that read each other at every step: a cross-stream event per rung."""
    for _ in range(steps):
        a, b = ops.tanh(a * 0.5) + ops.sigmoid(b), ops.sigmoid(b) * ops.abs(a)
    return a, b


def test_events_beyond_the_device_limit_are_reset_and_reused(acl_log, monkeypatch):
    x, y = np.random.default_rng(10).standard_normal((2, 300)).astype(np.float32)
    g = graph_of(ladder, x.shape, y.shape)
    want = esgraph.compile(g, streams=2, fusion=False).run([x, y])
    plenty = esgraph.compile(g, backend="ascend-sim", streams=2, fusion=False)
    events = plenty.stats()["device_events"]
    assert events >= 4
    monkeypatch.setenv("ESG_ASCEND_MAX_EVENTS", "4")  # 2 for the streams' start and join, 2 to share
    before = len(acl_log())
    few = esgraph.compile(g, backend="ascend-sim", streams=2, fusion=False)
    assert few.stats()["device_events"] == 2
    assert few.stats()["captured"] == 0  # events reused beyond the limit: CANN documents no reset under capture
    for _ in range(2):
        for got, w in zip(few.run([x, y]), want):
            np.testing.assert_allclose(got, w, rtol=RTOL, atol=ATOL)
    log = acl_log()[before:]
    assert len(calls(log, "aclrtCreateEvent")) == 4
    # A reused event is reset by the stream that waited for it, before that stream records it again.
    last_reset = {}
    for line in log:
        if line.startswith("aclrtSetCurrentContext"):  # a run starts: the last one ended with every stream synchronized
            last_reset = {}
        event = re.search(r"event#\d+", line)
        stream = re.search(r"stream#\d+", line)
        if line.startswith("aclrtResetEvent"):
            last_reset[event.group(0)] = stream.group(0)
        elif line.startswith("aclrtRecordEvent") and event.group(0) in last_reset:
            assert last_reset.pop(event.group(0)) == stream.group(0), line
    assert calls(log, "aclrtResetEvent")
    monkeypatch.setenv("ESG_ASCEND_MAX_EVENTS", "3")
    with pytest.raises(esgraph.UnsupportedError, match="needs more than 1 events at once"):
        esgraph.compile(g, backend="ascend-sim", streams=2, fusion=False)


def test_a_recompile_hits_the_kernel_cache():
    g = graph_of(lambda a: ops.softplus(a) * 3.0 + ops.rsqrt(ops.abs(a) + 1.0), (10,))
    first = esgraph.compile(g, backend="ascend-sim").stats()
    again = esgraph.compile(g, backend="ascend-sim").stats()
    assert (first["device_kernels"], first["device_kernels_cached"]) == (1, 0)
    assert (again["device_kernels"], again["device_kernels_cached"]) == (1, 1)
