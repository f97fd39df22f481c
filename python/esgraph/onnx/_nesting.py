"""How deep an ONNX file nests its subgraphs, read from the protobuf wire format itself: for the
error of a file that protobuf's parser refuses for its depth (it stops at 100 message levels,
three per If or Loop body: node, attribute, graph), which otherwise says only that the bytes did
not parse."""

from ._wire import fields

# Field numbers (onnx.proto): ModelProto.graph, GraphProto.node, NodeProto.attribute,
# AttributeProto.g and .graphs.
_MODEL_GRAPH, _GRAPH_NODE, _NODE_ATTRIBUTE, _ATTRIBUTE_G, _ATTRIBUTE_GRAPHS = 7, 1, 5, 6, 11


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
