"""ATen ops as esgraph ops: one converter per ATen overload, in one table (CONVERTERS).

The overloads that are one YAML op exactly are claimed by that op's `aten:` key and converted
by `one_op.py`; the rest are written here by subject. Importing this package fills the table.
"""
from . import control, nn, one_op, reduce, shape, vision  # noqa: F401  (each registers its converters)
from .registry import CONVERTERS, Call

__all__ = ["CONVERTERS", "Call"]
