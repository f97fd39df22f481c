"""ONNX's sequences and optionals, as the importer holds them.

esgraph's graphs carry tensors only, so a sequence is lowered while importing: it is a list
of tensors whose length is known, and every sequence op (SequenceInsert, SequenceAt,
SplitToSequence, ...) is list work on it. What decides a length at run time (a position, a
trip count, a split operand, the elements a sequence input brings) is read on the host when a
run brings it, and the graph is compiled for it once (ValueDependentGraph), as ONNX Runtime
reads shape operands. A graph input or output that is a sequence stands for its elements,
`name[0]`, `name[1]`, ...; an optional one for its value, or for nothing when it is empty.

`Layout` says what a model's flat list of tensors stands for, input by input or output by
output: a tensor, a sequence of n, or an optional of one of those (or empty)."""
import numpy as np
import onnx


class Sequence:
    """A sequence value: its elements (tensors of the graph being built, or numpy arrays known
    while importing) and the element type of one that is empty (an esgraph dtype or None)."""

    def __init__(self, elements, dtype=None):
        self.elements = tuple(elements)
        self.dtype = dtype

    def __len__(self):
        return len(self.elements)


class Optional:
    """An optional value: a tensor, a Sequence, or None when it is empty."""

    def __init__(self, value):
        self.value = value


TENSOR = "tensor"


def layout_of(value):
    """What a value stands for in a flat list of tensors: TENSOR, ("sequence", n) or
    ("optional", the layout of its value or None)."""
    if isinstance(value, Sequence):
        return ("sequence", len(value))
    if isinstance(value, Optional):
        return ("optional", None if value.value is None else layout_of(value.value))
    return TENSOR


def flatten(value):
    """The tensors a value stands for, in order."""
    if isinstance(value, Sequence):
        return list(value.elements)
    if isinstance(value, Optional):
        return [] if value.value is None else flatten(value.value)
    return [value]


def flat_names(name, value):
    """The names of the tensors a graph input or output `name` stands for: `name` for a tensor
    (or an optional one), `name[k]` for a sequence's elements."""
    if isinstance(value, Optional):
        return [] if value.value is None else flat_names(name, value.value)
    if isinstance(value, Sequence):
        return [f"{name}[{k}]" for k in range(len(value))]
    return [name]


def unflatten(layouts, flat):
    """The values a flat list of tensors stands for: a list for a sequence, None for an empty
    optional (as ONNX's Python reference gives them)."""
    flat, values = list(flat), []

    def take(layout):
        if layout == TENSOR:
            return flat.pop(0)
        kind, inner = layout
        if kind == "sequence":
            taken = flat[:inner]
            del flat[:inner]
            return taken
        return None if inner is None else take(inner)

    for layout in layouts:
        values.append(take(layout))
    return values


def kind_of(type_proto):
    """"tensor", "sequence" or "optional": what an ONNX TypeProto holds."""
    field = type_proto.WhichOneof("value")
    return {"tensor_type": "tensor", "sequence_type": "sequence", "optional_type": "optional"}.get(field, field)


def element_type(type_proto):
    """The TensorProto element type at the bottom of a tensor, sequence or optional type, or
    None where the model leaves it out."""
    while type_proto.WhichOneof("value") in ("sequence_type", "optional_type"):
        type_proto = getattr(type_proto, type_proto.WhichOneof("value")).elem_type
    if type_proto.WhichOneof("value") != "tensor_type" or not type_proto.tensor_type.elem_type:
        return None
    return type_proto.tensor_type.elem_type


def structure(value):
    """A run's value of a sequence or optional input as what fixes its graph: its elements'
    shapes, None for an empty optional; a tensor's shape."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return tuple(tuple(np.shape(v)) for v in value)
    return tuple(np.shape(value))


def carries_collections(graph):
    """Whether an ONNX (sub)graph takes or gives a sequence or an optional."""
    return any(kind_of(vi.type) in ("sequence", "optional") for vi in list(graph.input) + list(graph.output))


def is_collection(value):
    return isinstance(value, (Sequence, Optional))


def describe(type_proto):
    """An ONNX type as a reader writes it: seq(tensor(float)), optional(...)."""
    kind = kind_of(type_proto)
    if kind in ("sequence", "optional"):
        return f"{kind[:3] if kind == 'sequence' else kind}({describe(getattr(type_proto, type_proto.WhichOneof('value')).elem_type)})"
    if kind == "tensor":
        return f"tensor({onnx.TensorProto.DataType.Name(type_proto.tensor_type.elem_type).lower()})"
    return str(kind)
