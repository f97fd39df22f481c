"""The Ascend backend on the simulated device (conftest.py says how these tests run): symbolic sizes on
the device: one plan per size class, the device and captured model a class shares, bindings on two
threads, the SoC the kernels are built for, empty tensors."""
import numpy as np
import pytest

import esgraph
from esgraph import ops

from ascend_device import RTOL, ATOL, graph_of, check_same, calls


def test_symbolic_sizes_compile_once_per_shape():
    with esgraph.GraphBuilder("sym") as b:
        x = b.input("x", esgraph.f32, ["N", 8])
        g = b.build([ops.silu(x) + 1.0])
    model = esgraph.compile(g, backend="ascend-sim")
    for n in (1, 5, 300):
        x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
        np.testing.assert_allclose(model(x), esgraph.compile(g)(x), rtol=RTOL, atol=ATOL)


def test_a_size_class_shares_one_device_and_one_captured_model(acl_log):
    """Sizes of one class (a range) bind one symbolic plan: kernels and copies take their sizes
    from the tilings written before a run, so the class has one allocation, one kernel load each
    and one captured model, replayed at every size; a run after another size writes its tilings
    first, a run after the same size does not."""
    rng = np.random.default_rng(21)
    bias = rng.standard_normal(32).astype(np.float32)
    with esgraph.GraphBuilder("class") as b:
        x = b.input("x", esgraph.f32, ["N", 32])
        g = b.build([ops.softmax(ops.tanh(x) + bias), ops.reshape(ops.exp(x), [-1])])
    model = esgraph.compile(g, backend="ascend-sim", shapes={"N": (1, 64)})
    cpu = esgraph.compile(g)

    def run(*sizes):
        for n in sizes:
            xs = rng.standard_normal((n, 32)).astype(np.float32)
            for got, want in zip(model.run([xs]), cpu.run([xs])):
                np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    run(3, 64, 17, 17, 3)
    log = acl_log()
    assert model.stats()["bindings"] == 3 and model.stats()["captured"] == 1
    assert len(calls(log, "aclrtMallocAlign32")) == 1 and len(calls(log, "aclrtMallocHost")) == 1  # and its staging
    assert len(calls(log, "aclmdlRICaptureBegin")) == 1 and len(calls(log, "aclmdlRIExecuteAsync")) == 5
    assert len(calls(log, "aclrtBinaryLoadFromFile")) == model.stats()["device_kernels"]
    # Per run: the input in and two outputs out, and the tilings when the size changed (3 of 5 runs).
    copies = [line.split(" ")[1] for line in calls(log, "aclrtMemcpyAsync")]
    assert copies.count("H2D") == 5 + 3 and copies.count("D2H") == 5 * 2
    # One allocation laid out for the class's largest sizes, shared by its bindings that lower
    # alike; one captured model for the class, replayed at every size in it.
    assert model.stats()["device_memory_shared"] == 1
    assert model.stats()["capture_scope"] == "size class"
    # At N = 1 the bias is read as the group's own elements, not as a resident row: another
    # kernel, so a device of its own, and the class's stays as it was for its other sizes.
    run(1, 17, 1, 9)  # 9, new after 1: the class's device again, not a third
    log = acl_log()
    assert len(calls(log, "aclrtMallocAlign32")) == 2 and len(calls(log, "aclmdlRICaptureBegin")) == 2
    del model
    log = acl_log()
    for create, destroy in (("aclrtMallocAlign32", "aclrtFree"), ("aclmdlRICaptureEnd", "aclmdlRIDestroy"),
                            ("aclrtBinaryLoadFromFile", "aclrtBinaryUnLoad"), ("aclrtCreateStream", "aclrtDestroyStream"),
                            ("aclrtMallocHost", "aclrtFreeHost")):
        assert len(calls(log, create)) == len(calls(log, destroy)), create


