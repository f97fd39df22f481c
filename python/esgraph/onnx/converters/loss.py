"""The losses ONNX defines as ops (a training graph's last nodes, exported for evaluation too):
NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, written over esgraph's ops as ONNX's own
function bodies define them."""
import numpy as np

from ... import _C
from ..._compose import gather_elements
from .registry import Unsupported, check_attrs, converts

ops = _C.ops

_REDUCTIONS = ("none", "sum", "mean")


def _attrs(n):
    check_attrs(n, ("reduction", "ignore_index"))
    reduction = n.attr("reduction", "mean")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    if reduction not in _REDUCTIONS:
        raise Unsupported(f"reduction '{reduction}' (ONNX defines {', '.join(_REDUCTIONS)})")
    return reduction, n.attr("ignore_index")


def _negative_log_likelihood(log_prob, target, weight, reduction, ignore_index):
    """-log_prob[n][target[n, d...]][d...], weighted by weight[target] (1 without weights); a
    target equal to ignore_index adds nothing, to the sum or to the mean's denominator (the sum
    of the weights taken)."""
    if log_prob.ndim < 2 or target.ndim != log_prob.ndim - 1:
        raise Unsupported(f"input of rank {log_prob.ndim} and target of rank {target.ndim}: ONNX takes [N, C, d...] and [N, d...]")
    kept, index_type = None, np.dtype(target.dtype.numpy)
    if ignore_index is not None and np.iinfo(index_type).min <= ignore_index <= np.iinfo(index_type).max:
        kept = ops.not_equal(target, _C.constant(np.array(ignore_index, index_type)))
        # an ignored target may lie outside [0, C): it reads class 0, and its weight is 0
        target = ops.where(kept, target, _C.constant(np.zeros((), index_type)))
    picked = ops.squeeze(gather_elements(log_prob, ops.unsqueeze(target, axes=[1]), 1), axes=[1])
    weights = ops.gather(weight, target) if weight is not None else None
    if kept is not None:
        kept = ops.cast(kept, log_prob.dtype)
        weights = kept if weights is None else ops.mul(weights, kept)
    loss = ops.neg(picked) if weights is None else ops.neg(ops.mul(picked, weights))
    axes = list(range(loss.ndim))
    if reduction == "none":
        return loss
    if reduction == "sum" or not axes:
        return ops.reduce_sum(loss, axes=axes, keepdims=False) if axes else loss
    if weights is None:
        return ops.reduce_mean(loss, axes=axes, keepdims=False)
    return ops.div(ops.reduce_sum(loss, axes=axes, keepdims=False), ops.reduce_sum(weights, axes=axes, keepdims=False))


@converts("NegativeLogLikelihoodLoss")
def negative_log_likelihood_loss(n):
    reduction, ignore_index = _attrs(n)
    return _negative_log_likelihood(n.x(0), n.x(1), n.x(2) if n.has(2) else None, reduction, ignore_index)


@converts("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss(n):
    reduction, ignore_index = _attrs(n)
    log_prob = ops.log_softmax(n.x(0), axis=1)
    loss = _negative_log_likelihood(log_prob, n.x(1), n.x(2) if n.has(2) else None, reduction, ignore_index)
    return [loss, log_prob] if n.num_outputs > 1 else loss
