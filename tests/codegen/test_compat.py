"""The compatibility checker: one YAML mutation per rule, each caught, and the allowed kinds of
change, each passing. The "released" op set is recorded with the real snapshot writer and read
back, so the history round trip is exercised too."""
from __future__ import annotations

import datetime
import re
import subprocess

from pathlib import Path

import pytest

from esgraph_codegen import compat, history, loader
from esgraph_codegen.history import RuleInfo
from esgraph_codegen.model import Project

REPO = Path(__file__).resolve().parents[2]

RELEASED = """\
ops:
  - name: t_op
    since: 1
    summary: A test op.
    type_vars: {T: [f32, f16]}
    inputs:
      - {name: x, type: T}
      - {name: y, type: T, optional: true}
      - {name: z, type: T, optional: true}
    outputs: [{name: out, type: T}]
    attrs:
      - {name: axis, type: int, default: 0, range: [-4, 4]}
      - {name: mode, type: enum, values: [a, b], default: a}
      - {name: k, type: int, required: true}
    infer: unary
  - name: t_other
    since: 1
    summary: Another op.
    inputs: [{name: x, type: f32}]
    outputs: [{name: out, type: f32}]
    infer: unary
  - name: t_body
    since: 1
    summary: An op with bodies.
    inputs: [{name: c, type: bool}]
    outputs: [{name: outs, type: subgraph, count: {subgraph: a}}]
    subgraphs: [{name: a}, {name: b}]
    infer: if_else
  - name: t_exp
    since: 1
    status: experimental
    summary: Experimental.
    inputs: [{name: x, type: f32}]
    outputs: [{name: out, type: f32}]
    infer: unary
"""
RULES = {"unary": RuleInfo(1, "aaaa"), "if_else": RuleInfo(1, "bbbb"), "broadcast": RuleInfo(1, "cccc")}


@pytest.fixture
def released(tmp_path, load_yaml):
    """The op set above, recorded as API 1 and read back from its snapshot file."""
    opset = load_yaml(RELEASED)
    path = tmp_path / "history" / "api-1.yaml"
    path.parent.mkdir()
    path.write_text(history.snapshot_text(opset, Project("0.1.0", 1), RULES))
    return history.read_snapshot(path, tmp_path)


def violations(load_yaml, released, text, rules=RULES):
    current = load_yaml(text)
    return compat.check(current, rules, [released], api=2)


def rules_of(found):
    return {v.rule for v in found}


def test_the_released_set_itself_passes(load_yaml, released):
    assert violations(load_yaml, released, RELEASED) == []


