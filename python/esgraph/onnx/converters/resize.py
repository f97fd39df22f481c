"""Resize and Upsample, one matrix product per resized axis (esgraph/_resize.py). GridSample
and RoiAlign, whose positions are data, are esgraph's grid_sample and roi_align."""
import math

import numpy as np

from ... import _C
from .. import _dtypes
from ..._resize import resize_axes as _resize_axes
from .nn import _static
from .registry import Unsupported, check_attrs, converts


def resize_axes(x, *args, **kwargs):
    try:
        return _resize_axes(x, _static(x.shape, "Resize"), *args, **kwargs)
    except ValueError as e:
        raise Unsupported(str(e)) from None

ops = _C.ops


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
    # opset 20 names the modes by what they do in N dimensions: linear and cubic
    mode = n.attr("mode", "linear" if n.opset >= 20 else "bilinear")
    mode = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode) if n.opset >= 20 else mode
    padding = n.attr("padding_mode", "zeros")
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


@converts("AffineGrid")
def affine_grid(n):
    """theta [N, 2, 3] (or [N, 3, 4]) times the homogeneous positions of an evenly spaced grid
    over [-1, 1] in each of size's spatial axes (x the last): one product with a constant."""
    check_attrs(n, ("align_corners",))
    theta, size = n.x(0), n.ints(1, "size")
    spatial = size[2:]
    if len(spatial) not in (2, 3) or list(theta.shape[1:]) != [len(spatial), len(spatial) + 1]:
        raise Unsupported(f"theta {list(theta.shape)} for size {size}: [N, 2, 3] for 2-D, [N, 3, 4] for 3-D")
    align = bool(n.attr("align_corners", 0))
    axes = [np.linspace(-1, 1, d) if align else (np.arange(d) * 2 + 1) / d - 1 for d in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # [D,] H, W
    base = np.stack([m.reshape(-1) for m in reversed(mesh)] + [np.ones(mesh[0].size)], axis=1)  # x, y, [z], 1
    dtype = _dtypes.numpy_dtype(theta.dtype)
    grid = ops.matmul(n.tensor(base.astype(dtype)), ops.transpose(theta, perm=[0, 2, 1]))
    return ops.reshape(grid, [size[0]] + spatial + [len(spatial)])
