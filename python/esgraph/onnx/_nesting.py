"""ONNX files whose If/Loop/Scan bodies nest deeper than protobuf's parser goes in one parse.

protobuf's C++ parser stops at 100 message levels, three per body (node, attribute, graph), so
one parse reaches 31 levels of bodies where esgraph's own limit is 64 (`ir::kMaxNesting`). Such a
file is read from the protobuf wire format itself: how deep it nests, and, within esgraph's
limit, the file parsed in pieces: the bodies every `_BODIES_PER_PARSE` levels down are cut out of
the bytes, parsed on their own and put back into the messages they came from."""

import onnx

from ._wire import fields, length_delimited

# Field numbers (onnx.proto): ModelProto.graph, GraphProto.node, NodeProto.attribute,
# AttributeProto.g and .graphs.
_MODEL_GRAPH, _GRAPH_NODE, _NODE_ATTRIBUTE, _ATTRIBUTE_G, _ATTRIBUTE_GRAPHS = 7, 1, 5, 6, 11

# The fields that lead from each kind of message to the bodies below it.
_TOWARDS_BODIES = {
    "model": {_MODEL_GRAPH: "graph"},
    "graph": {_GRAPH_NODE: "node"},
    "node": {_NODE_ATTRIBUTE: "attribute"},
    "attribute": {_ATTRIBUTE_G: "graph", _ATTRIBUTE_GRAPHS: "graph"},
}

# Levels of bodies in one parse: 3 message levels each, leaving room under protobuf's 100 for the
# model, the graph and the deepest graph's own types (value_info's type, shape and dims).
_BODIES_PER_PARSE = 24


def _fields(data, begin, end):
    """(field number, start, end) of each length-delimited field in data[begin:end]."""
    return ((f.number, f.begin, f.end) for f in fields(data, begin, end) if f.wire == 2)


def subgraph_depth(data):
    """The deepest nesting of If/Loop/Scan bodies in a serialized ModelProto (0: none), or None
    when the bytes are not such a model."""
    def graph_depth(begin, end, depth):
        deepest = depth
        # an explicit stack: the point is files too deep for recursion
        stack = [(begin, end, depth)]
        while stack:
            b, e, d = stack.pop()
            deepest = max(deepest, d)
            for node_field, nb, ne in _fields(data, b, e):
                if node_field != _GRAPH_NODE:
                    continue
                for attr_field, ab, ae in _fields(data, nb, ne):
                    if attr_field != _NODE_ATTRIBUTE:
                        continue
                    for field, gb, ge in _fields(data, ab, ae):
                        if field in (_ATTRIBUTE_G, _ATTRIBUTE_GRAPHS):
                            stack.append((gb, ge, d + 1))
        return deepest
    try:
        graphs = [(b, e) for field, b, e in _fields(data, 0, len(data)) if field == _MODEL_GRAPH]
        return max((graph_depth(b, e, 0) for b, e in graphs), default=None)
    except (ValueError, IndexError):
        return None


def parse_nested(data):
    """The onnx.ModelProto in `data`, whose bodies nest beyond one parse but, as subgraph_depth
    has checked, within esgraph's limit (so the recursion here stays shallow)."""
    return _parse(onnx.ModelProto(), "model", data)


def _parse(message, kind, data):
    cuts = []
    outer = _cut(data, 0, len(data), kind, 0, (), cuts)
    if message.ParseFromString(outer) != len(outer):
        raise ValueError("bytes left over after the message")
    for path, body in cuts:
        _at(message, path).CopyFrom(_parse(onnx.GraphProto(), "graph", body))
    return message


def _cut(data, begin, end, kind, depth, path, cuts):
    """The message of `kind` in data[begin:end] with each body `_BODIES_PER_PARSE` levels below
    it emptied; the bodies cut go to `cuts`, each with its path from this message: (field
    number, index among that field's values) a step."""
    parts, seen = [], {}
    for f in fields(data, begin, end):
        child = _TOWARDS_BODIES[kind].get(f.number) if f.wire == 2 else None
        if child is None:
            parts.append(data[f.key:f.end])
            continue
        index = seen[f.number] = seen.get(f.number, -1) + 1
        step = path + ((f.number, index),)
        if kind == "attribute" and depth + 1 == _BODIES_PER_PARSE:
            cuts.append((step, data[f.begin:f.end]))
            value = b""
        else:
            value = _cut(data, f.begin, f.end, child, depth + (kind == "attribute"), step, cuts)
        parts.append(length_delimited(f.number, value))
    return b"".join(parts)


def _at(message, path):
    """The message `path` leads to from `message`."""
    for number, index in path:
        field = message.DESCRIPTOR.fields_by_number[number]
        value = getattr(message, field.name)
        message = value[index] if field.label == field.LABEL_REPEATED else value
    return message
