"""The Ascend tests' fixtures: a kernel cache of each module's own, and the simulated device's
call log. The tests run the real backend code (the AscendCL loader, kernel generation and build,
device programs) against the stand-in libascendcl.so of tests/ascend_sim, whose call log shows
the launch protocol; values are checked against the CPU backend (itself checked against numpy in
test_numerics_*.py). ascend_device.py holds what they share besides."""
import pytest


@pytest.fixture(scope="module", autouse=True)
def private_kernel_cache(tmp_path_factory):
    """Kernels built by this module go to a cache of its own (and are shared by its tests)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("ESG_KERNEL_CACHE", str(tmp_path_factory.mktemp("kernels")))
    yield
    mp.undo()


@pytest.fixture
def acl_log(tmp_path, monkeypatch):
    """The simulator's call log of what the test does, as a list of lines (read when called)."""
    path = tmp_path / "acl.log"
    monkeypatch.setenv("ACLSIM_LOG", str(path))

    def lines():
        return path.read_text().splitlines() if path.exists() else []
    return lines
