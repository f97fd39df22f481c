"""Command line of the codegen.

    python3 -m esgraph_codegen generate --op-defs op_defs --rules compiler_core/ir/infer_rules.def \\
        --version-file VERSION --symbols c_api/symbols.txt --header include/esgraph/c/esgraph.h --out build/gen
    python3 -m esgraph_codegen check    --op-defs op_defs --rules compiler_core/ir/infer_rules.def
    python3 -m esgraph_codegen compat   --op-defs op_defs --rules ... --version-file VERSION
    python3 -m esgraph_codegen snapshot --op-defs op_defs --rules ... --version-file VERSION

`generate` writes every emitter's file (only those whose content changed); `check` only loads
and validates; `compat` compares the op set with every release in op_defs/history/ (see
compat.py) and `snapshot` records the current one there as api-<api>.yaml. All exit 1 with
`file:line: problem` lines on a problem.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import datetime

from . import compat, history, loader, project, render
from .model import OpSet


def add_common(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--op-defs", type=Path, required=True)
    ap.add_argument("--rules", type=Path, required=True)
    ap.add_argument("--version-file", type=Path)
    ap.add_argument("--symbols", type=Path)
    ap.add_argument("--header", type=Path)
    ap.add_argument("--snapshot", type=Path, help="generate from a released op set instead of --op-defs")


def load_opset(args) -> OpSet:
    """The op set with its project data; raises LoadError or ProjectError."""
    proj = project.read_project(args.version_file, args.symbols, args.header) if args.version_file else None
    if args.snapshot:
        snap = history.read_snapshot(args.snapshot, args.op_defs.resolve().parent)
        # The headers and symbols of that release: only what existed at its API version.
        proj = proj and project.Project(snap.version, snap.api, tuple(s for s in proj.core_symbols if s[0] <= snap.api))
        opset = snap.opset
    else:
        opset = loader.load_dir(args.op_defs, args.rules, proj.api if proj else None)
    return OpSet(opset.ops, opset.infer_rules, proj) if proj else opset


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="esgraph_codegen", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("generate", "check", "compat", "snapshot"))
    add_common(ap)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--stamp", type=Path)
    ap.add_argument("--history", type=Path, help="released op sets (default: <op-defs>/history)")
    ap.add_argument("--allowlist", type=Path, help="default: <history>/compat_allowlist.yaml")
    ap.add_argument("--rules-cpp", type=Path, help="default: infer_rules.cpp beside --rules")
    ap.add_argument("--today", type=datetime.date.fromisoformat, default=datetime.date.today())
    args = ap.parse_args(argv)
    try:
        opset = load_opset(args)
    except loader.LoadError as e:
        for p in e.problems:
            print(p, file=sys.stderr)
        print(f"esgraph_codegen: {len(e.problems)} problem(s) in {args.op_defs}", file=sys.stderr)
        return 1
    except project.ProjectError as e:
        print(f"esgraph_codegen: {e}", file=sys.stderr)
        return 1
    if args.command == "check":
        print(f"{len(opset.ops)} ops OK")
        return 0
    if args.command in ("compat", "snapshot"):
        return release_command(args, opset)
    if args.out is None:
        ap.error("generate needs --out")
    files = render.render_all(opset, args.op_defs.name, core=not args.snapshot)
    changed = render.write_changed(files, args.out)
    if args.stamp:
        args.stamp.parent.mkdir(parents=True, exist_ok=True)
        args.stamp.touch()
    print(f"esgraph_codegen: {len(opset.ops)} ops, {len(changed)} of {len(files)} files updated")
    return 0


def release_command(args, opset: OpSet) -> int:
    if not args.version_file:
        print("esgraph_codegen: compat and snapshot need --version-file", file=sys.stderr)
        return 2
    hist = args.history or args.op_defs / "history"
    rules_now = history.current_rules(args.rules, args.rules_cpp or args.rules.with_name("infer_rules.cpp"))
    root = args.op_defs.resolve().parent
    if args.command == "snapshot":
        path = history.snapshot_path(hist, opset.project.api)
        text = history.snapshot_text(opset, opset.project, rules_now)
        if path.exists() and path.read_text() != text:
            print(f"esgraph_codegen: {path} exists and differs: API {opset.project.api} was released "
                  f"already; move `api` in VERSION on first", file=sys.stderr)
            return 1
        hist.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"esgraph_codegen: recorded {len(opset.ops)} ops as {path}")
        return 0
    try:
        snaps = history.read_history(hist, root)
        allow_path = args.allowlist or hist / "compat_allowlist.yaml"
        allow = compat.read_allowlist(allow_path, str(allow_path))
    except (loader.LoadError, compat.AllowlistError) as e:
        print(e, file=sys.stderr)
        return 1
    found = compat.check(opset, rules_now, snaps, opset.project.api)
    standing, allowed = compat.apply_allowlist(found, allow, args.today)
    for v in allowed:
        print(f"allowed: {v}")
    for v in standing:
        print(v, file=sys.stderr)
    apis = ", ".join(str(s.api) for s in snaps) or "none"
    print(f"esgraph_codegen compat: {len(opset.ops)} ops against API versions {apis}: "
          f"{len(standing)} violation(s), {len(allowed)} allowed")
    return 1 if standing else 0


if __name__ == "__main__":
    sys.exit(main())
