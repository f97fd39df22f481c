"""torchvision's own ops (torch.ops.torchvision), registered by torchvision when it is imported."""
import numpy as np

from ... import _C
from .registry import converts, ops


@converts("torchvision.nms.default")
def _nms(call, boxes, scores, iou_threshold):
    """The kept boxes' indices by descending score: ONNX's NonMaxSuppression of one image and
    one class, unbounded in count."""
    keep = ops.non_max_suppression(ops.unsqueeze(boxes, [0]), ops.unsqueeze(scores, [0, 1]),
                                   _C.constant(np.array([2**31 - 1], np.int64)), iou_threshold=float(iou_threshold))
    return ops.squeeze(ops.slice(keep, [2], [3], axes=[1]), axes=[1])


@converts("torchvision.roi_align.default")
def _roi_align(call, x, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    """rois [K, 5]: each region's image index, then x1, y1, x2, y2. torchvision's adaptive
    sampling (-1) is ONNX's 0; `aligned` shifts by half a pixel as ONNX's half_pixel does."""
    index, corners = ops.split(rois, [1, 4], axis=1)
    return ops.roi_align(x, corners, ops.cast(ops.squeeze(index, axes=[1]), _C.i64), output_height=int(pooled_height),
                         output_width=int(pooled_width), sampling_ratio=max(int(sampling_ratio), 0),
                         spatial_scale=float(spatial_scale),
                         coordinate_transformation_mode="half_pixel" if aligned else "output_half_pixel")
