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


def pad_or_crop(x, pads, mode="constant", value=0.0):
    """ONNX-style pads (all begins, then all ends) where a negative amount crops: pad by the
    positive parts, then slice the negative ones away."""
    y = ops.pad(x, [max(p, 0) for p in pads], mode=mode, value=value) if any(p > 0 for p in pads) else x
    if any(p < 0 for p in pads):
        rank = x.ndim
        axes = [a for a in range(rank) if pads[a] < 0 or pads[rank + a] < 0]
        starts = [-min(pads[a], 0) for a in axes]
        ends = [min(pads[rank + a], 0) or 2**62 for a in axes]
        y = ops.slice(y, starts, ends, axes=axes)
    return y


def conv_transpose2d(x, w, bias, strides, dilations, groups, begins, ends, output_padding):
    """A transposed 2-D convolution (w: [C_in, C_out / groups, kH, kW]) as the direct one it
    equals: the input spread out by the strides (zeros between), padded by (kernel extent - 1
    - pad) on each side (output_padding added at the end), then convolved at stride 1 with the
    kernel flipped and its in/out channels swapped per group. Static shapes only."""
    batch, channels, h, wd = x.shape
    c_in, c_out_per_group, kh, kw = w.shape
    if any(not isinstance(d, int) for d in (batch, channels, h, wd, c_in, c_out_per_group, kh, kw)):
        raise ValueError("a transposed convolution needs static shapes")
    sh, sw = strides
    if (sh, sw) != (1, 1):
        spread = ops.pad(ops.reshape(x, [batch, channels, h, 1, wd, 1]), [0] * 6 + [0, 0, 0, sh - 1, 0, sw - 1])
        x = ops.slice(ops.reshape(spread, [batch, channels, h * sh, wd * sw]), [0, 0],
                      [(h - 1) * sh + 1, (wd - 1) * sw + 1], axes=[2, 3])
    extents = [(k - 1) * d + 1 for k, d in zip((kh, kw), dilations)]
    x = pad_or_crop(x, [0, 0] + [e - 1 - b for e, b in zip(extents, begins)] +
                    [0, 0] + [e - 1 - p + op for e, p, op in zip(extents, ends, output_padding)])
    flipped = ops.slice(w, [-1, -1], [-(2**62), -(2**62)], axes=[2, 3], steps=[-1, -1])
    per_group = ops.reshape(flipped, [groups, c_in // groups, c_out_per_group, kh, kw])
    swapped = ops.reshape(ops.transpose(per_group, perm=[0, 2, 1, 3, 4]), [groups * c_out_per_group, c_in // groups, kh, kw])
    return ops.conv2d(x, swapped, bias=bias, dilations=list(dilations), groups=groups)

