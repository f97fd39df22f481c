"""Window generators, local response normalization and the Fourier transforms, written over
esgraph's elementwise ops, range, matmul and pooling."""
import math

import numpy as np

from ... import _C
from ..._compose import avg_pool_counting_padding
from .. import _dtypes
from .nn import _static
from .registry import Unsupported, check_attrs, converts, reserve

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


def _fourier(real, imag, length, inverse, onesided):
    """The DFT of the signal real + i·imag (imag None: real) along its last axis, `length` long,
    as products with constant cosine and sine matrices: X_k = sum_j x_j e^(-2 pi i k j / N),
    with 1/N and the opposite sign for `inverse`, the first N/2 + 1 terms for `onesided`. The
    real and imaginary parts, [.., terms] each."""
    terms = length // 2 + 1 if onesided else length
    reserve([length, terms], 3 * 8, "the Fourier matrices", kept=2 * 8)
    angle = 2 * np.pi * np.outer(np.arange(length), np.arange(terms)) / length
    dtype = _dtypes.numpy_dtype(real.dtype)
    cos, sin = np.cos(angle).astype(dtype), np.sin(angle).astype(dtype)
    sign = 1.0 if inverse else -1.0
    # (a + ib)(cos + i·sign·sin) summed over j: real a·cos - sign·b·sin, imaginary sign·a·sin + b·cos.
    out_real, out_imag = real @ cos, (real @ sin) * sign
    if imag is not None:
        out_real, out_imag = out_real - (imag @ sin) * sign, out_imag + imag @ cos
    if inverse:
        out_real, out_imag = out_real * (1.0 / length), out_imag * (1.0 / length)
    return out_real, out_imag


@converts("DFT")
def dft(n):
    """The discrete Fourier transform along `axis` (_fourier; the signal's length is static),
    the signal cut or zero-padded to `dft_length`."""
    check_attrs(n, ("axis", "inverse", "onesided"))
    x, rank = n.x(0), n.rank(0)
    dims = _static(x.shape, "DFT")
    # opset 20 takes the axis as an input, -2 (the last signal axis) by default
    axis = (n.ints(2, "axis")[0] if n.has(2) else -2) % rank if n.opset >= 20 else n.attr("axis", 1) % rank
    if axis == rank - 1:
        raise Unsupported("a DFT along the real/imaginary axis")
    inverse, onesided = bool(n.attr("inverse", 0)), bool(n.attr("onesided", 0))
    if inverse and onesided:
        raise Unsupported("an inverse one-sided DFT")
    length = int(np.asarray(n.const(1, "dft_length")).reshape(-1)[0]) if n.has(1) else dims[axis]
    # The signal as [.., length] along the last axis: moved there, then cut or zero-padded.
    perm = [d for d in range(rank - 1) if d != axis] + [axis]

    def signal(part):
        s = ops.transpose(ops.squeeze(part, axes=[rank - 1]), perm=perm)
        if length < dims[axis]:
            s = ops.slice(s, [0], [length], axes=[rank - 2])
        elif length > dims[axis]:
            s = ops.pad(s, [0] * (rank - 1) + [0] * (rank - 2) + [length - dims[axis]])
        return s

    imag = signal(ops.slice(x, [1], [2], axes=[rank - 1])) if dims[-1] == 2 else None
    parts = _fourier(signal(ops.slice(x, [0], [1], axes=[rank - 1])), imag, length, inverse, onesided)
    back = [perm.index(d) for d in range(rank - 1)]
    return ops.concat([ops.unsqueeze(ops.transpose(p, perm=back), axes=[rank - 1]) for p in parts], rank - 1)


@converts("STFT")
def stft(n):
    """Frames of the signal [batch, length, 1 or 2] every `frame_step`, `frame_length` (or the
    window's length) long, gathered by constant indices, times the window, each through
    _fourier: [batch, frames, terms, 2]."""
    check_attrs(n, ("onesided",))
    x = n.x(0)
    dims = _static(x.shape, "STFT")
    step = int(np.asarray(n.const(1, "frame_step")).reshape(-1)[0])
    if n.has(3):
        length = int(np.asarray(n.const(3, "frame_length")).reshape(-1)[0])
    elif n.has(2):
        length = _static(n.shape(2), "STFT's window")[0]
    else:
        raise Unsupported("STFT without a window or a frame_length")
    if step < 1 or length < 1 or length > dims[1]:
        raise Unsupported(f"frames of {length} every {step} over a signal of {dims[1]}")
    frames = 1 + (dims[1] - length) // step
    reserve([frames, length], 2 * 8, "STFT's frame indices", kept=8)
    at = (np.arange(frames)[:, None] * step + np.arange(length)[None, :]).astype(np.int64)

    def framed(part):
        f = ops.gather(ops.squeeze(part, axes=[2]), at, axis=1)  # [batch, frames, length]
        return f * n.x(2) if n.has(2) else f

    imag = framed(ops.slice(x, [1], [2], axes=[2])) if dims[2] == 2 else None
    parts = _fourier(framed(ops.slice(x, [0], [1], axes=[2])), imag, length, False, bool(n.attr("onesided", 1)))
    return ops.concat([ops.unsqueeze(p, axes=[3]) for p in parts], 3)


@converts("MelWeightMatrix")
def mel_weight_matrix(n):
    """The [dft_length / 2 + 1, num_mel_bins] matrix of triangular mel filters, computed once
    from its constant operands: band edges evenly spaced on the mel scale (2595 log10(1 + f /
    700)), each mapped to the spectrogram bin floor((dft_length + 1) f / sample_rate), each
    filter rising from its left edge to its centre and falling to its right edge."""
    check_attrs(n, ("output_datatype",))
    bins, length, rate = (int(np.asarray(n.const(i, what)).reshape(-1)[0])
                          for i, what in enumerate(("num_mel_bins", "dft_length", "sample_rate")))
    low, high = (float(np.asarray(n.const(i, what)).reshape(-1)[0]) for i, what in ((3, "lower_edge_hertz"), (4, "upper_edge_hertz")))
    to_mel = lambda hz: 2595 * np.log10(1 + hz / 700)  # noqa: E731
    edges_mel = to_mel(low) + np.arange(bins + 2) * (to_mel(high) - to_mel(low)) / (bins + 2)
    edges = (((length + 1) * (700 * (np.power(10, edges_mel / 2595) - 1))) // rate).astype(np.int64)
    reserve([length // 2 + 1, bins + 2], 8, "MelWeightMatrix's matrix", kept=8)
    out = np.zeros((length // 2 + 1, bins))
    for i in range(bins):
        left, centre, right = edges[i], edges[i + 1], edges[i + 2]
        if centre == left:
            out[centre, i] = 1
        else:
            out[left:centre + 1, i] = (np.arange(left, centre + 1) - left) / (centre - left)
        if right > centre:
            out[centre:right, i] = (right - np.arange(centre, right)) / (right - centre)
    dtype = _dtypes.esg_dtype(n.attr("output_datatype", 1))
    return ops.cast(_C.constant(out.astype(np.float64)), dtype)
