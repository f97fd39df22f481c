"""Window generators, local response normalization and the quantization ops, written over
esgraph's elementwise ops, range and pooling."""
import math

import numpy as np

from ... import _C
from ..._compose import avg_pool_counting_padding
from .. import _dtypes
from .nn import _static
from .registry import Unsupported, check_attrs, converts

ops = _C.ops

# cos terms of each window: value = sum_k c_k cos(2 pi k n / N)
_WINDOWS = {"HannWindow": [0.5, -0.5], "HammingWindow": [25 / 46, -21 / 46], "BlackmanWindow": [0.42, -0.5, 0.08]}


def _window(n):
    check_attrs(n, ("output_datatype", "periodic"))
    size = int(np.asarray(n.const(0, "size")).reshape(-1)[0])
    period = size if n.attr("periodic", 1) else size - 1
    positions = ops.range(float(size), dtype=_C.f64)
    value = None
    for k, c in enumerate(_WINDOWS[n.op_type]):
        term = c if k == 0 else ops.cos(positions * (2 * math.pi * k / period)) * c
        value = term if value is None else value + term
    if isinstance(value, float):
        value = ops.fill([size], value=value, dtype=_C.f64)
    return ops.cast(value, _dtypes.esg_dtype(n.attr("output_datatype", 1)))


for _op in _WINDOWS:
    converts(_op)(_window)


@converts("LRN")
def lrn(n):
    # x / (bias + alpha / size * sum of x^2 over `size` neighbouring channels) ^ beta; the
    # channel sum is an average pool over a [size, 1] window that counts the zero padding.
    x, size = n.x(0), n.attr("size")
    alpha, beta, bias = n.attr("alpha", 1e-4), n.attr("beta", 0.75), n.attr("bias", 1.0)
    dims = _static(x.shape, "LRN")
    squares = ops.reshape(x * x, [dims[0], 1, dims[1], math.prod(dims[2:])])
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    sums = avg_pool_counting_padding(squares, [size, 1], [1, 1], [before, 0, after, 0], False) * float(size)
    return x / ops.pow(ops.reshape(sums, dims) * (alpha / size) + bias, beta)


def _along(t, axis, rank):
    """A per-axis parameter [C] shaped to broadcast along `axis`; a scalar stays as it is."""
    if t.ndim == 0:
        return t
    return ops.reshape(t, [-1] + [1] * (rank - 1 - axis % rank))


_SATURATION = {_C.u8: (0, 255), _C.i8: (-128, 127)}


def _saturate(v, dtype):
    low, high = _SATURATION[dtype]
    return ops.cast(ops.clip(v, min=low, max=high), dtype)


@converts("QuantizeLinear")
def quantize(n):
    x, rank = n.x(0), n.rank(0)
    axis = n.attr("axis", 1)
    scale = _along(n.x(1), axis, rank)
    out = n.dtype(2) if n.has(2) else _C.u8
    if out not in _SATURATION:
        raise Unsupported(f"quantizing to {out.name}")
    q = ops.round(ops.cast(x, _C.f32) / scale)  # half to even, as ONNX rounds
    if n.has(2):
        q = q + ops.cast(_along(n.x(2), axis, rank), _C.f32)
    return _saturate(q, out)


@converts("DequantizeLinear")
def dequantize(n):
    x, rank = n.x(0), n.rank(0)
    axis = n.attr("axis", 1)
    y = ops.cast(x, _C.f32)
    if n.has(2):
        y = y - ops.cast(_along(n.x(2), axis, rank), _C.f32)
    return y * _along(n.x(1), axis, rank)


@converts("DynamicQuantizeLinear")
def dynamic_quantize(n):
    x = n.x(0)
    low = ops.minimum(ops.reduce_min(x), 0.0)
    high = ops.maximum(ops.reduce_max(x), 0.0)
    scale = (high - low) / 255.0
    zero_point = _saturate(ops.round(-low / scale), _C.u8)
    y = _saturate(ops.round(x / scale) + ops.cast(zero_point, _C.f32), _C.u8)
    return [y, scale, zero_point]


@converts("MatMulInteger")
def matmul_integer(n):
    a, b = ops.cast(n.x(0), _C.i32), ops.cast(n.x(1), _C.i32)
    if n.has(2):
        zp = ops.cast(n.x(2), _C.i32)
        a = a - (ops.unsqueeze(zp, [1]) if zp.ndim == 1 else zp)  # one zero point per row of a
    if n.has(3):
        b = b - ops.cast(n.x(3), _C.i32)  # per column of b: broadcasts as it is
    return ops.matmul(a, b)
