"""TensorFlow models in esgraph.

    g = esgraph.tensorflow.load("frozen.pb")      # a frozen GraphDef: a path, bytes or a tf GraphDef
    y = esgraph.compile(g)(x)

The importer reads the GraphDef with its own copy of TF's schema (_schema.py): TensorFlow need
not be installed. Const nodes become constants, and what they determine (Reshape's shape,
Mean's axes, a batch norm's scale and shift) is computed while importing. NHWC convolutions and
pools run in esgraph's NCHW with the compiler choosing their memory format; the model pays one
transpose at its input and one at its output (_importer.py). A graph that cannot be imported
raises `ImportFailed`, which lists every unsupported node at once. docs/tensorflow.md lists the
ops and what is refused.
"""
import os

from .._C import FormatError
from .._frontend import ImportFailed
from ._importer import import_graph
from ._refs import tensor_key
from ._saved_model import SavedModel
from ._tfjs import TfjsModel
from ._schema import GraphDef
from .converters import CONVERTERS

__all__ = ["ImportFailed", "load", "supported_ops"]


def load(model, *, inputs=None, outputs=None, shapes=None, name=None, max_memory_bytes=None, signature=None):
    """An esgraph Graph from a TensorFlow model: a frozen GraphDef (a `.pb` path, its bytes, or a
    `tf.compat.v1.GraphDef`), a SavedModel directory, or a TF.js graph model (its `model.json`,
    the weight shards beside it; inputs and outputs its signature's when it has one).

    A SavedModel gives the graph of its signature `signature` ("serving_default" by default):
    its inputs and outputs are the signature's, named by its keys and sorted by them, and its
    variables are read from variables/ (_saved_model.py).

    `outputs` names the tensors the graph returns ("node" or "node:k"); by default, output 0 of
    every node no other node reads. `inputs` names the tensors it takes, cutting the graph there;
    by default its Placeholders. `shapes` ({tensor name: [dims]}) gives input shapes: integers
    for fixed sizes, strings for symbolic ones; a Placeholder's unknown sizes are symbols anyway.
    `max_memory_bytes` bounds what computing constants while importing may hold (default 256 MiB
    plus twice the graph's constants; 0 for none).
    """
    if isinstance(model, (str, os.PathLike)) and os.path.isfile(os.path.join(os.fspath(model), "saved_model.pb")):
        if inputs is not None or outputs is not None:
            raise TypeError("load: inputs= and outputs= cut a GraphDef; a SavedModel's are its signature's (signature=)")
        return _load_saved_model(os.fspath(model), signature, shapes, name, max_memory_bytes)
    if isinstance(model, (str, os.PathLike)) and os.fspath(model).endswith(".json"):
        return _load_tfjs(os.fspath(model), inputs, outputs, shapes, name, max_memory_bytes)
    if signature is not None:
        raise TypeError("load: signature= names a SavedModel's signature; this is a GraphDef")
    data, source = _read(model)
    graph_def = GraphDef()
    try:
        graph_def.ParseFromString(data)
    except Exception as e:  # protobuf's DecodeError, or what a hostile file makes it raise
        raise FormatError(f"{source} is not a TensorFlow GraphDef: {type(e).__name__}: {e}") from e
    if not graph_def.node:
        raise FormatError(f"{source} is not a TensorFlow GraphDef with nodes (an empty or foreign file)")
    return import_graph(graph_def, inputs=inputs, outputs=outputs, shapes=shapes, name=name,
                        max_memory_bytes=max_memory_bytes)


def _load_saved_model(path, signature, shapes, name, max_memory_bytes):
    saved = SavedModel(path, signature)
    names = {tensor_key(t): k for k, t in saved.inputs + saved.outputs}
    keyed_shapes = {t: shapes[k] for k, t in saved.inputs if shapes and k in shapes}
    return import_graph(saved.graph_def, inputs=[t for _, t in saved.inputs], outputs=[t for _, t in saved.outputs],
                        shapes=keyed_shapes, name=name or os.path.basename(os.path.normpath(path)),
                        max_memory_bytes=max_memory_bytes, resources=saved.resources, names=names)


def _load_tfjs(path, inputs, outputs, shapes, name, max_memory_bytes):
    tfjs = TfjsModel(path)
    names = {}
    if inputs is None and tfjs.inputs:  # the signature's, named by its keys
        inputs, names = [t for _, t in tfjs.inputs], {tensor_key(t): k for k, t in tfjs.inputs}
        shapes = {t: shapes[k] for k, t in tfjs.inputs if shapes and k in shapes}
    if outputs is None and tfjs.outputs:
        outputs = [t for _, t in tfjs.outputs]
        names.update({tensor_key(t): k for k, t in tfjs.outputs})
    return import_graph(tfjs.graph_def, inputs=inputs, outputs=outputs, shapes=shapes, name=name or "tfjs",
                        max_memory_bytes=max_memory_bytes, resources=tfjs.weights, names=names)


def _read(model):
    """The serialized GraphDef in `model`, and how to name it in errors."""
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if os.path.isdir(path):
            raise FormatError(f"`{path}` is a directory, but not a SavedModel (no saved_model.pb)")
        with open(path, "rb") as f:
            return f.read(), f"`{path}`"
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), f"the {len(model)} bytes"
    if hasattr(model, "SerializeToString") and type(model).__name__ == "GraphDef":
        return model.SerializeToString(), "the GraphDef"
    raise TypeError(f"load: expected a path, bytes or a GraphDef, got {type(model).__name__}")


def supported_ops():
    """The TF ops the importer converts (besides Const, Placeholder, Identity and NoOp)."""
    return sorted(CONVERTERS)
