"""The CANN header check (esgraph/cann_headers.py, `python3 -m esgraph cann-headers`): esgraph's
declarations of AscendCL, aclnn and HCCL against a folder of CANN's headers, compared as a compiler
sees them. The folder here is a hand-written stand-in (cann_headers_fixture/) with four
declarations made to differ; docs/ascend.md records the check against CANN's public headers."""
import os
import sys

import pytest

from esgraph import cann_headers

from ascend_device import esgraph_cli

FIXTURE = os.path.join(os.path.dirname(__file__), "cann_headers_fixture")


@pytest.fixture(scope="module")
def fixture_check():
    return cann_headers.check(FIXTURE)


def test_esgraphs_side_is_every_function_of_the_backends_tables():
    ours = cann_headers.ours()
    functions = ours["functions"]
    for name in ("aclInit", "aclrtLaunchKernelWithConfig", "aclrtBinaryLoadFromData", "aclmdlRICaptureBegin",
                 "aclCreateTensor", "aclnnConvolutionGetWorkspaceSize", "aclnnConvolution", "HcclAllReduce",
                 "HcclCommInitRootInfo", "HcclGetErrorString"):
        assert name in functions, name
    # aclnnConvolutionGetWorkspaceSize's last parameters: cubeMathType (int8), then the workspace
    # size and the executor, through pointers.
    assert functions["aclnnConvolutionGetWorkspaceSize"][1][-3:] == [
        ("int", 8, True), ("pointer", ("int", 64, False)), ("pointer", ("pointer", ("struct", None)))]
    # Every aclnn op's running half has one signature.
    assert functions["aclnnConvolution"] == functions["aclnnMatmul"]
    assert ours["constants"]["ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE"] == 0x41415246
    assert ours["structs"]["HcclRootInfo"][0] == 4108


def test_each_difference_is_named(fixture_check):
    found = {(f.name, f.detail) for f in fixture_check.differences}
    assert found == {
        ("aclrtGetDeviceCount", "parameter 1 is u64*, esgraph passes u32*"),
        ("aclrtCreateStream", "takes 2 parameters, esgraph passes 1"),
        ("ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE", f"is {0x41415247}, esgraph uses {0x41415246}"),
        ("aclrtBinaryLoadOptions", "field numOpt is u32 at byte 8, esgraph's count is u64 at byte 8"),
    }
    assert not fixture_check.passed


def test_what_agrees_to_the_machine_is_equal(fixture_check):
    # The enum parameter against esgraph's int-sized enum, void* against CANN's options pointer,
    # a macro, a static const and enumerators by value, a struct holding a union; the C++-only
    # overload of aclrtSynchronizeStream is not what the library exports.
    assert sorted(fixture_check.compared) == sorted([
        "aclrtMemcpy", "aclrtSetDevice", "aclrtBinaryLoadFromFile", "aclrtSynchronizeStream", "ACL_SUCCESS",
        "ACL_EVENT_SYNC", "ACL_MEMCPY_HOST_TO_HOST", "ACL_MEMCPY_HOST_TO_DEVICE", "ACL_MEMCPY_DEVICE_TO_HOST",
        "ACL_MEMCPY_DEVICE_TO_DEVICE", "ACL_RT_BINARY_LOAD_OPT_MAGIC", "aclrtBinaryLoadOption"])


def test_undeclared_and_unreadable_are_told_apart(fixture_check):
    assert "aclInit" in fixture_check.undeclared and "aclnnMatmul" in fixture_check.undeclared
    # hccl.h's types header is missing: its declaration names types the parse could not resolve.
    assert fixture_check.unreadable == ["HcclGetRankSize"]
    assert any("hccl/hccl_types.h' file not found" in p for p in fixture_check.problems)
    table = fixture_check.table()
    assert table.startswith(f"CANN headers: {FIXTURE}\n  12 equal, 4 different, ")
    assert "  DIFFERENT aclrtCreateStream: takes 2 parameters, esgraph passes 1\n" in table
    assert "unreadable (a type in the declaration did not parse): HcclGetRankSize" in table


def test_a_check_that_cannot_run_says_why(tmp_path, monkeypatch):
    with pytest.raises(cann_headers.CannHeadersError, match="no such folder of CANN headers"):
        cann_headers.check(str(tmp_path / "nowhere"))
    (tmp_path / "unrelated.h").write_text("int unrelated(void);\n")
    with pytest.raises(cann_headers.CannHeadersError, match="declares any function esgraph loads"):
        cann_headers.check(str(tmp_path))
    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    with pytest.raises(cann_headers.CannHeadersError, match="give --cann-include DIR, or set ASCEND_HOME_PATH"):
        cann_headers.check()
    monkeypatch.setitem(sys.modules, "clang", None)  # no libclang bindings installed
    with pytest.raises(cann_headers.CannHeadersError, match=r"needs libclang's Python bindings \(Debian: python3-clang\)"):
        cann_headers.check(FIXTURE)


def test_the_command_line_prints_the_differences_and_fails():
    r = esgraph_cli("cann-headers", "--cann-include", FIXTURE)
    assert r.returncode == 1, r.stderr
    assert "DIFFERENT aclrtGetDeviceCount: parameter 1 is u64*, esgraph passes u32*" in r.stdout
    r = esgraph_cli("cann-headers", "--cann-include", "/nonexistent")
    assert r.returncode == 2 and "no such folder of CANN headers: /nonexistent" in r.stderr


def test_ascend_check_reads_the_headers_before_it_runs_anything():
    r = esgraph_cli("ascend-check", "--simulated", "--cann-include", FIXTURE)
    assert r.returncode == 1, r.stdout + r.stderr  # every case passes; the headers differ
    assert r.stdout.index("DIFFERENT aclrtCreateStream") < r.stdout.index("pass     elementwise kernel, f32")
    assert r.stdout.endswith("12 of 12 passed\n")
