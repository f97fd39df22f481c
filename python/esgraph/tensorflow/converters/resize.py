"""TF's image resizing (esgraph/_resize.py) of an NHWC batch: a value in NCHW order is resized
as it lies. TF's three coordinate rules for each method are ONNX's: align_corners, half-pixel
centers (for nearest, TF's own rule), and neither (asymmetric, flooring)."""
from ..._resize import resize_axes
from .._layout import Nchw
from .registry import Unsupported, converts

# (align_corners, half_pixel_centers) -> (coordinate transformation, nearest rounding)
_NEAREST = {(True, False): ("align_corners", "round_prefer_ceil"), (False, True): ("tf_half_pixel_for_nn", "floor"),
            (False, False): ("asymmetric", "floor")}
_BILINEAR = {(True, False): "align_corners", (False, True): "half_pixel", (False, False): "asymmetric"}


@converts("ResizeBilinear", "ResizeNearestNeighbor")
def resize(n):
    corners, centers = bool(n.attr("align_corners", False)), bool(n.attr("half_pixel_centers", False))
    if corners and centers:
        raise Unsupported("align_corners and half_pixel_centers together (TF refuses them too)")
    if n.op == "ResizeBilinear":
        method, (coordinates, rounding) = "linear", (_BILINEAR[corners, centers], "floor")
    else:
        method, (coordinates, rounding) = "nearest", _NEAREST[corners, centers]
    height, width = n.ints(1, "size")
    nchw = n.is_nchw(0)
    x = n.nchw(0) if nchw else n.x(0)
    dims = list(x.shape)
    if any(not isinstance(d, int) for d in dims[1:]):
        raise Unsupported(f"resizing an image of symbolic sizes {dims}")
    h_axis, w_axis = (2, 3) if nchw else (1, 2)
    out = list(dims)
    out[h_axis], out[w_axis] = height, width
    scales = [1.0] * 4
    scales[h_axis], scales[w_axis] = height / dims[h_axis], width / dims[w_axis]
    try:
        y = resize_axes(x, [1] + dims[1:], [1] + out[1:], scales, method, coordinates, rounding)
    except ValueError as e:
        raise Unsupported(str(e)) from None
    return Nchw(y) if nchw else y
