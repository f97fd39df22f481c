"""Recurrent layers unrolled over a static sequence, shared by the importers (ONNX LSTM/GRU/RNN
nodes, torch.nn.LSTM/GRU). Inputs are batch-first; every step's input projection is one
matrix product before the loop, so the loop holds only the recurrent products."""
from . import _C

ops = _C.ops


def scan(pre, h, c, cell, reverse=False):
    """Runs `cell(x_t, h, c) -> (h, c)` over axis 1 of `pre` ([N, T, G]); returns the outputs
    [N, T, H] and the final h and c."""
    n, steps, width = pre.shape
    outs = [None] * steps
    for t in (reversed(range(steps)) if reverse else range(steps)):
        x_t = ops.reshape(ops.slice(pre, [t], [t + 1], axes=[1]), [n, width])
        h, c = cell(x_t, h, c)
        outs[t] = ops.unsqueeze(h, [1])
    return ops.concat(outs, 1), h, c


def lstm_cell(w_hh, hidden, order, peephole=None):
    """LSTM with gates stacked in `order` (PyTorch: "ifgo"; ONNX: "iofg", g being the cell gate).
    `peephole` ({"i", "f", "o"}: [H] weights, ONNX's P) lets the gates see the cell state: i and
    f the previous one, o the new one."""
    def cell(x_t, h, c):
        gates = dict(zip(order, ops.split(x_t + ops.matmul(h, w_hh, transpose_b=True), [hidden] * 4, axis=1)))
        if peephole:
            gates["i"], gates["f"] = gates["i"] + peephole["i"] * c, gates["f"] + peephole["f"] * c
        c = ops.sigmoid(gates["f"]) * c + ops.sigmoid(gates["i"]) * ops.tanh(gates["g"])
        o = gates["o"] + peephole["o"] * c if peephole else gates["o"]
        return ops.sigmoid(o) * ops.tanh(c), c
    return cell


def gru_cell(w_hh, b_hn, hidden, order, linear_before_reset):
    """GRU with update (z), reset (r) and candidate (n) gates stacked in `order` (PyTorch: "rzn";
    ONNX: "zrn"). `x_t` holds the input projection with every bias except the candidate's
    recurrent one, `b_hn`, which the reset gate scales. Each step makes one recurrent product
    for the gates that read h alone (all three with `linear_before_reset`, PyTorch's form; z and
    r otherwise, the candidate's product reading r * h after them)."""
    w = dict(zip(order, ops.split(w_hh, [hidden] * 3, axis=0)))
    first = order if linear_before_reset else [g for g in order if g != "n"]
    w_first = w_hh if linear_before_reset else ops.concat([w[g] for g in first], 0)

    def cell(x_t, h, c):
        x = dict(zip(order, ops.split(x_t, [hidden] * 3, axis=1)))
        hw = dict(zip(first, ops.split(ops.matmul(h, w_first, transpose_b=True), [hidden] * len(first), axis=1)))
        z = ops.sigmoid(x["z"] + hw["z"])
        r = ops.sigmoid(x["r"] + hw["r"])
        if linear_before_reset:
            recurrent = hw["n"] if b_hn is None else hw["n"] + b_hn
            candidate = ops.tanh(x["n"] + r * recurrent)
        else:
            recurrent = ops.matmul(r * h, w["n"], transpose_b=True)
            candidate = ops.tanh(x["n"] + (recurrent if b_hn is None else recurrent + b_hn))
        return (1 - z) * candidate + z * h, c
    return cell


def rnn_cell(w_hh, activation):
    def cell(x_t, h, c):
        return activation(x_t + ops.matmul(h, w_hh, transpose_b=True)), c
    return cell
