"""The quantization ops: QuantizeLinear and its kin, the integer and quantized products and
convolutions (exact integer sums, in int32 or in f64 below 2^53, requantized as ONNX Runtime
does), and ONNX Runtime's com.microsoft QLinearAdd and MatMulNBits (weight-only products)."""
import numpy as np

from ... import _C
from .. import _dtypes
from .nn import convolve
from .registry import Unsupported, check_attrs, converts

ops = _C.ops


def _along(t, axis, rank):
    """A per-axis parameter [C] shaped to broadcast along `axis`; a scalar stays as it is."""
    if t.ndim == 0:
        return t
    return ops.reshape(t, [-1] + [1] * (rank - 1 - axis % rank))


_SATURATION = {_C.u8: (0, 255), _C.i8: (-128, 127)}


def _saturate(v, dtype):
    low, high = _SATURATION[dtype]
    return ops.cast(ops.clip(v, min=low, max=high), dtype)


def _blocks_refused(n):
    """Blocked quantization (opset 21's block_size) is refused; per-tensor and per-axis are not."""
    if n.attr("block_size", 0):
        raise Unsupported(f"blocked quantization (block_size={n.attr('block_size')})")


def _zero_point(n, index, dtype):
    """Input `index` of n, a zero point, or 0 of `dtype` when it is absent."""
    return n.x(index) if n.has(index) else ops.fill([], value=0.0, dtype=dtype)


@converts("QuantizeLinear")
def quantize(n):
    check_attrs(n, ("axis", "saturate", "block_size", "output_dtype", "precision"))  # saturate: float8 only
    _blocks_refused(n)
    x, rank = n.x(0), n.rank(0)
    axis = n.attr("axis", 1)
    if n.attr("precision", 0) not in (0, 1):  # the scale's type, or f32: what the division runs in here
        raise Unsupported(f"precision {_dtypes.ONNX_TYPE_NAMES.get(n.attr('precision'), n.attr('precision'))}")
    out = n.dtype(2) if n.has(2) else _dtypes.esg_dtype(n.attr("output_dtype", 0) or 2)  # uint8 by default
    if out not in _SATURATION:
        raise Unsupported(f"quantizing to {out.name}")
    zero_point = _along(_zero_point(n, 2, out), axis, rank)
    return ops.quantize_linear(ops.cast(x, _C.f32), _along(ops.cast(n.x(1), _C.f32), axis, rank), zero_point)


@converts("DequantizeLinear")
def dequantize(n):
    check_attrs(n, ("axis", "block_size", "output_dtype"))
    _blocks_refused(n)
    x, rank = n.x(0), n.rank(0)
    axis = n.attr("axis", 1)
    scale = _along(ops.cast(n.x(1), _C.f32), axis, rank)
    if x.dtype in _SATURATION:
        y = ops.dequantize_linear(x, scale, _along(_zero_point(n, 2, x.dtype), axis, rank))
    else:  # int32 (a bias quantized with the product of its operands' scales): beyond 8 bits
        y = ops.cast(x, _C.f32)
        if n.has(2):
            y = y - ops.cast(_along(n.x(2), axis, rank), _C.f32)
        y = y * scale
    # the scale's dtype from opset 19 on (f32 before it), unless opset 23's output_dtype says
    out = _dtypes.esg_dtype(n.attr("output_dtype")) if n.attr("output_dtype", 0) else n.dtype(1)
    return y if out == _C.f32 else ops.cast(y, out)


@converts("DynamicQuantizeLinear")
def dynamic_quantize(n):
    x = n.x(0)
    low = ops.minimum(ops.reduce_min(x), 0.0)
    high = ops.maximum(ops.reduce_max(x), 0.0)
    scale = (high - low) / 255.0
    zero_point = _saturate(ops.round(-low / scale), _C.u8)
    return [ops.quantize_linear(x, scale, zero_point), scale, zero_point]  # one pass, where the ops took five


