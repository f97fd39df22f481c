"""What detection heads end with: non-maximum suppression, top-k and the indices of a mask,
whose result sizes the data decides (docs/architecture.md, sizes the data decides)."""
from ... import _C
from .. import _tensors
from .registry import Unsupported, converts

ops = _C.ops


def _scalar(n, i, what):
    return n.const(i, what).reshape(-1)[0].item()


@converts("NonMaxSuppressionV3", "NonMaxSuppressionV4", "NonMaxSuppressionV5")
def non_max_suppression(n):
    """One class of boxes [n, 4] (y1, x1, y2, x2, any two opposite corners), as TF's: boxes above
    score_threshold in decreasing score, one kept unless its IoU with a kept box exceeds
    iou_threshold. V4 adds the count, V5 the kept scores and the count."""
    if n.attr("pad_to_max_output_size", False):
        raise Unsupported("pad_to_max_output_size (selected indices padded to max_output_size)")
    if n.op == "NonMaxSuppressionV5" and _scalar(n, 5, "soft_nms_sigma") != 0:
        raise Unsupported("Soft-NMS (soft_nms_sigma other than 0)")
    boxes, scores = n.x(0), n.x(1)
    selected = ops.non_max_suppression(
        ops.unsqueeze(boxes, [0]), ops.reshape(scores, [1, 1, -1]),
        max_boxes_per_class=int(_scalar(n, 2, "max_output_size")),
        iou_threshold=float(_scalar(n, 3, "iou_threshold")),
        score_threshold=float(_scalar(n, 4, "score_threshold")) if n.num_inputs > 4 else float("-inf"))
    indices = ops.squeeze(ops.slice(selected, [2], [3], axes=[1]), axes=[1])
    valid = ops.reduce_sum(ops.cast(ops.greater_equal(indices, 0), _C.i32), axes=[0])
    indices = ops.cast(indices, _C.i32)
    if n.op == "NonMaxSuppressionV3":
        return indices
    if n.op == "NonMaxSuppressionV4":
        return [indices, valid]
    return [indices, ops.gather(scores, indices, axis=0), valid]


@converts("TopKV2")
def top_k(n):
    (k,) = n.ints(1, "k")
    values, indices = ops.top_k(n.x(0), k=k, axis=-1, largest=True)
    to = _tensors.esg_dtype(n.attr("index_type", 3))
    return [values, ops.cast(indices, to)]


@converts("Where")
def where(n):
    """The indices of the true (non-zero) elements, one row each."""
    return ops.transpose(ops.nonzero(n.x(0)), perm=[1, 0])
