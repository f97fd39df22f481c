"""Writes python/esgraph/onnx/_op_versions.py: the versions of every op of ONNX's default domain,
read from the schemas of the onnx package that runs this script (`make conformance-latest`
installs the newest release, pinned there, in build/onnx-latest). The importer takes an op's
version at a model's opset from this table, since the onnx package it imports with may be older
than the model.

    build/onnx-latest/venv/bin/python scripts/onnx-op-versions.py
"""
import collections
import os

import onnx
import onnx.defs


def main():
    history = collections.defaultdict(set)
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain in ("", "ai.onnx"):
            history[schema.name].add(schema.since_version)
    lines = [
        '"""The versions of each op of ONNX\'s default domain (the opsets that changed it), from the',
        f"schemas of onnx {onnx.__version__}; written by scripts/onnx-op-versions.py, not by hand.\"\"\"",
        "",
        f'ONNX_RELEASE = "{onnx.__version__}"',
        f"LATEST_OPSET = {onnx.defs.onnx_opset_version()}",
        "",
        "HISTORY = {",
    ]
    lines += [f'    "{op}": {tuple(sorted(versions))},' for op, versions in sorted(history.items())]
    lines += ["}", ""]
    path = os.path.join(os.path.dirname(__file__), "..", "python", "esgraph", "onnx", "_op_versions.py")
    with open(path, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