MUTATIONS = [
    ("op-removed", lambda s: s.replace(_block("t_other"), "")),
    ("input-removed", lambda s: s.replace("{name: z, type: T, optional: true}", "{name: q, type: T, optional: true, since: 2}")),
    ("input-reordered", lambda s: s.replace("      - {name: y, type: T, optional: true}\n      - {name: z, type: T, optional: true}",
                                            "      - {name: z, type: T, optional: true}\n      - {name: y, type: T, optional: true}")),
    ("input-reordered", lambda s: s.replace("      - {name: y, type: T, optional: true}",
                                            "      - {name: w, type: T, optional: true, since: 2}\n      - {name: y, type: T, optional: true}")),
    ("input-added-required", lambda s: s.replace("    inputs: [{name: x, type: f32}]\n    outputs: [{name: out, type: f32}]\n    infer: unary\n  - name: t_body",
                                                 "    inputs: [{name: x, type: f32}, {name: extra, type: f32, since: 2}]\n    outputs: [{name: out, type: f32}]\n    infer: unary\n  - name: t_body")),
    ("input-changed", lambda s: s.replace("{name: y, type: T, optional: true}", "{name: y, type: T}")),
    ("output-removed", lambda s: s.replace("outputs: [{name: out, type: T}]", "outputs: [{name: result, type: T}]")),
    ("output-changed", lambda s: s.replace("    inputs: [{name: x, type: f32}]\n    outputs: [{name: out, type: f32}]\n    infer: unary\n  - name: t_body",
                                           "    inputs: [{name: x, type: f32}]\n    outputs: [{name: out, type: i32}]\n    infer: unary\n  - name: t_body")),
    ("output-added", lambda s: s.replace("outputs: [{name: out, type: T}]", "outputs: [{name: out, type: T}, {name: extra, type: T}]")),
    ("attr-removed", lambda s: s.replace("      - {name: axis, type: int, default: 0, range: [-4, 4]}\n", "")),
    ("attr-reordered", lambda s: s.replace("      - {name: axis, type: int, default: 0, range: [-4, 4]}",
                                           "      - {name: first, type: int, default: 0, since: 2}\n      - {name: axis, type: int, default: 0, range: [-4, 4]}")),
    ("attr-added-required", lambda s: s.replace("      - {name: k, type: int, required: true}",
                                                "      - {name: k, type: int, required: true}\n      - {name: n, type: int, required: true, since: 2}")),
    ("attr-became-required", lambda s: s.replace("{name: axis, type: int, default: 0, range: [-4, 4]}", "{name: axis, type: int, required: true, range: [-4, 4]}")),
    ("default-changed", lambda s: s.replace("{name: axis, type: int, default: 0,", "{name: axis, type: int, default: 1,")),
    ("enum-narrowed", lambda s: s.replace("values: [a, b], default: a", "values: [b, a], default: a")),
    ("enum-narrowed", lambda s: s.replace("values: [a, b], default: a", "values: [a], default: a")),
    ("range-narrowed", lambda s: s.replace("range: [-4, 4]", "range: [-2, 4]")),
    ("type-changed", lambda s: s.replace("{name: axis, type: int, default: 0, range: [-4, 4]}", "{name: axis, type: float, default: 0.0, range: [-4, 4]}")),
    ("kind-changed", lambda s: s.replace("      - {name: axis, type: int, default: 0, range: [-4, 4]}\n", "").replace(
        "      - {name: z, type: T, optional: true}", "      - {name: z, type: T, optional: true}\n      - {name: axis, type: T, optional: true, since: 2}")),
    ("dtypes-narrowed", lambda s: s.replace("type_vars: {T: [f32, f16]}", "type_vars: {T: [f32]}")),
    ("since-edited", lambda s: s.replace("  - name: t_other\n    since: 1", "  - name: t_other\n    since: 2")),
    ("since-wrong", lambda s: s + "  - name: t_new\n    since: 1\n    summary: New.\n    inputs: [{name: x, type: f32}]\n    outputs: [{name: out, type: f32}]\n    infer: unary\n"),
    ("since-wrong", lambda s: s.replace("      - {name: k, type: int, required: true}",
                                        "      - {name: k, type: int, required: true}\n      - {name: extra, type: int, default: 0}")),
    ("subgraph-changed", lambda s: s.replace("subgraphs: [{name: a}, {name: b}]", "subgraphs: [{name: a}, {name: d}]")),
    ("rule-changed", lambda s: s.replace("    inputs: [{name: x, type: f32}]\n    outputs: [{name: out, type: f32}]\n    infer: unary\n  - name: t_body",
                                         "    inputs: [{name: x, type: f32}]\n    outputs: [{name: out, type: f32}]\n    infer: broadcast\n  - name: t_body")),
]


def _block(op):
    start = RELEASED.index(f"  - name: {op}\n")
    end = RELEASED.find("  - name: ", start + 1)
    return RELEASED[start:end if end >= 0 else len(RELEASED)]


@pytest.mark.parametrize("rule, mutate", MUTATIONS, ids=[f"{r}-{i}" for i, (r, _) in enumerate(MUTATIONS)])
def test_each_breaking_change_is_caught(load_yaml, released, rule, mutate):
    text = mutate(RELEASED)
    assert text != RELEASED, "the mutation did not apply"
    found = violations(load_yaml, released, text)
    assert rule in rules_of(found), [str(v) for v in found]
    for v in found:
        assert re.match(r"^(op_defs|history)/[\w.-]+\.yaml:\d+: \[", str(v)), str(v)  # file:line and rule
        assert v.api == 1


def test_a_rule_whose_code_changed_needs_a_new_version(load_yaml, released):
    edited = dict(RULES, unary=RuleInfo(1, "dddd"))
    assert "rule-not-bumped" in rules_of(violations(load_yaml, released, RELEASED, edited))
    bumped = dict(RULES, unary=RuleInfo(2, "dddd"))
    assert violations(load_yaml, released, RELEASED, bumped) == []


