"""TF's function library, as the importer reads it: a FunctionDef's body names tensors as
"node:output_arg:index" (the op's output argument by name, then the index within it) where a
GraphDef says "node:k"; its results are named by the signature's output arguments."""
from . import _schema

# The output arguments of the ops with more than one (op_def of each op); every other op has one,
# so that "node:<its name>:k" is output k.
_OUTPUT_ARGS = {
    "FusedBatchNorm": ["y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"],
    "FusedBatchNormV2": ["y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"],
    "FusedBatchNormV3": ["y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2", "reserve_space_3"],
    "_FusedBatchNormEx": ["y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2", "reserve_space_3"],
    "TopKV2": ["values", "indices"],
    "Unique": ["y", "idx"],
    "NonMaxSuppressionV4": ["selected_indices", "valid_outputs"],
    "NonMaxSuppressionV5": ["selected_indices", "selected_scores", "valid_outputs"],
}


class UnknownOutput(Exception):
    """A body names an output argument its op does not have (as far as the importer knows)."""


def graph_ref(ref, ops):
    """A body's input reference in GraphDef form: "arg" -> "arg", "node:arg:k" -> "node:j" with j
    the flat output index, "^node" as it is. `ops` maps the body's node names to their ops."""
    if ref.startswith("^"):
        return ref
    parts = ref.split(":")
    if len(parts) != 3:
        return ref
    if not parts[2].isdigit():
        raise UnknownOutput(f"'{ref}': its index is not a number")
    node, arg, index = parts[0], parts[1], int(parts[2])
    args = _OUTPUT_ARGS.get(ops.get(node))
    if args is None:
        return f"{node}:{index}"
    if arg not in args:
        raise UnknownOutput(f"'{ref}': {ops[node]} has no output '{arg}'")
    return f"{node}:{args.index(arg) + index}"


def body(fdef):
    """The function's nodes with GraphDef-form inputs, and its results as GraphDef-form refs, in
    the order of the signature's output arguments."""
    ops = {n.name: n.op for n in fdef.node_def}
    nodes = []
    for n in fdef.node_def:
        copy = _schema.NodeDef()
        copy.CopyFrom(n)
        del copy.input[:]
        copy.input.extend(graph_ref(r, ops) for r in n.input)
        nodes.append(copy)
    results = [graph_ref(fdef.ret[a.name], ops) for a in fdef.signature.output_arg]
    return nodes, results
