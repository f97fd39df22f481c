"""Shape arithmetic over symbolic sizes, while importing.

Shape of a tensor with a symbolic dimension (`batch`) has no value at import; exporters then
compute shape operands from it: torch's `x.reshape(x.shape[0], -1)` is Reshape(x,
Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])). Such a value is held here as `Sizes`: an array
whose entries are integers or `Size`s, products of the graph's symbolic dimensions. The ops
shape arithmetic uses compute on them (`SIZES_CONVERTERS`), and the ops that take a shape
operand resolve what they can into their static attributes: a size equal to the input's own
dimension at that place is Reshape's 0, the one size left unknown its -1. What cannot be
resolved raises NeedsShape, and the graph waits for each run's input shapes, as before: one
graph per set of shapes (ValueDependentGraph) where this makes one symbolic graph for all.
"""
import sys

import numpy as np

from ... import _C
from .. import _dtypes
from .registry import NeedsShape, converts


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


_ELEMENTWISE = {"Mul": np.frompyfunc(_mul, 2, 1), "Add": np.frompyfunc(_add, 2, 1),
                "Sub": np.frompyfunc(lambda a, b: _add(a, b, -1), 2, 1), "Div": np.frompyfunc(_div, 2, 1)}
_EQUAL = np.frompyfunc(_equal, 2, 1)


class Sizes:
    """An integer tensor holding symbolic sizes: `values`, an object array of ints and Sizes,
    and the element type the model gives it."""

    def __init__(self, values, dtype):
        self.values, self.dtype = values, np.dtype(dtype)

    @property
    def shape(self):
        return self.values.shape

    def __repr__(self):
        return f"Sizes({self.values.tolist()})"


def shape_of(dims, dtype=np.int64):
    """Shape's value for `dims` (ints and symbols)."""
    return _made(np.array([d if isinstance(d, int) else Size.of(d) for d in dims], dtype=object), dtype)


def element_count(dims):
    """Size's value for `dims`: their product, a Size where a dimension is symbolic."""
    total = 1
    for d in dims:
        total = _mul(total, d if isinstance(d, int) else Size.of(d))
    return _made(np.array(total, dtype=object), np.int64)


def _made(values, dtype):
    """Sizes, or a plain array when every entry is known."""
    values = np.asarray(values, dtype=object)
    if all(not isinstance(v, Size) for v in values.flat):
        return values.astype(dtype)
    return Sizes(values, dtype)


def _entries(value):
    """An input's entries as an object array (a known array's too)."""
    return value.values if isinstance(value, Sizes) else np.asarray(value).astype(object)


def entries(value):
    """A shape operand's entries as a list of ints and Sizes."""
    return [v if isinstance(v, Size) else int(v) for v in _entries(value).reshape(-1)]


# Ops on sizes: each takes the Node, with at least one input a Sizes, and the others arrays.
SIZES_CONVERTERS = {}


def _on_sizes(*op_types):
    return converts(*op_types, table=SIZES_CONVERTERS)


def _dtype(n):
    """The element type of the node's Sizes input: what its result keeps."""
    return next(n.value(i).dtype for i in range(n.num_inputs) if isinstance(n.value(i), Sizes))


@_on_sizes("Identity")
def _identity(n):
    return n.value(0)


@_on_sizes("Shape")
def _shape(n):
    return np.array(n.shape(0), dtype=np.int64)[slice(n.attr("start", 0), n.attr("end", len(n.shape(0))))]


@_on_sizes("Cast")
def _cast(n):
    to = _dtypes.esg_dtype(n.attr("to"))
    if to not in (_C.i64, _C.i32):
        raise NeedsShape(f"sizes cast to {to.name}: known only at run time")
    return _made(_entries(n.value(0)), _dtypes.numpy_dtype(to))


@_on_sizes("Gather")
def _gather(n):
    data = _entries(n.value(0))
    return _made(np.take(data, np.asarray(n.const(1, "indices")).astype(np.int64), axis=n.attr("axis", 0)), _dtype(n))


@_on_sizes("Unsqueeze", "Squeeze")
def _unsqueeze(n):
    data = _entries(n.value(0))
    axes = n.ints(1, "axes") if n.opset >= 13 and n.has(1) else list(n.attr("axes", []))
    if n.op_type == "Squeeze":
        return _made(np.squeeze(data, axis=tuple(axes) if axes else None), _dtype(n))
    return _made(np.expand_dims(data, tuple(axes)), _dtype(n))


@_on_sizes("Concat")
def _concat(n):
    return _made(np.concatenate([_entries(n.value(i)) for i in range(n.num_inputs) if n.has(i)], axis=n.attr("axis")), _dtype(n))


@_on_sizes("Slice")
def _slice(n):
    data = _entries(n.value(0))
    if n.opset < 10:  # attributes then
        starts, ends = list(n.attr("starts")), list(n.attr("ends"))
        axes, steps = list(n.attr("axes", range(len(starts)))), [1] * len(starts)
    else:
        starts, ends = n.ints(1, "starts"), n.ints(2, "ends")
        axes = n.ints(3, "axes") if n.has(3) else list(range(len(starts)))
        steps = n.ints(4, "steps") if n.has(4) else [1] * len(starts)
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        index[axis] = slice(start, end, step)
    return _made(data[tuple(index)], _dtype(n))


@_on_sizes("Reshape")
def _reshape(n):
    shape = n.ints(1, "shape") if n.opset >= 5 else list(n.attr("shape"))
    return _made(_entries(n.value(0)).reshape(shape), _dtype(n))


@_on_sizes("Mul", "Add", "Sub", "Div")
def _arithmetic(n):
    return _made(_ELEMENTWISE[n.op_type](_entries(n.value(0)), _entries(n.value(1))), _dtype(n))


@_on_sizes("Equal")
def _equal_op(n):
    return _EQUAL(_entries(n.value(0)), _entries(n.value(1))).astype(bool)


@_on_sizes("Where")
def _where(n):
    condition = np.asarray(n.const(0, "condition")).astype(bool)
    return _made(np.where(condition, _entries(n.value(1)), _entries(n.value(2))), _dtype(n))


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
