"""The command line, run as the build runs it: `python -m esgraph_codegen` in a subprocess."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from esgraph_codegen import emitters

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "compiler_core" / "ir" / "infer_rules.def"


def codegen(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "codegen"))
    return subprocess.run([sys.executable, "-m", "esgraph_codegen", *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


BAD_YAML = """\
ops:
  - name: t_x
    since: "one"
    summary: A test op.
    outputs: [{name: y, type: f32}]
    infer: elementwise
"""


def test_check_reports_each_problem_as_file_and_line(tmp_path):
    op_defs = tmp_path / "op_defs"
    op_defs.mkdir()
    (op_defs / "bad.yaml").write_text(BAD_YAML, encoding="utf-8")
    result = codegen("check", "--op-defs", op_defs, "--rules", RULES, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    *problems, summary = result.stderr.splitlines()
    assert problems[0] == "op_defs/bad.yaml:3: `since` of op `t_x` must be an integer, got 'one'"
    assert problems[1].startswith("op_defs/bad.yaml:6: unknown inference rule `elementwise`")
    assert len(problems) == 2
    assert summary == f"esgraph_codegen: 2 problem(s) in {op_defs}"


def test_generate_fails_on_invalid_yaml_and_writes_nothing(tmp_path):
    op_defs = tmp_path / "op_defs"
    op_defs.mkdir()
    (op_defs / "bad.yaml").write_text(BAD_YAML, encoding="utf-8")
    out = tmp_path / "gen"
    result = codegen("generate", "--op-defs", op_defs, "--rules", RULES, "--out", out, cwd=tmp_path)
    assert result.returncode == 1
    assert re.match(r"op_defs/bad\.yaml:\d+: ", result.stderr)
    assert not out.exists()


def test_check_accepts_the_real_op_defs(tmp_path):
    result = codegen("check", "--op-defs", REPO / "op_defs", "--rules", RULES, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    count = int(re.fullmatch(r"(\d+) ops OK\n", result.stdout).group(1))
    assert count >= 60


def test_generate_writes_every_file_then_only_changes(tmp_path):
    out, stamp = tmp_path / "gen", tmp_path / "stamps" / "codegen.stamp"
    args = ("generate", "--op-defs", REPO / "op_defs", "--rules", RULES, "--out", out, "--stamp", stamp)
    n = len(emitters.EMITTERS)

    first = codegen(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert re.fullmatch(rf"esgraph_codegen: \d+ ops, {n} of {n} files updated\n", first.stdout)
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == sorted(
        e.output for e in emitters.EMITTERS)
    assert stamp.is_file()

    second = codegen(*args, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert re.fullmatch(rf"esgraph_codegen: \d+ ops, 0 of {n} files updated\n", second.stdout)


def test_generate_needs_out(tmp_path):
    result = codegen("generate", "--op-defs", REPO / "op_defs", "--rules", RULES, cwd=tmp_path)
    assert result.returncode == 2
    assert "generate needs --out" in result.stderr
