"""Released op sets: writing a snapshot of the current op set, and reading them back.

A snapshot (op_defs/history/api-<N>.yaml) is the complete op set of API version N with docs and
examples stripped, plus the version and code hash of every inference rule, so the compatibility
checker can compare the current YAML with every release, not only the last.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

import yaml

from . import loader
from .model import OpDef, OpSet, Project

SNAPSHOT_KEYS = {"api", "version", "infer_rules", "ops"}


@dataclass(frozen=True)
class RuleInfo:
    version: int
    code_hash: str


@dataclass(frozen=True)
class Snapshot:
    api: int
    version: str
    rules: Dict[str, RuleInfo]
    opset: OpSet
    path: Path


def rule_hashes(rules_cpp: Path) -> Dict[str, str]:
    """A hash of each `infer_<name>` function's code in infer_rules.cpp, ignoring comments and
    whitespace, so that editing a rule's logic is visible in the history."""
    text = rules_cpp.read_text()
    out = {}
    for m in re.finditer(r"^void infer_(\w+)\(InferContext& ctx\) \{", text, re.M):
        depth, i = 0, m.end() - 1
        while True:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                break
        body = re.sub(r"//[^\n]*", "", text[m.start():i])
        out[m[1]] = hashlib.sha256(re.sub(r"\s+", "", body).encode()).hexdigest()[:16]
    return out


def current_rules(rules_def: Path, rules_cpp: Path) -> Dict[str, RuleInfo]:
    hashes = rule_hashes(rules_cpp)
    return {name: RuleInfo(version, hashes.get(name, "")) for name, version in loader.read_rule_versions(rules_def)}


def _op_dict(op: OpDef) -> dict:
    d: dict = {"name": op.name, "since": op.since}
    if op.status != "stable":
        d["status"] = op.status
    d["summary"] = op.summary
    if op.type_vars:
        d["type_vars"] = {tv.name: list(tv.dtypes) for tv in op.type_vars}
    if op.inputs:
        d["inputs"] = []
        for i in op.inputs:
            e = {"name": i.name, "type": i.type}
            if i.optional:
                e["optional"] = True
            if i.variadic:
                e.update(variadic=True, min=i.min_count)
            if i.since != op.since:
                e["since"] = i.since
            d["inputs"].append(e)
    d["outputs"] = []
    for o in op.outputs:
        e = {"name": o.name, "type": o.type}
        if o.count:
            e["count"] = {o.count.kind: o.count.ref}
        d["outputs"].append(e)
    if op.attrs:
        d["attrs"] = []
        for a in op.attrs:
            e = {"name": a.name, "type": a.type}
            if a.values:
                e["values"] = list(a.values)
            if a.required:
                e["required"] = True
            else:
                e["default"] = list(a.default) if isinstance(a.default, tuple) else a.default
            if a.range:
                e["range"] = list(a.range)
            if a.since != op.since:
                e["since"] = a.since
            d["attrs"].append(e)
    if op.subgraphs:
        d["subgraphs"] = [{"name": s.name, **({"params": s.params} if s.params else {})} for s in op.subgraphs]
    d["infer"] = op.infer
    if op.compute:
        d["compute"] = " ".join(op.compute.split())
    return d


def snapshot_text(opset: OpSet, project: Project, rules: Dict[str, RuleInfo]) -> str:
    header = (f"# The op set of API version {project.api} (esgraph {project.version}), recorded by\n"
              f"# `make release-snapshot`. Never edit: the compatibility checker holds every later\n"
              f"# op set to it.\n")
    body = {
        "api": project.api,
        "version": project.version,
        "infer_rules": {name: {"version": r.version, "hash": r.code_hash} for name, r in rules.items()},
        "ops": [_op_dict(op) for op in opset.ops],
    }
    return header + yaml.safe_dump(body, sort_keys=False, default_flow_style=None, width=100)


def read_snapshot(path: Path, root: Path) -> Snapshot:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or set(data) != SNAPSHOT_KEYS:
        raise loader.LoadError([f"{path}:1: a snapshot needs exactly the keys {sorted(SNAPSHOT_KEYS)}"])
    rules = {name: RuleInfo(int(r["version"]), str(r["hash"])) for name, r in data["infer_rules"].items()}
    opset = loader.load([path], tuple(rules), root, top_keys=SNAPSHOT_KEYS)
    return Snapshot(int(data["api"]), str(data["version"]), rules, opset, path)


def read_history(history: Path, root: Path) -> List[Snapshot]:
    """Every recorded API version, oldest first."""
    snaps = [read_snapshot(p, root) for p in history.glob("api-*.yaml")]
    return sorted(snaps, key=lambda s: s.api)


def snapshot_path(history: Path, api: int) -> Path:
    return history / f"api-{api}.yaml"
