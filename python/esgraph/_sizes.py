"""Shape arithmetic over symbolic sizes, while importing: what the frontends share.

Shape of a tensor with a symbolic dimension (`batch`) has no value at import; exporters then
compute shape operands from it: torch's `x.reshape(x.shape[0], -1)` is ONNX's Reshape(x,
Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])), and Keras's Flatten is TF's Reshape(x,
Pack([StridedSlice(Shape(x), 0), -1])). Such a value is held here as `Sizes`: an array whose
entries are integers or `Size`s, products of the graph's symbolic dimensions. Each frontend's
shape-arithmetic ops compute on them (onnx/converters/sizes.py, tensorflow/converters/sizes.py),
and the ops that take a shape operand resolve what they can into their static attributes: a size
equal to the input's own dimension at that place is Reshape's 0, the one size left unknown its
-1. What cannot be resolved raises NeedsShape.
"""
import sys

import numpy as np

from ._frontend import NeedsShape


class Size:
    """A symbolic size: `coef` times the product of `symbols` (the dimensions' names as the graph
    prints them, sorted), or, with symbols None, a size known only to be one (a sum, a quotient)."""

    __slots__ = ("coef", "symbols")

    def __init__(self, coef, symbols):
        self.coef, self.symbols = coef, symbols

    @classmethod
    def of(cls, dim):
        return cls(1, (dim,))

    def is_dim(self, dim):
        """Whether this is the dimension `dim` (an int or a symbol) exactly."""
        return self.symbols == (dim,) and self.coef == 1

    def same(self, other):
        return isinstance(other, Size) and self.symbols is not None and (self.coef, self.symbols) == (other.coef, other.symbols)

    def __repr__(self):
        if self.symbols is None:
            return "<a size>"
        return "*".join(([str(self.coef)] if self.coef != 1 else []) + list(self.symbols))


_UNKNOWN = Size(0, None)


def _scaled(size, k):
    if k == 0:
        return 0
    return _UNKNOWN if size.symbols is None else Size(size.coef * k, size.symbols)


def _mul(a, b):
    if not isinstance(a, Size) and not isinstance(b, Size):
        return a * b
    if not isinstance(a, Size):
        return _scaled(b, a)
    if not isinstance(b, Size):
        return _scaled(a, b)
    if a.symbols is None or b.symbols is None:
        return _UNKNOWN
    return Size(a.coef * b.coef, tuple(sorted(a.symbols + b.symbols)))


def _add(a, b, sign=1):
    if not isinstance(a, Size) and not isinstance(b, Size):
        return a + sign * b
    if not isinstance(b, Size) and b == 0:
        return a
    if sign == 1 and not isinstance(a, Size) and a == 0:
        return b
    if isinstance(a, Size) and a.symbols is not None and isinstance(b, Size) and a.symbols == b.symbols:
        coef = a.coef + sign * b.coef
        return 0 if coef == 0 else Size(coef, a.symbols) if coef > 0 else _UNKNOWN
    return _UNKNOWN


