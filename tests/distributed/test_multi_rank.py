"""Multi-rank tests: each scenario of ranks.py runs as its own `mpirun -np 2` job.

The job is the unit (a timeout ends the whole job, as it must), so the scenarios run as
subprocesses of this single-process suite, each with a deadline: a hang fails the test instead
of stalling CI.
"""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import esgraph

RANKS = Path(__file__).with_name("ranks.py")
SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "tensor_parallel.py"
BUILT_SAMPLES = Path(esgraph.__file__).resolve().parents[2] / "samples"  # the build tree's
MPIRUN = shutil.which("mpirun")
pytestmark = pytest.mark.skipif(MPIRUN is None, reason="Open MPI is not installed (make deps installs it)")


def mpirun(scenario, timeout_ms=None, deadline=60, script=RANKS, **variables):
    cmd = [MPIRUN, "-np", "2", "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    env = dict(os.environ)
    if timeout_ms:
        variables["ESG_COLLECTIVE_TIMEOUT_MS"] = str(timeout_ms)
    for name, value in variables.items():
        env[name] = value
        cmd += ["-x", name]
    cmd += ["-x", "PYTHONPATH"] + ([sys.executable] if script.suffix == ".py" else []) + [str(script)] + ([scenario] if scenario else [])
    started = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=deadline)
    return done, time.monotonic() - started


@pytest.mark.parametrize("scenario", ["ops", "prepared", "parallel_layers", "onnx_sharding", "send_recv", "mismatch", "unpaired", "ascend"])
def test_every_rank_passes(scenario):
    done, _ = mpirun(scenario)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    for rank in (0, 1):
        assert f"ok {scenario} rank {rank}" in out, out


def test_a_rank_that_never_arrives_is_named_and_the_job_ends():
    done, took = mpirun("timeout", timeout_ms=2000)
    out = done.stdout + done.stderr
    assert "rank 1 has entered 0 of this group's collectives" in out, out
    assert "all_reduce sum f32[4]" in out, out
    assert "ok timeout rank 0" in out, out
    # Rank 1 would sleep 30 s: the job ends because rank 0 aborts it on exit, not by itself.
    assert done.returncode != 0 and took < 25, (took, out)


def test_the_tensor_parallel_sample_matches_the_whole_block():
    done, _ = mpirun(None, script=SAMPLE)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    for rank in (0, 1):  # (the ranks' lines may interleave in mpirun's output)
        found = re.search(rf"rank {rank} of 2: 2 all_reduces of \d+ bytes, largest difference from the whole block ([-+.e0-9]+)", out)
        assert found and float(found.group(1)) <= 1e-4, out


def test_a_member_that_never_comes_to_make_a_group_is_named_and_the_job_ends():
    done, took = mpirun("late_group", timeout_ms=2000)
    out = done.stdout + done.stderr
    assert "did not finish within 2000 ms: rank 1 did not come" in out and "ok late_group rank 0" in out, out
    assert done.returncode != 0 and took < 25, (took, out)


def test_a_rank_that_stops_mid_job_is_named_and_the_job_ends():
    done, took = mpirun("late_run", timeout_ms=2000)
    out = done.stdout + done.stderr
    assert "ok first run rank 0" in out and "ok first run rank 1" in out, out
    assert "esgraph: all_reduce sum f32[4] over [0,1]" in out and "did not finish within 2000 ms: rank 1 has entered" in out, out
    assert done.returncode != 0 and took < 25, (took, out)


def test_a_call_over_the_blocking_size_that_times_out_is_an_error_to_catch():
    done, took = mpirun("late_large_run", timeout_ms=2000, ESG_MPI_BLOCKING_BELOW="1024")
    out = done.stdout + done.stderr
    assert "rank 0 failed: all_reduce sum f32[1024] over [0,1]" in out and "ok late_large_run rank 0" in out, out
    assert done.returncode != 0 and took < 25, (took, out)  # the late call stays pending: the job is ended at exit


@pytest.mark.parametrize("sample", ["tensor_parallel_cpp", "tensor_parallel_c99"])
def test_the_compiled_samples_match_the_whole_mlp(sample):
    """C++ (the world found from mpirun) and C99 (MPI of its own, the communicator handed over)."""
    done, _ = mpirun(None, script=BUILT_SAMPLES / sample)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    for rank in (0, 1):
        found = re.search(rf"rank {rank} of 2: largest difference from the whole MLP ([-+.e0-9]+)", out)
        assert found and float(found.group(1)) <= 1e-4, out
