"""Sequences and optionals (../_sequences.py): list work on elements whose number is known
while importing. A position, a split or a condition that decides which tensors a sequence holds
is read when a run brings it (NeedsValue); SequenceAt of elements that all have one shape picks
at run time (esgraph's sequence_at, which checks the position as ONNX does)."""
import numpy as np

from ... import _C
from .. import _dtypes
from .._sequences import Optional, Sequence, element_type, kind_of
from .registry import CONVERTERS, NeedsShape, Unsupported, check_attrs, converts

ops = _C.ops


def _position(n, i, length, what, insert=False):
    """Input i, a position in a sequence of `length` (negative ones count from the end), as a
    non-negative index; an insert may also name the end itself."""
    p = int(np.asarray(n.const(i, what)).reshape(-1)[0])
    last = length if insert else length - 1
    if not -length <= p <= last:
        raise Unsupported(f"{what} {p} is outside [{-length}, {last}] for a sequence of {length}")
    return p + length if p < 0 else p


def _elements(n, seq):
    return [n.tensor(v) for v in seq.elements]


def _element(n, i, what):
    """Input i as a sequence element: an array known while importing, or a tensor (n.x refuses
    sizes of symbolic dimensions and sequences by name)."""
    if not n.has(i):
        raise Unsupported(f"input {i} ({what}) is missing")
    return n.value(i) if n.known(i) else n.x(i)


def _dtype_of(value):
    return _dtypes.from_numpy(value.dtype) if isinstance(value, np.ndarray) else value.dtype


def _one_element_type(values, dtype=None):
    """The element type the values share with each other (and with `dtype`, a sequence's)."""
    dtypes = {_dtype_of(v) for v in values} | ({dtype} if dtype is not None else set())
    if len(dtypes) > 1:
        raise Unsupported(f"elements of different types: {', '.join(sorted(d.name for d in dtypes))}")
    return dtypes.pop() if dtypes else dtype


@converts("SequenceEmpty")
def sequence_empty(n):
    check_attrs(n, ["dtype"])
    return Sequence([], _dtypes.esg_dtype(n.attr("dtype", 1)))


@converts("SequenceConstruct")
def sequence_construct(n):
    if not n.num_inputs:
        raise Unsupported("SequenceConstruct of no tensors (SequenceEmpty makes an empty sequence)")
    values = [_element(n, i, "inputs") for i in range(n.num_inputs)]
    return Sequence(values, _one_element_type(values))


@converts("SequenceLength")
def sequence_length(n):
    return np.array(len(n.collection(0, Sequence, "input_sequence")), np.int64)


@converts("SequenceInsert")
def sequence_insert(n):
    seq = n.collection(0, Sequence, "input_sequence")
    value = _element(n, 1, "tensor")
    dtype = _one_element_type([value], seq.dtype)
    at = _position(n, 2, len(seq), "position", insert=True) if n.has(2) else len(seq)
    elements = list(seq.elements)
    elements.insert(at, value)
    return Sequence(elements, dtype)


@converts("SequenceErase")
def sequence_erase(n):
    seq = n.collection(0, Sequence, "input_sequence")
    if not len(seq):
        raise Unsupported("SequenceErase of an empty sequence")
    at = _position(n, 1, len(seq), "position") if n.has(1) else len(seq) - 1
    return Sequence(seq.elements[:at] + seq.elements[at + 1:], seq.dtype)


@converts("SequenceAt")
def sequence_at(n):
    seq = n.collection(0, Sequence, "input_sequence")
    if not len(seq):
        raise Unsupported("SequenceAt of an empty sequence")
    if n.known(1) or len({tuple(n.tensor(v).shape) for v in seq.elements}) > 1:
        return seq.elements[_position(n, 1, len(seq), "position")]
    # One shape for every element: the position stays a run-time value.
    return ops.sequence_at(_elements(n, seq), n.x(1))