@converts("MatMulInteger")
def matmul_integer(n):
    return _matmul_integer(n, 0, 1, 2, 3)


def _matmul_integer(n, a, b, a_zero_point, b_zero_point):
    """esgraph's matmul_integer of n's inputs at those positions (an absent zero point is 0):
    (a - a_zero_point) · (b - b_zero_point) in int32, a's zero point one value or one per row,
    b's one value or one per column."""
    return ops.matmul_integer(n.x(a), n.x(b), _zero_point(n, a_zero_point, n.dtype(a)), _zero_point(n, b_zero_point, n.dtype(b)))


def _requantize(acc, multiplier, zero_point, dtype):
    """An int32 accumulator requantized as ONNX Runtime does: acc · multiplier (f32, the input
    scales over the output's) rounded half to even, plus the output's zero point, saturated."""
    if dtype not in _SATURATION:
        raise Unsupported(f"quantizing to {dtype.name}")
    q = ops.round(ops.cast(acc, _C.f32) * multiplier)
    if zero_point is not None:
        q = q + ops.cast(zero_point, _C.f32)
    return _saturate(q, dtype)


@converts("QLinearMatMul")
def qlinear_matmul(n):
    # Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point; a's
    # scale and zero point scalars or one per row, b's scalars or one per column.
    acc = _matmul_integer(n, 0, 3, 2, 5)
    a_scale, b_scale, y_scale = (ops.cast(n.x(i), _C.f32) for i in (1, 4, 6))  # f16 or bf16 ones from opset 21
    if a_scale.ndim == 1:
        a_scale = ops.unsqueeze(a_scale, [1])
    return _requantize(acc, a_scale * b_scale / y_scale, n.x(7), n.dtype(7) if n.has(7) else n.dtype(0))


def _integer_images(x, zero_point, rank):
    """Integer images or filters less their zero point (a scalar, or one per output channel for
    filters), as f64: a convolution of them sums integer products exactly (below 2^53)."""
    v = ops.cast(x, _C.f64)
    if zero_point is None:
        return v
    z = ops.cast(zero_point, _C.f64)
    return v - (ops.reshape(z, [-1] + [1] * (rank - 1)) if z.ndim == 1 else z)


@converts("ConvInteger")
def conv_integer(n):
    rank = n.rank(0)
    y = convolve(n, _integer_images(n.x(0), n.x(2), rank), _integer_images(n.x(1), n.x(3), rank), None)
    return ops.cast(y, _C.i32)


@converts("QLinearConv")
def qlinear_conv(n):
    # Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B
    # (int32, one per output channel); w's scale and zero point scalars or one per channel.
    rank = n.rank(0)
    if rank <= 4:  # 1-D and 2-D: the quantized op itself
        x_zero_point, w_zero_point = _zero_point(n, 2, n.dtype(0)), _zero_point(n, 5, n.dtype(3))
        y_zero_point = _zero_point(n, 7, n.dtype(7) if n.has(7) else n.dtype(0))

        def quantized(x, w, bias, **attributes):
            return ops.quantized_conv2d(x, n.x(1), x_zero_point, w, n.x(4), w_zero_point, n.x(6), y_zero_point,
                                        bias=bias, **attributes)

        return convolve(n, n.x(0), n.x(3), n.x(8) if n.has(8) else None, quantized)
    bias = ops.cast(n.x(8), _C.f64) if n.has(8) else None
    acc = ops.cast(convolve(n, _integer_images(n.x(0), n.x(2), rank), _integer_images(n.x(3), n.x(5), rank), bias), _C.i32)
    w_scale = n.x(4)
    if w_scale.ndim == 1:
        w_scale = ops.reshape(w_scale, [-1] + [1] * (rank - 2))
    return _requantize(acc, n.x(1) * w_scale / n.x(6), n.x(7), n.dtype(7) if n.has(7) else n.dtype(0))


