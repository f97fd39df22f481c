"""One converter per ONNX op type, grouped by kind; importing the modules registers them."""
from .registry import CONVERTERS, NeedsShape, NeedsValue, Unsupported
from . import attention, control, einsum, elementwise, indexing, loss, ngrams, nn, optimizers, pooling, quantized, recurrent, reduce, resize, sequence, shape, signal  # noqa: F401  (registration)

__all__ = ["CONVERTERS", "NeedsShape", "NeedsValue", "Unsupported"]
