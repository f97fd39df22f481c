"""The optimizers of ONNX's training domain (ai.onnx.preview.training): Adagrad, Momentum and
Adam, one update step of every tensor they are given, written over esgraph's ops with ONNX's
formulas. Inputs: the learning rate R and the step count T (scalars), then each group of
tensors in turn (all the Xs, then all their gradients, then each state); outputs: the new Xs,
then each new state."""
import numpy as np

from ... import _C
from .registry import Unsupported, check_attrs, converts

ops = _C.ops


def _groups(n, count):
    """The per-tensor inputs as `count` lists (X, G, and the states), each tensor's as the Xs'."""
    tensors = n.num_inputs - 2
    if tensors <= 0 or tensors % count:
        raise Unsupported(f"{n.num_inputs} inputs: {n.op_type} takes R, T and {count} inputs a tensor")
    k = tensors // count
    return [[n.x(2 + g * k + i) for i in range(k)] for g in range(count)]


def _scalar(value, like):
    return _C.constant(np.array(value, dtype=np.dtype(like.dtype.numpy)))


def _step(n, like):
    """R and T as scalars of the tensors' type, and whether T > 0 (the first step is T = 0)."""
    r, t = n.x(0), n.x(1)
    r = ops.cast(r, like.dtype) if r.dtype != like.dtype else r
    return ops.reshape(r, []), ops.reshape(ops.cast(t, like.dtype), []), ops.reshape(ops.greater(t, _C.constant(np.zeros((), np.dtype(t.dtype.numpy)))), [])


@converts("ai.onnx.preview.training.Adagrad")
def adagrad(n):
    check_attrs(n, ("decay_factor", "epsilon", "norm_coefficient"))
    xs, gs, hs = _groups(n, 3)
    r, t, _ = _step(n, xs[0])
    rate = r / (t * n.attr("decay_factor", 0.0) + 1.0)
    new_x, new_h = [], []
    for x, g, h in zip(xs, gs, hs):
        g = x * n.attr("norm_coefficient", 0.0) + g
        h = h + g * g
        new_x.append(x - rate * g / (ops.sqrt(h) + n.attr("epsilon", 1e-6)))
        new_h.append(h)
    return new_x + new_h


@converts("ai.onnx.preview.training.Momentum")
def momentum(n):
    check_attrs(n, ("alpha", "beta", "mode", "norm_coefficient"))
    mode = n.attr("mode")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("standard", "nesterov"):
        raise Unsupported(f"mode '{mode}' (ONNX defines standard and nesterov)")
    alpha, beta = n.attr("alpha"), n.attr("beta")
    xs, gs, vs = _groups(n, 3)
    r, _, started = _step(n, xs[0])
    beta = ops.where(started, _scalar(beta, xs[0]), _scalar(1.0, xs[0]))  # the first step takes the whole gradient
    new_x, new_v = [], []
    for x, g, v in zip(xs, gs, vs):
        g = x * n.attr("norm_coefficient") + g
        v = v * alpha + beta * g
        new_x.append(x - r * (v if mode == "standard" else g + v * alpha))
        new_v.append(v)
    return new_x + new_v


@converts("ai.onnx.preview.training.Adam")
def adam(n):
    check_attrs(n, ("alpha", "beta", "epsilon", "norm_coefficient", "norm_coefficient_post"))
    alpha, beta = n.attr("alpha", 0.9), n.attr("beta", 0.999)
    xs, gs, vs, hs = _groups(n, 4)
    r, t, started = _step(n, xs[0])
    one = _scalar(1.0, xs[0])
    # the bias corrections; at T = 0 the rate as given (the division there by 0 is not taken)
    corrected = r * ops.sqrt(one - ops.pow(_scalar(beta, xs[0]), t)) / (one - ops.pow(_scalar(alpha, xs[0]), t))
    rate = ops.where(started, corrected, r)
    new_x, new_v, new_h = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        g = x * n.attr("norm_coefficient", 0.0) + g
        v = v * alpha + g * (1 - alpha)
        h = h * beta + g * g * (1 - beta)
        new_x.append((x - rate * (v / (ops.sqrt(h) + n.attr("epsilon", 1e-6)))) * (1 - n.attr("norm_coefficient_post", 0.0)))
        new_v.append(v)
        new_h.append(h)
    return new_x + new_v + new_h