ALLOWED = [
    ("a new op", lambda s: s + "  - name: t_new\n    since: 2\n    summary: New.\n    inputs: [{name: x, type: f32}]\n    outputs: [{name: out, type: f32}]\n    infer: unary\n"),
    ("a trailing optional input", lambda s: s.replace("      - {name: z, type: T, optional: true}",
                                                      "      - {name: z, type: T, optional: true}\n      - {name: w, type: T, optional: true, since: 2}")),
    ("an attribute with a default", lambda s: s.replace("      - {name: k, type: int, required: true}",
                                                        "      - {name: k, type: int, required: true}\n      - {name: scale, type: float, default: 1.0, since: 2}")),
    ("widened dtypes", lambda s: s.replace("type_vars: {T: [f32, f16]}", "type_vars: {T: [f32, f16, bf16]}")),
    ("an appended enum value", lambda s: s.replace("values: [a, b], default: a", "values: [a, b, c], default: a")),
    ("a widened range", lambda s: s.replace("range: [-4, 4]", "range: [-8, null]")),
    ("docs", lambda s: s.replace("summary: A test op.", "summary: A better summary.\n    doc: Longer docs.")),
    ("an experimental op removed", lambda s: s.replace(_block("t_exp"), "")),
]


@pytest.mark.parametrize("what, change", ALLOWED, ids=[w for w, _ in ALLOWED])
def test_allowed_changes_pass(load_yaml, released, what, change):
    text = change(RELEASED)
    assert text != RELEASED
    assert violations(load_yaml, released, text) == []


def test_history_is_checked_against_every_release_not_only_the_last(load_yaml, released, tmp_path):
    # API 2 dropped nothing from API 1's view but changed a default; API 3 (current) restores
    # API 2's op set: the change against API 1 must still be reported.
    v2 = load_yaml(RELEASED.replace("{name: axis, type: int, default: 0,", "{name: axis, type: int, default: 1,"))
    path = tmp_path / "history" / "api-2.yaml"
    path.write_text(history.snapshot_text(v2, Project("0.2.0", 2), RULES))
    api2 = history.read_snapshot(path, tmp_path)
    found = compat.check(v2, RULES, [released, api2], api=3)
    assert [(v.rule, v.api) for v in found] == [("default-changed", 1)]


def _entry(rule, expires, op="t_op"):
    return compat.AllowEntry(op, rule, "on purpose", expires, loader.Location("allowlist.yaml", 3))


def test_an_allowlist_entry_allows_until_it_expires(load_yaml, released):
    found = violations(load_yaml, released, RELEASED.replace("default: 0,", "default: 1,"))
    today = datetime.date(2026, 11, 30)
    standing, allowed = compat.apply_allowlist(found, [_entry("default-changed", datetime.date(2027, 1, 1))], today)
    assert standing == [] and [v.rule for v in allowed] == ["default-changed"]
    standing, allowed = compat.apply_allowlist(found, [_entry("default-changed", datetime.date(2026, 11, 1))], today)
    assert sorted(v.rule for v in standing) == ["allowlist-expired", "default-changed"]
    assert "expired on 2026-11-01" in str(standing[0])


def test_allowlist_entries_must_name_op_rule_reason_and_expiry(tmp_path):
    bad = tmp_path / "allowlist.yaml"
    bad.write_text("allow:\n  - {op: t_op, rule: default-changed, reason: because}\n")
    with pytest.raises(compat.AllowlistError, match="allowlist.yaml:2: an entry needs exactly"):
        compat.read_allowlist(bad, "allowlist.yaml")
    bad.write_text("allow:\n  - {op: t_op, rule: no-such-rule, reason: r, expires: 2027-01-01}\n")
    with pytest.raises(compat.AllowlistError, match="unknown rule `no-such-rule`"):
        compat.read_allowlist(bad, "allowlist.yaml")


def test_every_rule_has_a_test():
    tested = {r for r, _ in MUTATIONS} | {"rule-not-bumped", "allowlist-expired"}
    assert tested == set(compat.RULES)


def test_the_real_op_set_passes_against_its_history():
    r = subprocess.run([str(REPO / "scripts" / "codegen.sh"), "compat"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "0 violation(s)" in r.stdout
