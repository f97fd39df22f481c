"""Weight-only quantization of constant matrices for `esgraph.ops.matmul_nbits` (ONNX Runtime's
MatMulNBits layout), in numpy:

    b, scales, zero_points = esgraph.quantization.quantize_blockwise(w, bits=4, block_size=32)
    y = ops.matmul_nbits(x, b, scales, zero_points=zero_points, bits=4, block_size=32)

Each column of w [K, N] is cut into blocks of `block_size` values along K; a block's codes are
round(w / scale) + zero_point, saturated to [0, 2^bits - 1], with its range [min(lo, 0),
max(hi, 0)] spread over the codes (asymmetric, the default: 0 stays exact) or [-m, m], m its
largest magnitude, around the code 2^(bits-1) (symmetric: no zero points to store).
"""
import numpy as np

__all__ = ["quantize_blockwise", "dequantize_blockwise", "pack_zero_points"]


def quantize_blockwise(w, bits=4, block_size=32, symmetric=False):
    """(b, scales, zero_points) of a float matrix w [K, N]: b u8 [N, blocks, block_size · bits / 8]
    (column j's codes packed along K, low bits first, zeros past K), scales f32 [N, blocks],
    zero_points u8 [N, blocks], or None when `symmetric`."""
    w = np.asarray(w)
    if w.ndim != 2 or not np.issubdtype(w.dtype, np.floating):
        raise ValueError(f"quantize_blockwise takes a float matrix [K, N], got {w.dtype} {list(w.shape)}")
    if bits not in (2, 4, 8):
        raise ValueError(f"bits must be 2, 4 or 8, got {bits}")
    if block_size < 16 or block_size & (block_size - 1):
        raise ValueError(f"block_size must be a power of two of at least 16, got {block_size}")
    if not np.all(np.isfinite(w)):
        raise ValueError("quantize_blockwise: w holds NaN or infinite values")
    k, n = w.shape
    blocks = -(-k // block_size)
    padded = np.zeros((n, blocks * block_size), np.float64)
    padded[:, :k] = w.T
    values = padded.reshape(n, blocks, block_size)
    top = (1 << bits) - 1
    if symmetric:
        # -m at code 0 and 0 at 2^(bits-1); +m saturates one step short of its code
        zero = float(1 << (bits - 1))
        scales = np.abs(values).max(axis=2) / zero
        zeros = np.full(scales.shape, zero)
    else:
        low = np.minimum(values.min(axis=2), 0.0)
        high = np.maximum(values.max(axis=2), 0.0)
        scales = (high - low) / top
        zeros = None
    scales = scales.astype(np.float32)
    safe = np.where(scales > 0, scales, 1.0).astype(np.float64)  # an all-zero block: any scale, codes at the zero point
    if zeros is None:
        zeros = np.clip(np.round(-low / safe), 0, top)
    codes = np.clip(np.round(values / safe[..., None]) + zeros[..., None], 0, top).astype(np.uint8)
    codes.reshape(n, -1)[:, k:] = 0  # the padding past K
    return _pack(codes, bits), scales, None if symmetric else zeros.astype(np.uint8)


def dequantize_blockwise(b, scales, zero_points, k, bits=4, block_size=32):
    """The f32 matrix [K, N] that matmul_nbits's operands stand for: (code - zero_point) · scale,
    each rounded once to f32."""
    codes = _unpack(np.asarray(b, np.uint8), bits)
    n, blocks = codes.shape[:2]
    zero = (np.full((n, blocks), 1 << (bits - 1)) if zero_points is None else np.asarray(zero_points)).astype(np.float32)
    w = (codes.astype(np.float32) - zero[..., None]) * np.asarray(scales, np.float32)[..., None]
    return np.ascontiguousarray(w.reshape(n, blocks * block_size)[:, :k].T)


def _pack(codes, bits):
    """Codes [N, blocks, block_size] packed along the block, low bits first."""
    per_byte = 8 // bits
    grouped = codes.reshape(codes.shape[0], codes.shape[1], -1, per_byte).astype(np.uint8)
    packed = np.zeros(grouped.shape[:3], np.uint8)
    for p in range(per_byte):
        packed |= grouped[..., p] << np.uint8(p * bits)
    return packed


def _unpack(packed, bits):
    per_byte = 8 // bits
    shifts = (np.arange(per_byte) * bits).astype(np.uint8)
    codes = (packed[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return codes.reshape(packed.shape[0], packed.shape[1], -1)


def pack_zero_points(zero_points, bits):
    """Zero points, one u8 code a block [N, blocks], packed as ONNX Runtime's MatMulNBits takes them:
    each column's in ceil(blocks · bits / 8) bytes, low bits first, [N, that]."""
    zero_points = np.asarray(zero_points, np.uint8)
    n, blocks = zero_points.shape
    packed = np.zeros((n, -(-blocks * bits // 8)), np.uint8)
    for b in range(blocks):
        packed[:, b * bits // 8] |= (zero_points[:, b] << (b * bits % 8)).astype(np.uint8)
    return packed

