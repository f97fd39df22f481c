"""scripts/abi-check.sh on doctored ABI dumps: a removed function is an incompatible change
and fails; an added function is reported and passes; the real library matches its baselines."""
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("ESG_BUILD_DIR", REPO / "build" / "default"))
SCRIPT = REPO / "scripts" / "abi-check.sh"
BASELINE = sorted((REPO / "abi").glob("libesgraph-api-*.abi"))[0]


def without_function(text: str, name: str) -> str:
    """The dump with one exported function (its declaration and ELF symbol) removed."""
    text, n_decl = re.subn(rf"\n *<function-decl name='{name}'.*?</function-decl>", "", text, flags=re.S)
    text, n_sym = re.subn(rf"\n *<elf-symbol name='{name}'[^\n]*/>", "", text)
    assert n_decl == 1 and n_sym == 1, (n_decl, n_sym)
    return text


def run(lib, baselines: Path, current: Path):
    env = dict(os.environ, ESG_ABI_BASELINES=str(baselines), ESG_ABI_CURRENT=str(current))
    return subprocess.run([str(SCRIPT), str(lib), str(BUILD / "generated" / "include")], env=env,
                          capture_output=True, text=True)


@pytest.fixture
def dirs(tmp_path):
    (tmp_path / "base").mkdir()
    return tmp_path / "base", tmp_path / "current.abi"


def test_a_removed_function_fails(dirs):
    base, current = dirs
    (base / BASELINE.name).write_text(BASELINE.read_text())
    current.write_text(without_function(BASELINE.read_text(), "esg_graph_to_dot"))
    r = run("unused.so", base, current)
    assert r.returncode == 1, r.stdout
    assert "INCOMPATIBLE" in r.stdout and "esg_graph_to_dot" in r.stdout


def test_an_added_function_is_reported_and_passes(dirs):
    base, current = dirs
    (base / BASELINE.name).write_text(without_function(BASELINE.read_text(), "esg_graph_to_dot"))
    current.write_text(BASELINE.read_text())
    r = run("unused.so", base, current)
    assert r.returncode == 0, r.stdout
    assert "additions" in r.stdout and "esg_graph_to_dot" in r.stdout


@pytest.mark.skipif(not (BUILD / "c_api" / "libesgraph.so").exists(), reason="needs the built library")
def test_the_built_library_keeps_every_baseline():
    r = subprocess.run([str(SCRIPT), str(BUILD / "c_api" / "libesgraph.so"), str(BUILD / "generated" / "include")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "INCOMPATIBLE" not in r.stdout
