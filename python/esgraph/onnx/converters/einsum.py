"""Einsum: each operand's axes laid out in one common order (output letters, then the summed
ones), multiplied with broadcasting, and the summed letters reduced. An ellipsis stands for
the operand's remaining leading axes (static ranks); a letter repeated within one operand takes
the diagonal, as a product with an identity mask summed over the repeated axis."""
import numpy as np

from ... import _C
from .registry import Unsupported, check_attrs, converts, reserve

ops = _C.ops
_ELLIPSIS_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"  # equations use lower case; these stand for "..."


def parse(equation, ranks):
    """(the operands' letter strings, the output's), with every ellipsis written out."""
    equation = equation.replace(" ", "")
    if any(c.isupper() for c in equation):
        raise Unsupported("upper-case letters in an einsum equation (ONNX allows lower case only)")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise Unsupported(f"the equation names {len(terms)} operands, the node has {len(ranks)}")
    widest = 0
    for i, (t, rank) in enumerate(zip(terms, ranks)):
        if "..." in t:
            width = rank - (len(t) - 3)
            widest = max(widest, width)
            terms[i] = t.replace("...", _ELLIPSIS_LETTERS[26 - width:] if width else "")
    ellipsis = _ELLIPSIS_LETTERS[26 - widest:] if widest else ""
    if arrow:
        rhs = rhs.replace("...", ellipsis)
    else:  # implicit output: the ellipsis, then the letters used once, in alphabetical order
        letters = "".join(terms)
        rhs = ellipsis + "".join(sorted(c for c in set(letters) if c.islower() and letters.count(c) == 1))
    return terms, rhs


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


@converts("Einsum")
def einsum(n):
    check_attrs(n, ("equation",))
    terms, out = parse(n.attr("equation"), [n.rank(i) for i in range(n.num_inputs)])
    summed = sorted(set("".join(terms)) - set(out))
    order = list(out) + summed
    product = None
    for i, term in enumerate(terms):
        x, term = _diagonals(n.x(i), term)
        present = [c for c in order if c in term]
        if list(term) != present:
            x = ops.transpose(x, perm=[term.index(c) for c in present])
        # Ellipsis axes align from the right, as numpy broadcasts them; other letters by name.
        missing = [k for k, c in enumerate(order) if c not in term]
        if missing:
            x = ops.unsqueeze(x, missing)
        product = x if product is None else product * x
    if summed:
        product = ops.reduce_sum(product, axes=list(range(len(out), len(order))))
    return product