@converts("SplitToSequence")
def split_to_sequence(n):
    check_attrs(n, ["axis", "keepdims"])
    x = n.x(0)
    axis = n.attr("axis", 0)
    if not -x.ndim <= axis < x.ndim:
        raise Unsupported(f"axis {axis} of a rank-{x.ndim} input")
    axis %= x.ndim
    length = x.shape[axis]
    if not isinstance(length, int):
        raise NeedsShape(f"the split axis is symbolic ({length}): a run's input shapes fix the number of elements")
    if n.has(1):
        split = np.asarray(n.const(1, "split"))
        if split.ndim == 0:
            chunk = int(split)
            if chunk <= 0:
                raise Unsupported(f"split {chunk}: a chunk size must be positive")
            sizes = [min(chunk, length - k) for k in range(0, length, chunk)]
        else:
            sizes = [int(s) for s in split]
            if any(s < 0 for s in sizes) or sum(sizes) != length:
                raise Unsupported(f"split {sizes} does not add up to the axis' {length}")
        return Sequence(ops.split(x, sizes, axis=axis) if sizes else [], x.dtype)
    pieces = ops.split(x, [1] * length, axis=axis) if length else []
    if not n.attr("keepdims", 1):
        pieces = [ops.squeeze(p, axes=[axis]) for p in pieces]
    return Sequence(pieces, x.dtype)


@converts("ConcatFromSequence")
def concat_from_sequence(n):
    check_attrs(n, ["axis", "new_axis"])
    seq = n.collection(0, Sequence, "input_sequence")
    if not len(seq):
        raise Unsupported("ConcatFromSequence of an empty sequence")
    elements = _elements(n, seq)
    if "axis" not in n.attrs:
        raise Unsupported("ConcatFromSequence needs its `axis` attribute")
    axis = n.attr("axis")
    if n.attr("new_axis", 0):
        axis = axis % (elements[0].ndim + 1)
        elements = [ops.unsqueeze(t, [axis]) for t in elements]
    return ops.concat(elements, axis)


@converts("SequenceMap")
def sequence_map(n):
    """The body runs once per element, inlined: its k-th run takes the k-th element of every
    sequence input and each other input whole."""
    inputs = [n.value(i) for i in range(n.num_inputs)]
    lengths = {len(v) for v in inputs if isinstance(v, Sequence)}
    if len(lengths) != 1 or not isinstance(inputs[0], Sequence):
        raise Unsupported(f"the sequences mapped over must have one length (got {sorted(lengths)})")
    body = n.subgraph("body", inline=True)
    runs = [body(*[v.elements[k] if isinstance(v, Sequence) else v for v in inputs]) for k in range(lengths.pop())]
    declared = n.attrs["body"].output
    return [Sequence([r[j] for r in runs], _element_dtype(declared[j].type)) for j in range(n.num_outputs)]


def _element_dtype(type_proto):
    elem = element_type(type_proto)
    return _dtypes.esg_dtype(elem) if elem else None


@converts("Optional")
def optional(n):
    check_attrs(n, ["type"])
    if n.has(0):
        return Optional(n.value(0))
    if "type" not in n.attrs:
        raise Unsupported("an empty Optional needs its `type` attribute")
    kind = kind_of(n.attrs["type"])
    if kind not in ("tensor", "sequence"):
        raise Unsupported(f"an optional {kind}")
    return Optional(None)


@converts("OptionalHasElement")
def optional_has_element(n):
    if not n.has(0):  # opset 18: a missing input is an empty optional
        return np.array(False)
    v = n.value(0)
    return np.array(v.value is not None if isinstance(v, Optional) else True)


@converts("OptionalGetElement")
def optional_get_element(n):
    v = n.value(0)
    if not isinstance(v, Optional):  # opset 18 takes the tensor or sequence itself
        return v
    if v.value is None:
        raise Unsupported("OptionalGetElement of an empty optional")
    return v.value


# They make sequences and optionals whose elements belong to the graph being built: the
# importer converts them there, never in folding's scratch builder.
SEQUENCE_OPS = frozenset(op for op, fn in CONVERTERS.items() if fn.__module__ == __name__)
