"""LSTM, GRU and RNN nodes, unrolled over their static sequence (esgraph/_recurrent.py)."""
import numpy as np

from ... import _C
from ..._recurrent import gru_cell, lstm_cell, rnn_cell, scan
from .registry import Unsupported, check_attrs, converts

ops = _C.ops
_DEFAULT_ACTIVATIONS = {"LSTM": ["sigmoid", "tanh", "tanh"], "GRU": ["sigmoid", "tanh"], "RNN": ["tanh"]}
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _direction_slice(t, d, axis=0):
    return ops.squeeze(ops.slice(t, [d], [d + 1], axes=[axis]), axes=[axis])


@converts("LSTM", "GRU", "RNN")
def recurrent(n):
    check_attrs(n, ("activations", "activation_alpha", "activation_beta", "clip", "direction", "hidden_size",
                    "input_forget", "layout", "linear_before_reset"))
    kind, hidden = n.op_type, n.attr("hidden_size")
    dirs = 2 if n.attr("direction", "forward") == "bidirectional" else 1
    activations = [a.lower() for a in n.attr("activations", [])]
    if kind == "RNN" and activations in (["relu"] * dirs, ["sigmoid"] * dirs):
        activation = ops.relu if activations[0] == "relu" else ops.sigmoid
    elif activations and activations != _DEFAULT_ACTIVATIONS[kind] * dirs:
        raise Unsupported(f"activations {n.attr('activations')}")
    else:
        activation = ops.tanh
    if n.attr("clip") is not None or n.attr("input_forget", 0):
        raise Unsupported("clip and input_forget are not supported")
    layout = n.attr("layout", 0)
    x = n.x(0) if layout else ops.transpose(n.x(0), perm=[1, 0, 2])  # batch-first [N, T, I]
    batch, steps = x.shape[0], x.shape[1]
    if n.has(4) and not (np.asarray(n.const(4, "sequence_lens")) == steps).all():
        raise Unsupported("sequence_lens shorter than the sequence are not supported")
    gates = _GATES[kind] * hidden
    outs, finals_h, finals_c = [], [], []
    for d in range(dirs):
        w, r = _direction_slice(n.x(1), d), _direction_slice(n.x(2), d)
        bias = b_hn = None
        if n.has(3):
            b = _direction_slice(n.x(3), d)
            w_b, r_b = ops.slice(b, [0], [gates]), ops.slice(b, [gates], [2 * gates])
            if kind == "GRU":  # the candidate's recurrent bias is applied inside the reset gate
                b_hn = ops.slice(r_b, [2 * hidden], [3 * hidden])
                r_b = ops.concat([ops.slice(r_b, [0], [2 * hidden]), ops.fill([hidden], dtype=x.dtype)], 0)
            bias = w_b + r_b
        h0 = _direction_slice(n.x(5), d, layout) if n.has(5) else ops.fill([batch, hidden], dtype=x.dtype)
        c0 = _direction_slice(n.x(6), d, layout) if kind == "LSTM" and n.has(6) else ops.fill([batch, hidden], dtype=x.dtype)
        if kind == "LSTM":
            peephole = None
            if n.has(7):  # P: [dirs, 3H], the i, o, f gates' weights on the cell state
                p_i, p_o, p_f = ops.split(_direction_slice(n.x(7), d), [hidden] * 3)
                peephole = {"i": p_i, "o": p_o, "f": p_f}
            cell = lstm_cell(r, hidden, "iofg", peephole)
        elif kind == "GRU":
            cell = gru_cell(r, b_hn, hidden, "zrn", n.attr("linear_before_reset", 0))
        else:
            cell = rnn_cell(r, activation)
        pre = ops.matmul(x, w, transpose_b=True)
        reverse = n.attr("direction", "forward") == "reverse" or d == 1
        y, h, c = scan(pre if bias is None else pre + bias, h0, c0, cell, reverse)
        outs.append(ops.unsqueeze(y, [2]))
        finals_h.append(ops.unsqueeze(h, [0]))
        finals_c.append(ops.unsqueeze(c, [0]))
    y = ops.concat(outs, 2)  # [N, T, dirs, H]
    y_h, y_c = ops.concat(finals_h, 0), ops.concat(finals_c, 0)  # [dirs, N, H]
    if layout == 0:
        y = ops.transpose(y, perm=[1, 2, 0, 3])
    else:
        y_h, y_c = (ops.transpose(t, perm=[1, 0, 2]) for t in (y_h, y_c))
    return [y, y_h, y_c][:n.num_outputs]
