"""Einsum (esgraph/_einsum.py): ONNX's equations use lower-case letters only."""
from ..._einsum import einsum as compute, parse
from .registry import Unsupported, check_attrs, converts


@converts("Einsum")
def einsum(n):
    check_attrs(n, ("equation",))
    equation = n.attr("equation")
    if any(c.isupper() for c in equation):
        raise Unsupported("upper-case letters in an einsum equation (ONNX allows lower case only)")
    try:
        terms, out = parse(equation, [n.rank(i) for i in range(n.num_inputs)])
    except ValueError as e:
        raise Unsupported(str(e)) from None
    return compute([n.x(i) for i in range(n.num_inputs)], terms, out)
