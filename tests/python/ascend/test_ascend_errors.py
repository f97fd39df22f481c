"""The Ascend backend on the simulated device (conftest.py says how these tests run): errors and
limits: no CANN, a missing library or symbol, a failing ACL call, device memory, host fallback, bad
options, a model cut in stages, ascend-check, max_memory_bytes."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import esgraph
from esgraph import ops

from ascend_device import RTOL, ATOL, graph_of, check_same, calls, esgraph_cli


# ---- errors ------------------------------------------------------------------------------------------
def test_real_ascend_without_cann_says_where_it_looked(monkeypatch):
    monkeypatch.setenv("ASCEND_HOME_PATH", "/nonexistent/cann")
    g = graph_of(lambda a: a + 1.0, (3,))
    with pytest.raises(esgraph.BackendError) as info:
        esgraph.compile(g, backend="ascend")
    message = str(info.value)
    assert "CANN's kernel compiler (ccec or bisheng)" in message or "cannot load AscendCL" in message
    assert "/nonexistent/cann" in message


def test_a_missing_library_and_a_missing_symbol(monkeypatch, tmp_path):
    g = graph_of(lambda a: a * 2.0, (3,))
    monkeypatch.setenv("ESG_ASCEND_SIM_LIBRARY", str(tmp_path / "libascendcl.so"))
    with pytest.raises(esgraph.BackendError, match=r"cannot load AscendCL .*libascendcl.so"):
        esgraph.compile(g, backend="ascend-sim")
    libz = next(p for p in ("/usr/lib/x86_64-linux-gnu/libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1") if os.path.exists(p))
    monkeypatch.setenv("ESG_ASCEND_SIM_LIBRARY", libz)
    with pytest.raises(esgraph.BackendError, match=r"libz.so.1 lacks aclInit, aclFinalize, .*aclGetRecentErrMsg"):
        esgraph.compile(g, backend="ascend-sim")


def test_an_operator_library_without_an_op_refuses_only_the_models_that_use_it(monkeypatch, tmp_path):
    """CANN versions differ in their aclnn ops: a libopapi.so without aclnnTopk (built by
    tests/ascend_sim) still runs a matmul; a model with top_k is refused by name."""
    sim = Path(esgraph.__file__).resolve().parents[2] / "ascend_sim"
    for name, where in (("libascendcl.so", sim), ("libnnopbase.so", sim), ("libopapi.so", sim / "without_topk")):
        (tmp_path / name).symlink_to(where / name)
    monkeypatch.setenv("ESG_ASCEND_SIM_LIBRARY", str(tmp_path / "libascendcl.so"))
    a = np.random.default_rng(15).standard_normal((4, 5)).astype(np.float32)
    check_same(graph_of(lambda x: ops.matmul(x, x, transpose_b=True) + 1.0, a.shape), [a])
    with pytest.raises(esgraph.UnsupportedError, match=r"top_k runs as aclnnTopk, and CANN's operator library in .* lacks "
                                                       r"aclnnTopkGetWorkspaceSize and aclnnTopk"):
        esgraph.compile(graph_of(lambda x: ops.top_k(x, k=2)[0] * 2.0, a.shape), backend="ascend-sim")


def cann_without_kernel_api(tmp_path):
    """A CANN before 8.3 in `tmp_path`: an AscendCL without the kernel API (aclrtBinaryLoadFromFile,
    aclrtKernelArgs*, aclrtLaunchKernelWithConfig), beside the operator library. Its path."""
    sim = Path(esgraph.__file__).resolve().parents[2] / "ascend_sim"
    for name, where in (("libascendcl.so", sim / "without_kernel_api"), ("libnnopbase.so", sim), ("libopapi.so", sim)):
        (tmp_path / name).symlink_to(where / name)
    return str(tmp_path / "libascendcl.so")


WITHOUT_KERNEL_API = """
import numpy as np
import esgraph
from esgraph import ops
a = np.random.default_rng(16).standard_normal((4, 5)).astype(np.float32)
with esgraph.GraphBuilder("product") as b:
    x = b.input("x", esgraph.f32, [4, 5])
    product = b.build([ops.matmul(x, x, transpose_b=True)])
