"""Small compositions of esgraph ops that the importers share."""
from . import _C

ops = _C.ops


def numpy_matmul(a, b):
    """matmul with numpy's (and ONNX's, and PyTorch's) 1-D rules: a vector operand gets a unit
    axis for the product (in front of `a`, after `b`), removed from the result."""
    squeeze = []
    if b.ndim == 1:
        b, squeeze = ops.unsqueeze(b, [1]), [-1]
    if a.ndim == 1:
        a, squeeze = ops.unsqueeze(a, [0]), [-2] + squeeze
    y = ops.matmul(a, b)
    return ops.squeeze(y, axes=[y.ndim + s for s in squeeze]) if squeeze else y
