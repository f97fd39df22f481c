"""Command line of the codegen.

    python3 -m esgraph_codegen generate --op-defs op_defs --rules compiler_core/ir/infer_rules.def \\
        --version-file VERSION --symbols c_api/symbols.txt --header include/esgraph/c/esgraph.h --out build/gen
    python3 -m esgraph_codegen check    --op-defs op_defs --rules compiler_core/ir/infer_rules.def

`generate` writes every emitter's file (only those whose content changed); `check` only loads
and validates. Both exit 1 with `file:line: problem` lines on invalid input.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import loader, project, render
from .model import OpSet


def add_common(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--op-defs", type=Path, required=True)
    ap.add_argument("--rules", type=Path, required=True)
    ap.add_argument("--version-file", type=Path)
    ap.add_argument("--symbols", type=Path)
    ap.add_argument("--header", type=Path)


def load_opset(args) -> OpSet:
    """The op set with its project data; raises LoadError or ProjectError."""
    proj = project.read_project(args.version_file, args.symbols, args.header) if args.version_file else None
    opset = loader.load_dir(args.op_defs, args.rules, proj.api if proj else None)
    return OpSet(opset.ops, opset.infer_rules, proj) if proj else opset


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="esgraph_codegen", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("generate", "check"))
    add_common(ap)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--stamp", type=Path)
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
    if args.out is None:
        ap.error("generate needs --out")
    files = render.render_all(opset, args.op_defs.name)
    changed = render.write_changed(files, args.out)
    if args.stamp:
        args.stamp.parent.mkdir(parents=True, exist_ok=True)
        args.stamp.touch()
    print(f"esgraph_codegen: {len(opset.ops)} ops, {len(changed)} of {len(files)} files updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
