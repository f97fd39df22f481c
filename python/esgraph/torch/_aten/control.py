"""Control flow PyTorch captures as higher-order ops: torch.cond as esgraph's if_."""
from ... import _C
from .registry import NeedsShape, converts, ops


@converts("higher_order.cond")
def _cond(call, pred, true_body, false_body, operands):
    """Both branches become if_'s bodies, each converted from its own graph over the operands;
    the condition is read when the graph runs."""
    from .._graph import convert_body  # the walker converts bodies as it converts graphs
    if not isinstance(pred, _C.Tensor):  # a SymBool: a condition on sizes
        raise NeedsShape(f"the condition {pred} is on symbolic sizes, which esgraph's if_ cannot read")
    pred = pred if pred.dtype == getattr(_C, "bool") else ops.not_equal(pred, ops.cast(_C.constant(0), pred.dtype))
    outs = ops.if_(ops.reshape(pred, []), lambda: convert_body(true_body, operands), lambda: convert_body(false_body, operands))
    return tuple(outs) if isinstance(outs, (list, tuple)) else (outs,)
