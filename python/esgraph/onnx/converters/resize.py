"""Resize and Upsample, lowered to one matrix product per resized axis: along an axis every ONNX
mode (nearest, linear, cubic; every coordinate transformation) is a fixed linear map from the
input positions to the output positions, computed here from the static sizes. GridSample and
RoiAlign, whose positions are data, are esgraph's grid_sample and roi_align."""
import math

import numpy as np

from ... import _C
from .. import _dtypes
from .nn import _static
from .registry import Unsupported, check_attrs, converts, reserve

ops = _C.ops


def _source_position(x, scale, length_in, length_out, mode, roi=None):
    """Where output position x samples the input, in input coordinates. `length_out` is
    scale * length_in, unrounded, as ONNX defines align_corners and pytorch_half_pixel."""
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
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
    raise Unsupported(f"coordinate_transformation_mode={mode}")


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
        pos = _source_position(x, scale, length_in, scale * length_in, coordinates, roi)
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


def resize_axes(x, out_dims, scales, method, coordinates, nearest_mode="round_prefer_floor", cubic_a=-0.75,
                exclude_outside=False, roi=None, extrapolation=0.0):
    """Axis by axis, the last first (as ONNX's reference nests them, which decides where
    tf_crop_and_resize's extrapolated values mix in)."""
    dims = _static(x.shape, "Resize")
    dtype = _dtypes.numpy_dtype(x.dtype)
    if dtype.kind != "f":
        raise Unsupported("Resize of a non-float tensor")
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


@converts("Resize")
def resize(n):
    check_attrs(n, ("coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside", "extrapolation_value",
                    "mode", "nearest_mode"))
    x = n.x(0)
    dims = _static(x.shape, "Resize")
    if n.opset < 11:  # Resize-10: (X, scales), asymmetric coordinates
        scales = [float(s) for s in np.asarray(n.const(1, "scales")).reshape(-1)]
        coordinates = "asymmetric"
    else:
        coordinates = n.attr("coordinate_transformation_mode", "half_pixel")
        scales = [float(s) for s in np.asarray(n.const(2, "scales")).reshape(-1)] if n.has(2) and \
            np.asarray(n.const(2, "scales")).size else None
    if n.has(3) and n.opset >= 11:
        sizes = n.ints(3, "sizes")
        scales = [o / i for o, i in zip(sizes, dims)]
    elif scales is not None:
        sizes = [int(math.floor(d * s)) for d, s in zip(dims, scales)]
    else:
        raise Unsupported("Resize needs scales or sizes")
    method = n.attr("mode", "nearest")
    roi = None
    if coordinates == "tf_crop_and_resize":
        roi = [float(v) for v in np.asarray(n.const(1, "roi")).reshape(-1)]
    return resize_axes(x, sizes, scales, method, coordinates, n.attr("nearest_mode", "round_prefer_floor"),
                       n.attr("cubic_coeff_a", -0.75), bool(n.attr("exclude_outside", 0)), roi,
                       n.attr("extrapolation_value", 0.0))


@converts("Upsample")
def upsample(n):
    x = n.x(0)
    dims = _static(x.shape, "Upsample")
    scales = list(n.attr("scales")) if "scales" in n.attrs else \
        [float(s) for s in np.asarray(n.const(1, "scales")).reshape(-1)]
    sizes = [int(math.floor(d * s)) for d, s in zip(dims, scales)]
    method = n.attr("mode", "nearest")
    return resize_axes(x, sizes, scales, "linear" if method in ("linear", "bilinear") else "nearest",
                       "asymmetric", "floor")


_GRID_MODES = ("bilinear", "nearest", "bicubic")


@converts("GridSample")
def grid_sample(n):
    check_attrs(n, ("align_corners", "mode", "padding_mode"))
    mode, padding = n.attr("mode", "bilinear"), n.attr("padding_mode", "zeros")
    if mode not in _GRID_MODES:
        raise Unsupported(f"mode '{mode}'")
    if padding not in ("zeros", "border", "reflection"):
        raise Unsupported(f"padding_mode '{padding}'")
    if n.rank(0) != 4:
        raise Unsupported(f"a {n.rank(0)}-D input (2-D images [N, C, H, W] only)")
    return ops.grid_sample(n.x(0), n.x(1), mode=mode, padding_mode=padding,
                           align_corners=bool(n.attr("align_corners", 0)))


@converts("RoiAlign")
def roi_align(n):
    check_attrs(n, ("coordinate_transformation_mode", "mode", "output_height", "output_width", "sampling_ratio",
                    "spatial_scale"))
    transformation = n.attr("coordinate_transformation_mode", "half_pixel" if n.opset >= 16 else "output_half_pixel")
    return ops.roi_align(n.x(0), n.x(1), ops.cast(n.x(2), _C.i64), mode=n.attr("mode", "avg"),
                         output_height=n.attr("output_height", 1), output_width=n.attr("output_width", 1),
                         sampling_ratio=n.attr("sampling_ratio", 0), spatial_scale=float(n.attr("spatial_scale", 1.0)),
                         coordinate_transformation_mode=transformation)
