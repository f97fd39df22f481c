"""A detection-style model defined here (Keras ships none): a small convolutional backbone, box
and score heads, the top 64 candidates by score, non-maximum suppression (TF's V3 and V5 ops),
and the kept boxes gathered; against TensorFlow, the detections compared as sets of boxes."""
import numpy as np
import pytest

from tf_models import Frozen, rand, run, spec, tf


def _detector(version):
    w1, w2 = rand(3, 3, 3, 8, seed=1) * 0.3, rand(3, 3, 8, 16, seed=2) * 0.3
    wb, ws = rand(16, 4, seed=3), rand(16, 1, seed=4)

    def detect(image):
        y = tf.nn.relu(tf.nn.conv2d(image, w1, 2, "SAME"))
        y = tf.nn.relu(tf.nn.conv2d(y, w2, 2, "SAME"))
        features = tf.reshape(y, [-1, 16])                       # one candidate per cell
        centers = tf.sigmoid(tf.matmul(features, wb))
        boxes = tf.concat([centers[:, :2] - 0.1, centers[:, :2] + 0.1 + centers[:, 2:] * 0.1], axis=1)
        scores = tf.sigmoid(tf.squeeze(tf.matmul(features, ws), axis=1))
        scores, order = tf.math.top_k(scores, k=64)
        boxes = tf.gather(boxes, order)
        if version == 3:
            keep = tf.image.non_max_suppression(boxes, scores, 10, iou_threshold=0.3, score_threshold=0.2)
            kept = tf.gather(scores, keep)
        else:
            keep, kept = tf.image.non_max_suppression_with_scores(boxes, scores, 10, iou_threshold=0.3, score_threshold=0.2)
        return tf.gather(boxes, keep), kept, tf.where(scores > 0.5)
    return detect


@pytest.mark.parametrize("version", [3, 5])
def test_detections_match_tensorflow_as_sets(version):
    frozen = Frozen(_detector(version), spec(1, 32, 32, 3))
    ops = {n.op for n in frozen.graph_def.node}
    assert f"NonMaxSuppressionV{version}" in ops and "TopKV2" in ops and "Where" in ops, ops
    image = rand(1, 32, 32, 3)
    got_boxes, got_scores, got_where = run(frozen, image)
    want_boxes, want_scores, want_where = frozen.reference(image)
    assert len(want_boxes) > 1
    assert got_boxes.shape == want_boxes.shape and got_where.dtype == want_where.dtype
    # each TF box has an esgraph box at IoU >= 0.99 with the same score
    for box, score in zip(want_boxes, want_scores):
        ious = [_iou(box, g) for g in got_boxes]
        k = int(np.argmax(ious))
        assert ious[k] >= 0.99 and abs(got_scores[k] - score) <= 1e-5
    np.testing.assert_array_equal(got_where, want_where)


def _iou(a, b):
    y1, x1 = max(min(a[0], a[2]), min(b[0], b[2])), max(min(a[1], a[3]), min(b[1], b[3]))
    y2, x2 = min(max(a[0], a[2]), max(b[0], b[2])), min(max(a[1], a[3]), max(b[1], b[3]))
    inter = max(y2 - y1, 0) * max(x2 - x1, 0)
    area = lambda r: abs(r[2] - r[0]) * abs(r[3] - r[1])  # noqa: E731
    return inter / (area(a) + area(b) - inter)
