"""ONNX models in esgraph.

    g = esgraph.onnx.load("model.onnx")          # or an onnx.ModelProto
    y = esgraph.compile(g)(x)
    esgraph.onnx.save(g, "out.onnx")             # any graph of ops ONNX has

Initializers become constants; shape operands (Reshape's shape, Slice's starts, ...) known while
importing (constants, or computed from constants and static shapes) become attributes, as do
sizes of dynamic axes where a static attribute can say them (Reshape's 0 and -1:
converters/sizes.py). One known only at run time (an input, or a size no attribute can say)
makes `load` return a `ValueDependentGraph`, which reads it at each run and compiles the graph
for each value once. So does a model that takes or gives sequences or optionals: they are
lowered to their tensors while importing (_sequences.py), and the model takes and gives them
as lists of arrays (None for an empty optional).
Opsets 1 to 28 are accepted; a node whose op changed after opset 18 in a way its
converter does not read is refused by name (_versions.py). ONNX 1.12's node suite checks opsets
up to 17 (`docs/conformance.md`), the newest release's up to 28 (`docs/conformance-latest.md`). A model
that cannot be imported raises `ImportFailed`, which lists every unsupported node at once.
"""
import os
import warnings

import onnx

from .._C import FormatError, LimitError
from .._frontend import ExportFailed, ImportFailed
from ._importer import MAX_OPSET, MIN_OPSET, load_graph
from ._exporter import to_model
from ._external import load_external_data, needs_external_data
from ._weights import Weights, open_file, split_weights
from ._nesting import parse_nested, subgraph_depth
from ._quantize_weights import quantize_weights
from ._sequences import carries_collections
from ._values import ValueDependentGraph, ValueDependentModel
from .converters import CONVERTERS

__all__ = ["ExportFailed", "ImportFailed", "ValueDependentGraph", "ValueDependentModel", "OpenedModel", "load", "open_model", "quantize_weights", "save", "to_model", "supported_ops", "MIN_OPSET", "MAX_OPSET"]


def load(model, *, input_shapes=None, constants=None, name=None, base_dir=None, sharding=None, max_memory_bytes=None):
    """An esgraph Graph from an ONNX model: a path, bytes, an `onnx.ModelProto`, or what
    `open_model` returned.

    `input_shapes` ({input name: [dims]}) overrides the model's input shapes: integers for
    fixed sizes, strings for symbolic ones. A model that takes a shape operand (Reshape's shape,
    Squeeze's axes, TopK's k, ...) as an input, or computes one from inputs, gives a
    `ValueDependentGraph` instead: compiled like a graph, it reads those inputs' values at each
    run and compiles the graph for each set of them once (at most `max_plans` kept).
    `constants` ({input name: array}) freezes inputs to the given values instead, for one graph.
    Tensors kept in external data files are read from the model's folder only (`base_dir` for a
    model given as bytes or a ModelProto).

    The weights are read once, into the arrays the graph's constants use in place: a model file's
    large initializers go from the file straight there, never through protobuf.

    `max_memory_bytes` bounds the memory that folding (computing what constants determine, while
    importing) may hold; a fold beyond it is left to the compiled graph, where compile's own
    max_memory_bytes applies. The default is 256 MiB plus twice the bytes of the model's
    initializers; 0 sets no bound. A value-dependent model's imports at run time keep it.

    `sharding` ({initializer name: "column" or "row"}) splits weights over the ranks of the MPI job
    (docs/distributed.md), Megatron-style. Each named initializer must be the weight (input B) of
    a MatMul or Gemm, and this rank keeps its share:
    - a "column" weight keeps its share of the output columns, and the product's pieces are
      joined with an all_gather;
    - a "row" weight keeps its share of the input rows, reads the matching slice of its input,
      and the partial products are summed with an all_reduce.
    Every rank loads the same model with the same spec.
    """
    opened = model if isinstance(model, OpenedModel) else open_model(model, base_dir)
    try:
        try:
            graph = load_graph(opened.proto, input_shapes=input_shapes, constants=constants, name=name, sharding=sharding,
                               weights=opened.weights, max_memory_bytes=max_memory_bytes)
            if not carries_collections(opened.proto.graph):
                return graph
            waits, by_shapes = (), False  # the graph fits one set of sequences: the model gives them as lists
        except ImportFailed as e:
            if not (e.waits_for_values and (e.needed_constants or e.waits_for_shapes)):
                raise
            waits, by_shapes = e.needed_constants, e.waits_for_shapes
        return ValueDependentGraph(opened.proto, waits, input_shapes, constants, name, by_shapes=by_shapes,
                                   sharding=sharding, weights=opened.weights, max_memory_bytes=max_memory_bytes)
    finally:
        opened.weights.close()  # every initializer is read (and kept) by now