model = esgraph.compile(product, backend="ascend-sim")
np.testing.assert_allclose(model(a), a @ a.T, rtol=1e-5, atol=1e-5)
stats = model.stats()
assert (stats["kernel_api"], stats["device_kernels"], stats["library_calls"]) == (0, 0, 1), stats
with esgraph.GraphBuilder("elementwise") as b:
    x = b.input("x", esgraph.f32, [4, 5])
    elementwise = b.build([ops.exp(x) + 1.0])
try:
    esgraph.compile(elementwise, backend="ascend-sim")
    raise SystemExit("a model with a generated kernel compiled")
except esgraph.UnsupportedError as e:
    print(e)
"""


def test_a_cann_without_the_kernel_api_runs_aclnn_models_and_refuses_generated_kernels_by_name(tmp_path):
    """Before 8.3 AscendCL lacks the kernel API generated kernels load and launch through: a model
    of aclnn ops alone runs; a model with a generated kernel is refused, naming what is missing and
    the CANN that has it; ascend-check runs the aclnn cases, refuses the others and exits 3. (In
    processes of their own: a process has one AscendCL, which the operator library binds to.)"""
    library = cann_without_kernel_api(tmp_path)
    r = subprocess.run([sys.executable, "-c", WITHOUT_KERNEL_API], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), ESG_ASCEND_SIM_LIBRARY=library))
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.match(r"ascend: the model has generated kernels, .* lacks aclrtBinaryLoadFromFile, aclrtBinaryGetFunction, "
                    r"aclrtBinaryUnLoad, aclrtKernelArgsInit, .*aclrtLaunchKernelWithConfig; CANN 8.3 or newer", r.stdout), r.stdout
    r = esgraph_cli("ascend-check", "--simulated", ESG_ASCEND_SIM_LIBRARY=library)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "pass     matmul (aclnnMatmul)" in r.stdout and "pass     conv2d (aclnnConvolution, NCHW)" in r.stdout
    assert "refused  elementwise kernel, f32" in r.stdout and "CANN 8.3 or newer" in r.stdout
    assert "FAIL" not in r.stdout and r.stdout.endswith(" refused\n")


def test_an_operator_library_split_by_repository_is_searched_function_by_function(monkeypatch, tmp_path):
    """From CANN 8.5 the aclnn ops come in one library per operator repository (libopapi_math.so,
    libopapi_nn.so, ...) and no libopapi.so: each function is taken from the first that has it.
    Here libopapi_math.so lacks aclnnTopk, which libopapi_nn.so has."""
    sim = Path(esgraph.__file__).resolve().parents[2] / "ascend_sim"
    for name, where in (("libascendcl.so", sim / "libascendcl.so"), ("libnnopbase.so", sim / "libnnopbase.so"),
                        ("libopapi_math.so", sim / "without_topk" / "libopapi.so"), ("libopapi_nn.so", sim / "libopapi.so")):
        (tmp_path / name).symlink_to(where)
    monkeypatch.setenv("ESG_ASCEND_SIM_LIBRARY", str(tmp_path / "libascendcl.so"))
    a = np.random.default_rng(25).standard_normal((4, 5)).astype(np.float32)
    check_same(graph_of(lambda x: ops.matmul(x, x, transpose_b=True) + 1.0, a.shape), [a])
    check_same(graph_of(lambda x: ops.top_k(x, k=2)[0] * 2.0, a.shape), [a])


@pytest.mark.parametrize("call", ["aclrtMallocAlign32", "aclrtMallocHost", "aclrtCreateStream", "aclrtBinaryLoadFromFile"])
def test_a_failing_acl_call_is_an_error_and_leaves_nothing_behind(call, acl_log, monkeypatch):
    g = graph_of(lambda a: ops.exp(a) + 1.0, (100,))
    esgraph.compile(g, backend="ascend-sim")  # the kernel is built: the failure below is the device's
    monkeypatch.setenv("ACLSIM_FAIL", call)
    before = len(acl_log())
    with pytest.raises(esgraph.BackendError, match=rf"ascend: {call} failed with AscendCL error 500000: .*injected"):
        esgraph.compile(g, backend="ascend-sim")
    log = acl_log()[before:]
    for create, destroy in (("aclrtCreateStream", "aclrtDestroyStream"), ("aclrtMallocAlign32", "aclrtFree"),
                            ("aclrtCreateContext", "aclrtDestroyContext"), ("aclrtSetDevice", "aclrtResetDevice"),
                            ("aclrtMallocHost", "aclrtFreeHost")):
        assert len(calls(log, create)) == len(calls(log, destroy)), (call, create)
    monkeypatch.delenv("ACLSIM_FAIL")
    x = np.ones(100, np.float32)
    np.testing.assert_allclose(esgraph.compile(g, backend="ascend-sim")(x), np.exp(x) + 1.0, rtol=RTOL)


def test_a_failure_that_leaves_no_error_text_is_still_a_clear_error(monkeypatch):
    """CANN's aclGetRecentErrMsg gives NULL when a failure set no message: a refused capture then
    falls back to replaying the launch list, and a failed SoC query or stream wait is an error
    that says AscendCL gave no message, not a crash."""
    g = graph_of(lambda a: ops.exp(a) + 1.0, (100,))
    x = np.ones(100, np.float32)
    esgraph.compile(g, backend="ascend-sim")  # the kernel is built: the failures below are the device's
    monkeypatch.setenv("ACLSIM_FAIL_SILENTLY", "aclmdlRICaptureBegin")
    replayed = esgraph.compile(g, backend="ascend-sim")
    np.testing.assert_allclose(replayed(x), np.exp(x) + 1.0, rtol=RTOL)
    stats = replayed.stats()
    assert (stats["captured"], stats["capture_scope"]) == (0, "none")
    assert stats["run"] == "replays the launch list (capture refused: AscendCL gave no message)"
    monkeypatch.setenv("ACLSIM_FAIL_SILENTLY", "aclrtGetSocName")
    with pytest.raises(esgraph.BackendError, match=r"^ascend: aclrtGetSocName failed: AscendCL gave no message$"):
        esgraph.compile(g, backend="ascend-sim")
    monkeypatch.setenv("ACLSIM_FAIL_SILENTLY", "aclrtMallocHost")
    with pytest.raises(esgraph.BackendError, match=r"aclrtMallocHost failed with AscendCL error 500000: AscendCL gave no message$"):
        esgraph.compile(g, backend="ascend-sim")
    monkeypatch.setenv("ACLSIM_FAIL_SILENTLY", "aclrtSynchronizeStream")
    model = esgraph.compile(g, backend="ascend-sim")
    with pytest.raises(esgraph.BackendError, match=r"aclrtSynchronizeStream failed with AscendCL error 500000: AscendCL gave no message$"):
        model(x)
    monkeypatch.delenv("ACLSIM_FAIL_SILENTLY")
    np.testing.assert_allclose(model(x), np.exp(x) + 1.0, rtol=RTOL)  # the model stays usable


def test_out_of_device_memory(monkeypatch):
    monkeypatch.setenv("ACLSIM_DEVICE_MEMORY", "1024")
    g = graph_of(lambda a: ops.exp(a), (100000,))
    with pytest.raises(esgraph.BackendError, match="aclrtMallocAlign32 failed with AscendCL error 200000: .*out of device memory"):
        esgraph.compile(g, backend="ascend-sim")


def host_fallback_graph():
    """An if, integer division, f64 arithmetic and atanh (inside a group): none has a device lowering."""
    with esgraph.GraphBuilder("host") as b:
        p = b.input("p", esgraph.bool_, [])
        x, k, d = b.input("x", esgraph.f32, [4, 6]), b.input("k", esgraph.i32, [4, 6]), b.input("d", esgraph.i32, [4, 6])
        h = ops.exp(x) * 2.0
        branch = ops.if_(p, lambda: ops.tanh(h), lambda: -h)
        wide = ops.cast(ops.cast(x, esgraph.f64) * 3.0, esgraph.f32)
        return b.build([branch + ops.cast(k / d, esgraph.f32), ops.atanh(x * 0.5) + 1.0, wide * h])


def host_fallback_inputs(rng, take):
    return [np.array(take), (rng.standard_normal((4, 6)) * 0.5).astype(np.float32), rng.integers(-50, 50, (4, 6)).astype(np.int32),
            np.where(rng.random((4, 6)) > 0.5, 3, -7).astype(np.int32)]


@pytest.mark.parametrize("streams", [1, 2])
def test_host_fallback_runs_what_the_device_cannot(streams, acl_log):
    """With host_fallback, ops with no device lowering run on the host between synchronous copies
    (their stream synchronized first); the rest stays on the device, and the run is replayed, not
    captured. Values are the CPU's: integer division truncates, both branches of the if."""
    g = host_fallback_graph()
    rng = np.random.default_rng(18)
    model = esgraph.compile(g, backend="ascend-sim", host_fallback=True, streams=streams)
    built = len(acl_log())
    for take in (True, False, True):
        args = host_fallback_inputs(rng, take)
        for got, want in zip(model.run(args), esgraph.compile(g).run(args)):
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    stats = model.stats()
    assert (stats["host_launches"], stats["captured"]) == (6, 0)
    host = {h["op"]: (h["count"], h["reason"]) for h in stats["host_ops"]}  # each synchronizes its stream
    assert list(host) == ["cast", "div", "if", "mul", "the group mul atanh add"]
    assert [count for count, _ in host.values()] == [2, 1, 1, 1, 1]
    assert host["cast"][1].startswith("f64") and host["div"][1].startswith("integer division") and host["if"][1] == "no aclnn mapping"
    assert host["mul"][1].startswith("f64") and host["the group mul atanh add"][1].startswith("ascend: atanh")
    runs = acl_log()[built:]
    assert not calls(runs, "aclmdlRIExecuteAsync")
    assert len(calls(runs, "aclrtMemcpy")) >= 3 * 6 * 2  # each host launch copies its operands off and its results back, each run
    with pytest.raises(esgraph.UnsupportedError, match=r"no device lowering yet for cast x2 .*the option host_fallback runs the rest on the host"):
        esgraph.compile(g, backend="ascend-sim")


