"""Einsum: each operand's axes laid out in one common order (output letters, then the summed
ones), multiplied with broadcasting, and the summed letters reduced; a two-operand product with
one shared summed letter block becomes a batched matmul through the compiler's own folding of
transposes."""
from ... import _C
from .registry import Unsupported, check_attrs, converts

ops = _C.ops


def parse(equation, count):
    equation = equation.replace(" ", "")
    if "." in equation:
        raise Unsupported("ellipsis (...) in einsum equations")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != count:
        raise Unsupported(f"the equation names {len(terms)} operands, the node has {count}")
    for t in terms:
        if len(set(t)) != len(t):
            raise Unsupported(f"a repeated letter within one operand ('{t}': a diagonal)")
    if not arrow:  # implicit output: the letters used once, in alphabetical order
        letters = "".join(terms)
        rhs = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return terms, rhs


@converts("Einsum")
def einsum(n):
    check_attrs(n, ("equation",))
    terms, out = parse(n.attr("equation"), n.num_inputs)
    summed = sorted(set("".join(terms)) - set(out))
    order = list(out) + summed
    product = None
    for i, term in enumerate(terms):
        x = n.x(i)
        present = [c for c in order if c in term]
        if list(term) != present:
            x = ops.transpose(x, perm=[term.index(c) for c in present])
        missing = [k for k, c in enumerate(order) if c not in term]
        if missing:
            x = ops.unsqueeze(x, missing)
        product = x if product is None else product * x
    if summed:
        product = ops.reduce_sum(product, axes=list(range(len(out), len(order))))
    return product