def _div(a, b):
    if not isinstance(b, Size) and b == 0:
        raise NeedsShape("a size divided by zero")
    if not isinstance(a, Size) and not isinstance(b, Size):
        return abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # ONNX's integer Div truncates
    if isinstance(a, Size) and not isinstance(b, Size) and a.symbols is not None and b > 0 and a.coef % b == 0:
        return Size(a.coef // b, a.symbols)
    if isinstance(a, Size) and a.same(b):
        return 1
    return _UNKNOWN


def _equal(a, b):
    if not isinstance(a, Size) and not isinstance(b, Size):
        return a == b
    if isinstance(a, Size) and a.same(b):
        return True
    size, other = (a, b) if isinstance(a, Size) else (b, a)
    if size.symbols is not None and size.coef > 0 and not isinstance(other, Size) and other < 0:
        return False  # a positive multiple of sizes is never negative (torch's exports compare with -1)
    raise NeedsShape(f"whether sizes {a} and {b} are equal is known only at run time")


ELEMENTWISE = {"Mul": np.frompyfunc(_mul, 2, 1), "Add": np.frompyfunc(_add, 2, 1),
                "Sub": np.frompyfunc(lambda a, b: _add(a, b, -1), 2, 1), "Div": np.frompyfunc(_div, 2, 1)}
EQUAL = np.frompyfunc(_equal, 2, 1)


class Sizes:
    """An integer tensor holding symbolic sizes: `values`, an object array of ints and Sizes,
    and the element type the model gives it. `shape_of`: the value whose shape these are
    exactly, when they are (Shape's result, unchanged), for ops that fill a tensor of that shape."""

    def __init__(self, values, dtype, shape_of=None):
        self.values, self.dtype, self.shape_of = values, np.dtype(dtype), shape_of

    @property
    def shape(self):
        return self.values.shape

    def __repr__(self):
        return f"Sizes({self.values.tolist()})"


def kept_dtype(node):
    """The element type of a node's Sizes input (a frontend's node: `value(i)`, `num_inputs`):
    what an op on sizes keeps in its result."""
    return next(node.value(i).dtype for i in range(node.num_inputs) if isinstance(node.value(i), Sizes))


def shape_of(dims, dtype=np.int64):
    """Shape's value for `dims` (ints and symbols)."""
    return made(np.array([d if isinstance(d, int) else Size.of(d) for d in dims], dtype=object), dtype)


def element_count(dims):
    """Size's value for `dims`: their product, a Size where a dimension is symbolic."""
    total = 1
    for d in dims:
        total = _mul(total, d if isinstance(d, int) else Size.of(d))
    return made(np.array(total, dtype=object), np.int64)


def made(values, dtype):
    """Sizes, or a plain array when every entry is known."""
    values = np.asarray(values, dtype=object)
    if all(not isinstance(v, Size) for v in values.flat):
        return values.astype(dtype)
    return Sizes(values, dtype)


def as_entries(value):
    """An input's entries as an object array (a known array's too)."""
    return value.values if isinstance(value, Sizes) else np.asarray(value).astype(object)


def entries(value):
    """A shape operand's entries as a list of ints and Sizes."""
    return [v if isinstance(v, Size) else int(v) for v in as_entries(value).reshape(-1)]


# Resolving a shape operand into an op's attribute

def reshape_dims(x_shape, sizes, allowzero):
    """Reshape's static `shape` for the entries `sizes` of input shape `x_shape`: a size that is
    the input's own dimension at the same place is 0 (copied), and one size left unknown is -1
    (the elements decide it)."""
    dims, unknown = [], []
    for i, s in enumerate(sizes):
        if not isinstance(s, Size):
            dims.append(s)
        elif not allowzero and i < len(x_shape) and s.is_dim(x_shape[i]):
            dims.append(0)
        else:
            dims.append(None)
            unknown.append(i)
    if len(unknown) == 1 and -1 not in dims and not (allowzero and 0 in dims):  # allowzero takes no -1 beside a 0
        dims[unknown[0]] = -1
    elif unknown:
        raise NeedsShape(f"Reshape to sizes {sizes} of a tensor of {list(x_shape)}: they are known only at run time")
    return dims


def slice_end(size, dim):
    """A Slice end that is a size: the input's own dimension there is its end."""
    if isinstance(size, Size):
        if not size.is_dim(dim):
            raise NeedsShape(f"Slice to {size} of an axis of {dim}: known only at run time")
        return sys.maxsize
    return size


def expand_size(size, dim):
    """An Expand size: one that is the input's own dimension there is 1 (kept)."""
    if isinstance(size, Size):
        if not size.is_dim(dim):
            raise NeedsShape(f"Expand to {size} where the input has {dim}: known only at run time")
        return 1
    return size