# Bodies nested in bodies, at most (ir::kMaxNesting).
_MAX_NESTING = 64
# Measured: protobuf parses 31 levels of bodies in one go, not 32.
_BODIES_ONE_PARSE_REACHES = 31


def _parse(data, source):
    """The onnx.ModelProto in `data`. One parse reaches 31 levels of If/Loop/Scan bodies
    (protobuf's C++ parser stops at 100 message levels, three a body); a model nested deeper, up
    to esgraph's own limit, is parsed in pieces (_nesting.py); one beyond it is a LimitError."""
    try:
        return onnx.load_from_string(data)
    except Exception:
        depth = subgraph_depth(data)
        if depth is None or depth <= _BODIES_ONE_PARSE_REACHES:
            raise
    if depth > _MAX_NESTING:
        raise LimitError(f"{source}: If/Loop/Scan bodies nest {depth} levels deep; esgraph's limit is {_MAX_NESTING}")
    return parse_nested(data)


class OpenedModel:
    """An ONNX model parsed for importing: `proto`, the onnx.ModelProto, and `weights`, which
    reads its main graph's initializers. A file's large initializers are not in `proto`: they are
    ONNX external data pointing back into the file, and `weights` reads them from the file as it
    was opened."""

    def __init__(self, proto, weights):
        self.proto = proto
        self.weights = weights


def open_model(model, base_dir=None):
    """An OpenedModel from a path, bytes or a ModelProto, its external data to be read from the
    model's folder (or `base_dir`) and nowhere else (_external.py). What is not an ONNX model
    with outputs (an empty file, garbage, a truncated protobuf) raises esgraph.FormatError naming
    the source; a file that cannot be read, the OSError."""
    source, data, file, apart = "the model", None, None, {}
    try:
        with warnings.catch_warnings():
            # onnx warns, and goes on, when protobuf leaves bytes unparsed: that is a bad file too.
            warnings.simplefilter("error", RuntimeWarning)
            if isinstance(model, (str, os.PathLike)):
                path = os.fspath(model)
                source = f"`{path}`"
                base_dir = os.path.dirname(os.path.abspath(path))
                file, data = open_file(path)
                parsed, apart = split_weights(data, os.path.basename(path))
                model = _parse(parsed, source)
            elif isinstance(model, (bytes, bytearray)):
                source, data = f"the {len(model)} bytes", bytes(model)
                model = _parse(data, source)
            elif not isinstance(model, onnx.ModelProto):
                raise TypeError(f"load: expected a path, bytes or onnx.ModelProto, got {type(model).__name__}")
    except (TypeError, OSError, LimitError):
        _close(file)
        raise
    except Exception as e:  # protobuf's DecodeError, onnx's warning, whatever else a corrupt file makes onnx raise
        _close(file)
        raise FormatError(f"{source} is not an ONNX model: {type(e).__name__}: {e}") from e
    finally:
        if hasattr(data, "close"):
            data.close()  # the mapping: what is still to read is read through the file
    weights = Weights(base_dir, file, apart)
    try:
        if not model.graph.output:
            raise FormatError(f"{source} is not an ONNX model with outputs (an empty or foreign file, or a graph with none)")
        _check_strings(model, source, "model")
        if needs_external_data(model):
            loaded = onnx.ModelProto()  # the caller's ModelProto stays as given
            loaded.CopyFrom(model)
            load_external_data(loaded, base_dir)
            model = loaded
    except BaseException:
        weights.close()
        raise
    return OpenedModel(model, weights)


def _close(file):
    if file is not None:
        file.close()


def _check_strings(message, source, path):
    """Every string field of the model is text. protobuf hands a proto2 string that is not UTF-8
    over as bytes, which no name, op type or attribute may be: a FormatError naming where."""
    for field, value in message.ListFields():
        if field.type == field.TYPE_STRING:
            for i, v in enumerate(value if field.label == field.LABEL_REPEATED else [value]):
                if not isinstance(v, str):
                    raise FormatError(f"{source} is not a valid ONNX model: {path}.{field.name}"
                                      f"{f'[{i}]' if field.label == field.LABEL_REPEATED else ''} is not UTF-8 text")
        elif field.type == field.TYPE_MESSAGE:
            if field.label == field.LABEL_REPEATED:
                for i, item in enumerate(value):
                    _check_strings(item, source, f"{path}.{field.name}[{i}]")
            else:
                _check_strings(value, source, f"{path}.{field.name}")


def save(graph, path):
    """Writes an esgraph graph as an ONNX model (opset 17) that passes onnx.checker; returns the
    ModelProto. if and while become If and Loop; a graph the exporter cannot write raises
    ExportFailed listing its nodes."""
    model = to_model(graph)
    onnx.save(model, os.fspath(path))
    return model


def supported_ops():
    """The ONNX op types the importer converts."""
    return sorted(CONVERTERS)