def test_bad_options_and_ops_without_a_lowering():
    g = graph_of(lambda a: a + 1.0, (3,))
    with pytest.raises(esgraph.InvalidArgumentError, match="backend 'tpu'; valid: 'cpu', 'ascend', 'ascend-sim'"):
        esgraph.compile(g, backend="tpu")
    with pytest.raises(esgraph.InvalidArgumentError, match="ai_cores -1"):
        esgraph.compile(g, backend="ascend-sim", ai_cores=-1)
    # Each backend takes the options it declares, by keyword or by name in backend_options.
    with pytest.raises(esgraph.InvalidArgumentError, match=r"backend 'cpu' has no option `ai_cores` \(it takes channel_block, vnni\)"):
        esgraph.compile(g, ai_cores=2)
    with pytest.raises(esgraph.InvalidArgumentError, match=r"no option `cores` \(it takes device, ai_cores, host_fallback\)"):
        esgraph.compile(g, backend="ascend-sim", backend_options={"cores": 2})
    with pytest.raises(esgraph.InvalidArgumentError, match=r"host_fallback 2 \(0 \.\. 1\)"):
        esgraph.compile(g, backend="ascend-sim", backend_options={"host_fallback": 2})
    narrow = graph_of(lambda a: ops.atanh(a) * 2.0, (3,))
    assert esgraph.compile(narrow, backend="ascend-sim", backend_options={"host_fallback": 1}).stats()["host_launches"] == 1
    with pytest.raises(esgraph.BackendError, match="device 3 does not exist"):
        esgraph.compile(g, backend="ascend-sim", device=3)
    # Integer values leave the generated kernels for CANN's library (test_integer_elementwise_ops…).
    check_same(graph_of(lambda a: ops.cast(ops.cast(a * 4.0, esgraph.i32), esgraph.f32), (3,)), [np.array([-1.3, 0.4, 2.6], np.float32)])
    with pytest.raises(esgraph.UnsupportedError, match=r"atanh: `atanh\(x\)`: Ascend C's Atanh is documented as invalid"):
        esgraph.compile(graph_of(lambda a: ops.atanh(a) * 2.0, (3,)), backend="ascend-sim")
    with pytest.raises(esgraph.UnsupportedError, match="profile: the Ascend backend records no per-launch times yet"):
        esgraph.compile(g, backend="ascend-sim").profile(np.ones(3, np.float32), path="/tmp/never.json")


