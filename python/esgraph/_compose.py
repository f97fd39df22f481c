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


def avg_pool_counting_padding(x, kernel, strides, pads, ceil_mode):
    """Average pooling whose divisor counts the zero padding (ONNX count_include_pad=1,
    PyTorch's default); esgraph's avg_pool2d averages over the elements inside the input.
    Padding first is exact without ceil_mode; with it, windows that start in the padding
    would be kept, so that combination is refused."""
    if not any(pads):
        return ops.avg_pool2d(x, kernel, strides=strides, pads=pads, ceil_mode=ceil_mode)
    if ceil_mode:
        raise ValueError("average pooling that counts the padding with ceil_mode is not supported")
    top, left, bottom, right = pads
    padded = ops.pad(x, [0, 0, top, left, 0, 0, bottom, right])
    return ops.avg_pool2d(padded, kernel, strides=strides, pads=[0, 0, 0, 0])