def test_aclnn_ops_capture_per_size_on_the_class_device(acl_log):
    """aclnn ops are planned for their sizes: each size captures its own model (and plans its
    workspace), over the class's one allocation and its kernels."""
    rng = np.random.default_rng(22)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    with esgraph.GraphBuilder("mm") as b:
        x = b.input("x", esgraph.f32, ["N", 16])
        g = b.build([ops.relu(x @ w) * 2.0])
    model = esgraph.compile(g, backend="ascend-sim", shapes={"N": (1, 32)})
    for n in (5, 32, 5, 9):
        xs = rng.standard_normal((n, 16)).astype(np.float32)
        np.testing.assert_allclose(model(xs), np.maximum(xs @ w, 0) * 2.0, rtol=RTOL, atol=ATOL)
    log = acl_log()
    assert model.stats()["bindings"] == 3 and model.stats()["captured"] == 1
    assert len(calls(log, "aclmdlRICaptureBegin")) == 3
    kernels = model.stats()["device_kernels"]
    assert kernels >= 1 and len(calls(log, "aclrtBinaryLoadFromFile")) == kernels
    assert len(calls(log, "aclrtMallocAlign32")) == 1 + 3  # the class's allocation, and each size's matmul workspace
    assert model.stats()["capture_scope"] == "size"  # its aclnn ops are planned for their sizes


def test_sizes_bound_on_two_threads_at_once_build_while_the_other_captures():
    """Each new size class makes a device (synchronous uploads) and captures it: a capture is
    thread-local, so the other thread's uploads go on meanwhile."""
    import threading
    with esgraph.GraphBuilder("threads") as b:
        x = b.input("x", esgraph.f32, ["N", 8])
        g = b.build([ops.softmax(ops.exp(x) * 2.0)])
    model, cpu = esgraph.compile(g, backend="ascend-sim"), esgraph.compile(g)
    errors = []

    def run(sizes):
        try:
            for n in sizes:
                xs = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
                np.testing.assert_allclose(model(xs), cpu(xs), rtol=RTOL, atol=ATOL)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=run, args=(sizes,)) for sizes in ((1, 3, 5, 9, 17, 33), (2, 4, 7, 12, 20, 40))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@pytest.mark.parametrize("soc, refused", [
    ("Ascend910B3", None), ("Ascend910_9391", None),
    ("Ascend310P3", r"the device is an Ascend310P3, but esgraph's kernels are built for dav-c220-vec .*esgraph builds no kernels for "
                    r"dav-m200 \(Ascend310P\): they copy the tail of each tile with DataCopyPad"),
    ("Ascend910A", r"the device is an Ascend910A, .*builds no kernels for its core version"),
    ("Ascend910B", r"the device is an Ascend910B, "),  # the first 910's B variant: no digit
])
def test_generated_kernels_run_only_on_the_soc_they_are_built_for(soc, refused, monkeypatch):
    """aclrtGetSocName's SoC against the kernels' core version: another is refused by name, with
    what would be needed, before anything is built; a model of library calls runs on any."""
    monkeypatch.setenv("ACLSIM_SOC", soc)
    x = np.random.default_rng(23).standard_normal((4, 6)).astype(np.float32)
    elementwise = graph_of(lambda a: ops.exp(a) + 1.0, x.shape)
    if refused:
        with pytest.raises(esgraph.UnsupportedError, match=refused):
            esgraph.compile(elementwise, backend="ascend-sim")
    else:
        model = esgraph.compile(elementwise, backend="ascend-sim")
        np.testing.assert_allclose(model(x), np.exp(x) + 1.0, rtol=RTOL, atol=ATOL)
        assert (model.stats()["device"], model.stats()["soc"]) == (0, soc)
    w = np.random.default_rng(24).standard_normal((6, 3)).astype(np.float32)
    library_only = esgraph.compile(graph_of(lambda a: a @ w, x.shape), backend="ascend-sim")
    np.testing.assert_allclose(library_only(x), x @ w, rtol=RTOL, atol=ATOL)


def test_empty_tensors_launch_nothing(acl_log):
    x = np.zeros((0, 5), np.float32)
    check_same(graph_of(lambda a: ops.exp(a) + 1.0, x.shape), [x])
    assert not any(line.startswith("aclrtLaunchKernelWithConfig") for line in acl_log())