@converts("com.microsoft.QLinearAdd")
def qlinear_add(n):
    # Inputs: A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point (an
    # absent zero point is 0 of its tensor's dtype; C's dtype is A's then).
    check_attrs(n, ())
    for i in (0, 3):
        if n.dtype(i) not in _SATURATION:
            raise Unsupported(f"input {i} of dtype {n.dtype(i).name} (QLinearAdd takes u8 and i8)")
    y_type = n.dtype(7) if n.has(7) else n.dtype(0)
    return ops.quantized_add(n.x(0), ops.cast(n.x(1), _C.f32), _zero_point(n, 2, n.dtype(0)), n.x(3), ops.cast(n.x(4), _C.f32),
                             _zero_point(n, 5, n.dtype(3)), ops.cast(n.x(6), _C.f32), _zero_point(n, 7, y_type))


@converts("com.microsoft.MatMulNBits")
def matmul_nbits(n):
    # Inputs: A [..., K], B [N, blocks, block_size · bits / 8] (codes packed low bits first),
    # scales [N · blocks] (or [N, blocks]), zero_points (uint8 codes packed the same way, each
    # column's in whole bytes, or one float a block), g_idx (deprecated), bias [N].
    check_attrs(n, ("K", "N", "bits", "block_size", "accuracy_level"))
    k, columns, bits, block = n.attr("K"), n.attr("N"), n.attr("bits", 4), n.attr("block_size")
    if bits not in (2, 4, 8):
        raise Unsupported(f"bits={bits} (esgraph takes 2, 4 or 8)")
    if block < 16 or block & (block - 1):
        raise Unsupported(f"block_size={block} (a power of two of at least 16)")
    if n.has(4):
        raise Unsupported("g_idx (deprecated in ONNX Runtime: codes in the order of K only)")
    a, dtype = n.x(0), n.dtype(0)
    if a.shape[-1] != k:
        raise Unsupported(f"A's last axis is {a.shape[-1]}, but K={k}")
    if dtype != _C.f32:
        a = ops.cast(a, _C.f32)
    blocks = -(-k // block)
    b = ops.reshape(n.x(1), [columns, blocks, block * bits // 8])
    scales = ops.reshape(ops.cast(n.x(2), _C.f32), [columns, blocks])
    zero_points = _nbits_zero_points(n.const(3, "zero_points"), columns, blocks, bits) if n.has(3) else None
    level = n.attr("accuracy_level", 0)
    if not 0 <= level <= 4:
        raise Unsupported(f"accuracy_level={level} (ONNX Runtime defines 0 to 4)")
    y = ops.matmul_nbits(a, b, scales, zero_points=None if zero_points is None else n.tensor(zero_points), bits=bits,
                         block_size=block, accuracy_level=level)
    if n.has(5):
        y = y + ops.cast(n.x(5), _C.f32)
    return y if dtype == _C.f32 else ops.cast(y, dtype)


def _nbits_zero_points(z, columns, blocks, bits):
    """MatMulNBits's zero points as one uint8 code a block, [N, blocks]: from codes packed as B's
    are (each column's in ceil(blocks · bits / 8) bytes), or from one float a block, which must
    be a whole code."""
    if z.dtype == np.uint8:
        per_column = -(-blocks * bits // 8)
        if z.size != columns * per_column:
            raise Unsupported(f"zero_points holds {z.size} bytes; {columns} columns of {blocks} blocks of {bits}-bit "
                              f"codes pack into {columns * per_column}")
        packed = z.reshape(columns, per_column)
        at = np.arange(blocks) * bits
        return ((packed[:, at // 8] >> (at % 8).astype(np.uint8)) & ((1 << bits) - 1)).astype(np.uint8)
    codes = np.asarray(z, np.float64).reshape(-1)
    if codes.size != columns * blocks or not np.all((codes == np.round(codes)) & (codes >= 0) & (codes < 1 << bits)):
        raise Unsupported(f"float zero points that are not {columns * blocks} whole codes below {1 << bits}")
    return codes.astype(np.uint8).reshape(columns, blocks)
