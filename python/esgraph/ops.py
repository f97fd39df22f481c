"""One function per op of op_defs/: required inputs positional, the rest keyword-only.

Tensor arguments also take numpy arrays and Python scalars, which become constants of the
other tensor arguments' dtype. Signatures are in ops.pyi (generated with the bindings).
"""
from . import _C

__all__ = [name for name in dir(_C.ops) if not name.startswith("_")]
globals().update({name: getattr(_C.ops, name) for name in __all__})
