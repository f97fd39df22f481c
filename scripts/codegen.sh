#!/usr/bin/env bash
# Runs the codegen's command line with the project's files: scripts/codegen.sh compat|snapshot|check
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
PYTHONPATH="$top/codegen" exec "$top/.venv/bin/python" -m esgraph_codegen "$1" --op-defs op_defs \
  --rules compiler_core/ir/infer_rules.def --version-file VERSION --symbols c_api/symbols.txt \
  --header include/esgraph/c/esgraph.h "${@:2}"
