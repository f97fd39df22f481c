"""The op set of op_defs/, loaded with the codegen's loader (importable by the test modules;
the name is unique so that it cannot clash with another suite's conftest)."""
import keyword
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "codegen") not in sys.path:
    sys.path.insert(0, str(REPO / "codegen"))

from esgraph_codegen import loader  # noqa: E402

OP_SET = loader.load_dir(REPO / "op_defs", REPO / "compiler_core/ir/infer_rules.def")


def py_name(op_name):
    """The name of an op in esgraph.ops: a trailing `_` where it is a Python keyword."""
    return op_name + "_" if keyword.iskeyword(op_name) else op_name
