"""The generated kernels against the real Ascend C headers: every kernel of the smoke set
(ascend-check's) and of the golden tests (tests/cpp/ascend/golden), compiled by the host compiler
in CANN's CPU-debug mode (ASCENDC_CPU_DEBUG=1, as asc-devkit's CMake module builds a kernel for
the CPU), which type-checks them against the devkit's own declarations instead of the simulator's
subset. Skipped unless ASC_DEVKIT_INCLUDE names the headers' folders (separated by ':'): the
devkit's and CPU-debug's own (tikicpulib: stub_def.h, stub_fun.h); ASC_DEVKIT_FLAGS adds compiler
flags. docs/ascend.md says how to point it at an installation and what it gave."""
import glob
import os
import shlex
import subprocess

import pytest

from ascend_device import esgraph_cli

INCLUDE = os.environ.get("ASC_DEVKIT_INCLUDE", "")
GOLDEN = os.path.join(os.path.dirname(__file__), "..", "..", "cpp", "ascend", "golden")

pytestmark = pytest.mark.skipif(not INCLUDE, reason="ASC_DEVKIT_INCLUDE names no Ascend C headers")


def test_every_generated_kernel_compiles_against_the_devkit(tmp_path):
    cache = tmp_path / "kernels"
    r = esgraph_cli("ascend-check", "--simulated", ESG_KERNEL_CACHE=str(cache))
    assert r.returncode == 0, r.stdout + r.stderr
    smoke = sorted(glob.glob(str(cache / "*.cpp")))
    golden = sorted(glob.glob(os.path.join(GOLDEN, "*.cpp")))
    assert len(smoke) >= 5 and len(golden) == 8
    command = [os.environ.get("CXX", "g++"), "-std=c++17", "-fsyntax-only", "-DASCENDC_CPU_DEBUG=1", "-DASCENDC_DEBUG=1",
               "-DASCENDC_DUMP=0", *(f"-I{d}" for d in INCLUDE.split(os.pathsep) if d),
               *shlex.split(os.environ.get("ASC_DEVKIT_FLAGS", ""))]
    failed = {}
    for kernel in smoke + golden:
        result = subprocess.run(command + [kernel], capture_output=True, text=True)
        if result.returncode:
            failed[os.path.basename(kernel)] = "\n".join(result.stderr.splitlines()[:8])
    assert not failed, "\n\n".join(f"{k}:\n{why}" for k, why in failed.items())
