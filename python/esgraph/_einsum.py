"""Einsum, as the importers (ONNX's Einsum, TF's Einsum) compute it.

Two operands without repeated letters are one matrix product: the letters both keep are its
batch axes, the ones both sum its inner axis, each operand's own ones its rows and columns
(each operand's letters that neither the other nor the output has are summed first). The rest
(one or three operands, diagonals) multiply each operand's axes laid out in one common order
with broadcasting, and reduce the summed letters. An ellipsis stands for the operand's remaining
leading axes (static ranks)."""
import math

import numpy as np

from . import _C
from ._folding import reserve

ops = _C.ops
_ELLIPSIS_LETTERS = "αβγδεζηθικλμνξοπρστυφχψω"  # stand for "...": no equation's own letters


def parse(equation, ranks):
    """(the operands' letter strings, the output's), with every ellipsis written out. ValueError
    for an equation that does not fit the operands."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"the equation names {len(terms)} operands, the node has {len(ranks)}")
    widest = 0
    for i, (t, rank) in enumerate(zip(terms, ranks)):
        if "..." in t:
            width = rank - (len(t) - 3)
            widest = max(widest, width)
            terms[i] = t.replace("...", _ELLIPSIS_LETTERS[len(_ELLIPSIS_LETTERS) - width:] if width else "")
        if len(terms[i]) != rank:
            raise ValueError(f"operand {i} has rank {rank}, its term '{t}' {len(terms[i])} letters")
    ellipsis = _ELLIPSIS_LETTERS[len(_ELLIPSIS_LETTERS) - widest:] if widest else ""
    if arrow:
        rhs = rhs.replace("...", ellipsis)
    else:  # implicit output: the ellipsis, then the letters used once, in alphabetical order
        letters = "".join(terms)
        rhs = ellipsis + "".join(sorted(c for c in set(letters) if c.isalpha() and c not in ellipsis and letters.count(c) == 1))
    return terms, rhs


def einsum(xs, terms, out):
    """The einsum of tensors `xs` with letter strings `terms` into `out`."""
    if len(xs) == 2 and all(len(set(t)) == len(t) for t in terms):
        y = _as_product(xs[0], terms[0], xs[1], terms[1], out)
        if y is not None:
            return y
    return _broadcast_product(xs, terms, out)


def _summed_alone(x, term, keep):
    """x with its letters not in `keep` summed away."""
    gone = [k for k, c in enumerate(term) if c not in keep]
    if not gone:
        return x, term
    return ops.reduce_sum(x, axes=gone), "".join(c for c in term if c in keep)


def _static(x, term, letters):
    sizes = [x.shape[term.index(c)] for c in letters]
    return sizes if all(isinstance(s, int) for s in sizes) else None


def _as_product(a, ta, b, tb, out):
    """One matmul, or None where merged axes would need sizes that are symbolic."""
    a, ta = _summed_alone(a, ta, set(tb) | set(out))
    b, tb = _summed_alone(b, tb, set(ta) | set(out))
    batch = [c for c in out if c in ta and c in tb]
    inner = [c for c in ta if c in tb and c not in out]
    rows = [c for c in ta if c not in tb]
    cols = [c for c in tb if c not in ta]
    inner_sizes, col_sizes = _static(a, ta, inner), _static(b, tb, cols)
    if (len(inner) > 1 and inner_sizes is None) or (len(cols) > 1 and col_sizes is None):
        return None
    nb, nr = len(batch), len(rows)
    a = _transposed(a, ta, batch + rows + inner)
    b = _transposed(b, tb, batch + inner + cols)
    # a: [batch, rows, one inner axis]; b: [batch, one inner axis, one column axis]. The columns
    # first (a 0 copies the axis at its own place: batch and inner ones stay where they are).
    if not cols:
        b = ops.unsqueeze(b, [b.ndim])
    elif len(cols) > 1:
        b = ops.reshape(b, [0] * (nb + len(inner)) + [-1])
    if not inner:
        a, b = ops.unsqueeze(a, [nb + nr]), ops.unsqueeze(b, [nb])
    elif len(inner) > 1:
        a = ops.reshape(a, [0] * (nb + nr) + [-1])
        b = ops.reshape(b, [0] * nb + [math.prod(inner_sizes), -1])
    if not rows:
        a = ops.unsqueeze(a, [nb])
    elif nr > 1:  # the rows beyond the last broadcast against unit axes of b
        b = ops.unsqueeze(b, list(range(nb, nb + nr - 1)))
    y = ops.matmul(a, b)  # [batch, rows (or 1), columns merged (or 1)]
    if not cols:
        y = ops.squeeze(y, axes=[y.ndim - 1])
    elif len(cols) > 1:
        y = ops.reshape(y, [0] * (nb + max(nr, 1)) + col_sizes)
    if not rows:
        y = ops.squeeze(y, axes=[nb])
    return _transposed(y, "".join(batch + rows + cols), list(out))


def _transposed(x, term, order):
    return x if list(term) == list(order) else ops.transpose(x, perm=[term.index(c) for c in order])


def _diagonals(x, term):
    """x with each letter repeated in `term` reduced to its diagonal: (tensor, letters)."""
    while len(set(term)) != len(term):
        c = next(c for c in term if term.count(c) > 1)
        first, second = term.index(c), term.index(c, term.index(c) + 1)
        size = x.shape[first]
        reserve([size, size], 1, "Einsum's diagonal mask", kept=1)
        mask = np.eye(size, dtype=bool).reshape([size if d in (first, second) else 1 for d in range(x.ndim)])
        x = ops.reduce_sum(ops.where(mask, x, 0), axes=[second])
        term = term[:second] + term[second + 1:]
    return x, term


def _broadcast_product(xs, terms, out):
    summed = sorted(set("".join(terms)) - set(out))
    order = list(out) + summed
    product = None
    for x, term in zip(xs, terms):
        x, term = _diagonals(x, term)
        present = [c for c in order if c in term]
        x = _transposed(x, term, present)
        # Ellipsis axes align from the right, as numpy broadcasts them; other letters by name.
        missing = [k for k, c in enumerate(order) if c not in term]
        if missing:
            x = ops.unsqueeze(x, missing)
        product = x if product is None else product * x
    if summed:
        product = ops.reduce_sum(product, axes=list(range(len(out), len(order))))
    return product
