"""One converter per ONNX op type, grouped by kind; importing the modules registers them."""
from .registry import CONVERTERS, Unsupported
from . import control, elementwise, indexing, nn, recurrent, reduce, shape  # noqa: F401  (registration)

__all__ = ["CONVERTERS", "Unsupported"]
