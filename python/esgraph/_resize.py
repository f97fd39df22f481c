"""Resizing, as the importers (ONNX's Resize and Upsample, TF's ResizeBilinear and
ResizeNearestNeighbor) compute it: one matrix product per resized axis. Along an axis every mode
(nearest, linear, cubic; every coordinate transformation ONNX names, TF's among them) is a fixed
linear map from the input positions to the output positions, computed here from the static
sizes."""
import math

import numpy as np

from . import _C
from ._folding import reserve

ops = _C.ops


def _source_position(x, scale, length_in, length_out, mode, roi=None, sized_out=None):
    """Where output position x samples the input, in input coordinates. `length_out` is
    scale * length_in, unrounded, as ONNX defines align_corners and pytorch_half_pixel;
    `sized_out` the output's length, a whole number."""
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":  # opset 19: half_pixel, the rounding of the size spread over both ends
        return length_in / 2 * (1 - sized_out / length_out) + (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if length_out > 1 else -0.5
    if mode == "align_corners":
        return 0.0 if length_out == 1 else x * (length_in - 1) / (length_out - 1)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_half_pixel_for_nn":
        return (x + 0.5) / scale
    if mode == "tf_crop_and_resize":
        start, end = roi
        if length_out > 1:
            return start * (length_in - 1) + x * (end - start) * (length_in - 1) / (length_out - 1)
        return 0.5 * (start + end) * (length_in - 1)
    raise ValueError(f"coordinate_transformation_mode={mode}")


def _taps(ratio, method, nearest_mode, cubic_a):
    """Weights of the neighbours left of (and including) floor(position) and right of it: two
    for nearest and linear, four for cubic. An integer position weighs fully on itself."""
    if method == "nearest":
        if ratio == 1.0:
            return [0.0, 1.0]
        up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5, "floor": False,
              "ceil": True}[nearest_mode]
        return [0.0, 1.0] if up else [1.0, 0.0]
    if method == "linear":
        return [1.0 - ratio, ratio]
    a, r, s = cubic_a, ratio, 1.0 - ratio
    return [((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
            ((a + 2) * r - (a + 3)) * r * r + 1,
            ((a + 2) * s - (a + 3)) * s * s + 1,
            ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a]


def interpolation_matrix(length_in, length_out, scale, method, coordinates, nearest_mode, cubic_a,
                         exclude_outside, roi=None):
    """([length_out, length_in], outside): row x holds the weights output x gives each input
    position; outside[x] says that x samples beyond the input (tf_crop_and_resize extrapolates
    there). Neighbours beyond the edges repeat the edge, or drop out (exclude_outside) with the
    rest renormalized."""
    reserve([length_out, length_in], 8, "the interpolation matrix", kept=8)
    w = np.zeros((length_out, length_in))
    outside = np.zeros(length_out, bool)
    for x in range(length_out):
        pos = _source_position(x, scale, length_in, scale * length_in, coordinates, roi, length_out)
        outside[x] = pos < 0 or pos > length_in - 1
        base = math.floor(pos)
        ratio = 1.0 if pos == base else pos - base
        taps = _taps(ratio, method, nearest_mode, cubic_a)
        # The len(taps) nearest positions, the lower one first on a tie: an integer position
        # is the right-hand one of the middle pair.
        first = base - len(taps) // 2 + (0 if ratio == 1.0 else 1)
        idx = [first + k for k in range(len(taps))]
        if exclude_outside:
            taps = [t if 0 <= i < length_in else 0.0 for t, i in zip(taps, idx)]
            total = sum(taps)
            taps = [t / total for t in taps]
        for t, i in zip(taps, idx):
            w[x, min(max(i, 0), length_in - 1)] += t
    return w, outside


def resize_axes(x, dims, out_dims, scales, method, coordinates, nearest_mode="round_prefer_floor", cubic_a=-0.75,
                exclude_outside=False, roi=None, extrapolation=0.0):
    """x (of static `dims`) resized to `out_dims`, axis by axis, the last first (as ONNX's
    reference nests them, which decides where tf_crop_and_resize's extrapolated values mix in).
    ValueError for what it cannot compute."""
    if x.dtype not in (_C.f16, _C.f32, _C.f64):
        raise ValueError(f"Resize of a {x.dtype.name} tensor (f16, f32 and f64 only)")
    dtype = np.dtype(x.dtype.numpy)
    rank = len(dims)
    y = x
    for axis in reversed(range(rank)):
        n_in, n_out, scale = dims[axis], out_dims[axis], scales[axis]
        crop = None if roi is None else (roi[axis], roi[rank + axis])
        if n_in == n_out and scale == 1.0 and (crop is None or crop == (0.0, 1.0)):
            continue
        w, outside = interpolation_matrix(n_in, n_out, scale, method, coordinates, nearest_mode, cubic_a,
                                          exclude_outside, crop)
        perm = [d for d in range(rank) if d != axis] + [axis]
        moved = ops.transpose(y, perm=perm) if axis != rank - 1 else y
        moved = ops.matmul(moved, w.T.astype(dtype))
        if coordinates == "tf_crop_and_resize" and outside.any():
            moved = ops.where(outside, extrapolation, moved)
        y = ops.transpose(moved, perm=list(np.argsort(perm))) if axis != rank - 1 else moved
    return y