def test_a_model_cut_before_a_sized_op_runs_its_stages_on_the_device():
    # The rows whose largest element passes 0.5: the nonzero runs on the host between the two
    # device programs; the second binds its symbolic plan to each count.
    def rows(x):
        keep = ops.squeeze(ops.nonzero(ops.reduce_max(x, axes=[1]) > 0.5), axes=[0])
        return ops.softmax(ops.gather(x, keep) * 2.0, axis=-1), keep
    graph = graph_of(rows, ["n", 8])
    sim = esgraph.compile(graph, backend="ascend-sim", host_fallback=True)
    for n in [3, 9, 5]:
        x = np.random.default_rng(n).random((n, 8)).astype(np.float32)
        cpu = esgraph.compile(graph).run([x])
        got = sim.run([x])
        np.testing.assert_array_equal(got[1], cpu[1])
        np.testing.assert_allclose(got[0], cpu[0], rtol=RTOL, atol=ATOL)
    stats = sim.stats()
    assert stats["stages"] == 2 and stats["sized_ops"] == 1 and stats["captured"] == 0


def test_ascend_check_prints_the_smoke_set_against_the_cpu():
    """`python3 -m esgraph ascend-check`: the table a first user with hardware sends back (here on
    the simulated device), each case against the CPU; exit 1 when a case fails, 2 with what is
    missing when the device cannot start."""
    r = esgraph_cli("ascend-check", "--simulated")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ascend (simulated device): device 0 (Ascend910B1), CANN 8.5.0" in r.stdout
    for case in ("elementwise kernel, f32", "elementwise kernel, f16", "elementwise kernel, bf16", "row kernel, rows longer",
                 "matmul (aclnnMatmul)", "conv2d (aclnnConvolution, NCHW)", "gather with negative indices",
                 "two streams, captured", "host_fallback"):
        assert f"pass     {case}" in r.stdout
    assert r.stdout.endswith("12 of 12 passed\n")
    check = esgraph._C.ascend_check("ascend-sim")
    assert check["passed"] and [c["name"] for c in check["cases"]][-1].startswith("host_fallback")
    r = esgraph_cli("ascend-check", "--simulated", ACLSIM_SOC="Ascend910A")  # kernels refused by name: a partial pass
    assert r.returncode == 3 and "refused  elementwise kernel, f32" in r.stdout and "builds no kernels for its core version" in r.stdout
    assert "pass     matmul (aclnnMatmul)" in r.stdout
    r = esgraph_cli("ascend-check", "--simulated", ESG_ASCEND_SIM_LIBRARY="/nonexistent/libascendcl.so")
    assert r.returncode == 2 and "the ascend-sim backend cannot start" in r.stderr and "cannot load AscendCL" in r.stderr


def test_max_memory_bytes_caps_the_device_memory():
    """max_memory_bytes caps what the device allocates, constants included (the CPU's check counts
    working memory and outputs), before anything is allocated: a LimitError naming it."""
    w = np.random.default_rng(27).standard_normal((256, 512)).astype(np.float32)  # 512 KiB of constant
    g = graph_of(lambda x: ops.tanh(ops.matmul(x, w)), (4, 256))
    esgraph.compile(g, max_memory_bytes=256 << 10)  # on the CPU the weight is not working memory
    with pytest.raises(esgraph.LimitError, match=r"ascend: the device allocation \(arena, inputs, outputs, constants, tilings\) "
                                                 r"takes \d+ bytes, more than max_memory_bytes \(262144\)"):
        esgraph.compile(g, backend="ascend-sim", max_memory_bytes=256 << 10)
    x = np.ones((4, 256), np.float32)
    check_same(g, [x], max_memory_bytes=1 << 20)
