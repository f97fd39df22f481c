"""A SavedModel directory as the importer reads it: the graph of `saved_model.pb`'s serving
MetaGraphDef, one signature's inputs and outputs, and its variables' values.

TF2 graphs do not name the checkpoint keys of their variables. The signature's call node
(StatefulPartitionedCall) passes its function the variables' handles (VarHandleOp nodes) after
the signature's inputs; the object graph (SavedObjectGraph) lists, for that function, which
objects those captured inputs are (`bound_inputs`); and the checkpoint's own object graph,
node for node the same objects, gives each variable's key in variables/ (its VARIABLE_VALUE)."""
import os

from .._C import FormatError
from . import _schema, _tensors
from ._bundle import Bundle
from ._refs import parse_ref

_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


class SavedModel:
    """`graph_def`, `inputs` and `outputs` ([(signature key, tensor name)], sorted by key, as TF
    orders a signature's structure) and `resources` ({VarHandleOp node name: array})."""

    def __init__(self, path, signature=None, tags=("serve",)):
        self.path = path
        saved = _schema.SavedModel()
        with open(os.path.join(path, "saved_model.pb"), "rb") as f:
            data = f.read()
        try:
            saved.ParseFromString(data)
        except Exception as e:
            raise FormatError(f"`{path}/saved_model.pb` is not a SavedModel: {type(e).__name__}: {e}") from e
        metas = [m for m in saved.meta_graphs if set(tags) <= set(m.meta_info_def.tags)]
        if not metas:
            have = [sorted(m.meta_info_def.tags) for m in saved.meta_graphs]
            raise FormatError(f"`{path}` has no MetaGraphDef tagged {sorted(tags)} (it has {have})")
        meta = metas[0]
        signatures = sorted(k for k in meta.signature_def if not k.startswith("__"))
        name = signature or ("serving_default" if "serving_default" in signatures else signatures[0] if signatures else None)
        if name not in meta.signature_def:
            raise FormatError(f"`{path}` has no signature '{name}' (its signatures: {', '.join(signatures) or 'none'})")
        sig = meta.signature_def[name]
        self.signature = name
        self.graph_def = meta.graph_def
        self.inputs = sorted((k, v.name) for k, v in sig.inputs.items())
        self.outputs = sorted((k, v.name) for k, v in sig.outputs.items())
        self.resources = self._variables(meta)

    def _variables(self, meta):
        """The values of the variable handles the graph's calls capture, by handle node."""
        captures = {}  # VarHandleOp name -> object id
        functions = meta.object_graph_def.concrete_functions
        nodes = {n.name: n for n in meta.graph_def.node}
        for node in meta.graph_def.node:
            if node.op not in ("StatefulPartitionedCall", "PartitionedCall"):
                continue
            bound = list(functions[node.attr["f"].func.name].bound_inputs) if node.attr["f"].func.name in functions else []
            refs = [r for r in node.input if not r.startswith("^")]
            if len(bound) > len(refs):
                raise FormatError(f"`{self.path}`: '{node.name}' captures {len(bound)} objects but passes {len(refs)} inputs")
            for ref, object_id in zip(refs[len(refs) - len(bound):], bound):
                handle = parse_ref(ref)[0]
                if handle in nodes and nodes[handle].op == "VarHandleOp":
                    captures[handle] = object_id
        if not captures:
            return {}
        prefix = os.path.join(self.path, "variables", "variables")
        try:
            bundle = Bundle(prefix)
            checkpoint = _schema.TrackableObjectGraph()
            try:
                checkpoint.ParseFromString(bundle.string(_OBJECT_GRAPH_KEY))
            except Exception as e:  # protobuf's DecodeError
                raise ValueError(f"its object graph is not a protobuf message: {e}") from e
        except (OSError, ValueError, KeyError) as e:
            raise FormatError(f"`{self.path}/variables` cannot be read: {type(e).__name__}: {e}") from e
        resources = {}
        for handle, object_id in captures.items():
            if not 0 <= object_id < len(checkpoint.nodes):
                raise FormatError(f"`{self.path}`: variable '{handle}' is object {object_id}, which the checkpoint does not have")
            keys = [a.checkpoint_key for a in checkpoint.nodes[object_id].attributes if a.name == "VARIABLE_VALUE"]
            if not keys or keys[0] not in bundle.entries:
                raise FormatError(f"`{self.path}`: variable '{handle}' (object {object_id}) has no value in variables/")
            try:
                resources[handle] = bundle.array(keys[0])
            except (ValueError, _tensors.UnsupportedType) as e:
                raise FormatError(f"`{self.path}/variables`: {e}") from e
        return resources
