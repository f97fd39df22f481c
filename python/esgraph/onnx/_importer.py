"""Walks an ONNX graph and rebuilds it through esgraph's builder API.

Each ONNX value resolves to an esgraph Tensor, or, when it is known while importing
(initializers, Constant nodes, shapes of static tensors and anything computed only from those),
to a numpy array. Known values are what lets ONNX's tensor-valued shape operands (Reshape's
`shape`, Slice's `starts`, ...) become the static attributes esgraph's ops take. A node whose
inputs are all known is folded: converted in a scratch builder, compiled and run by esgraph
itself, so folding uses the same kernels as the imported model.

Conversion goes on past a failing node, skipping only what depends on it, so that one error
lists every node that cannot be imported.
"""
import numpy as np
import onnx
from onnx import numpy_helper

from .. import _C
from .._folding import FoldingImporter
from .._frontend import ImportFailed, name_outputs
from . import _dtypes
from ._weights import Weights
from .converters import CONVERTERS, NeedsShape, NeedsValue, Unsupported
from ._versions import LATEST_OPSET, VERIFIED_OPSET, too_new
from ._sequences import Optional, Sequence, describe, element_type, flat_names, flatten, is_collection, kind_of, layout_of
from .._sizes import Sizes, entries
from .converters.sizes import SIZES_CONVERTERS
from .converters.sequence import SEQUENCE_OPS

MIN_OPSET, MAX_OPSET = 1, LATEST_OPSET


class _Poisoned:
    """The output of a node that failed to convert; its consumers are skipped silently."""


POISONED = _Poisoned()


def _attribute(a):
    """An attribute's value; one whose type field and value disagree, or whose strings or tensor
    data cannot be read, is Unsupported, reported with its node."""
    try:
        return _attribute_value(a)
    except (Unsupported, MemoryError):
        raise
    except Exception as e:  # onnx's ValueError for a type it does not know, UnicodeDecodeError, ...
        raise Unsupported(f"attribute '{a.name}' is malformed: {type(e).__name__}: {e}") from None


def _attribute_value(a):
    if a.type == onnx.AttributeProto.TENSOR:
        return numpy_helper.to_array(a.t)
    if a.type == onnx.AttributeProto.GRAPH:
        return a.g
    if a.type == onnx.AttributeProto.GRAPHS:
        return list(a.graphs)
    value = onnx.helper.get_attribute_value(a)
    if isinstance(value, bytes):
        return value.decode()
    if a.type == onnx.AttributeProto.STRINGS:
        return [v.decode() for v in value]
    if a.type in (onnx.AttributeProto.INTS, onnx.AttributeProto.FLOATS):
        return list(value)
    return value


class Node:
    """What a converter sees of one ONNX node: its attributes, and its inputs as esgraph
    tensors (`x(i)`) or as import-time constants (`const(i)`)."""

    def __init__(self, importer, proto, opset):
        self.proto = proto
        self.op_type = proto.op_type
        self.opset = opset
        self.attrs = {a.name: _attribute(a) for a in proto.attribute}
        self._importer = importer
        self._inputs = [importer.lookup(name) if name else None for name in proto.input]
        self.num_outputs = len(proto.output)

    @property
    def num_inputs(self):
        return len(self._inputs)

    def has(self, i):
        return i < len(self._inputs) and self._inputs[i] is not None

    def known(self, i):
        return self.has(i) and isinstance(self._inputs[i], np.ndarray)

    def tensor(self, v):
        """A value as a tensor of the graph being built (known arrays become constants)."""
        return self._importer.as_tensor(v) if isinstance(v, np.ndarray) else v

    def value(self, i):
        """Input i as the importer holds it: a numpy array when known, else a tensor (None when absent)."""
        return self._inputs[i] if self.has(i) else None

    def x(self, i):
        """Input i as a tensor of the graph being built (None when absent)."""
        if not self.has(i):
            return None
        v = self._symbolic_sizes_refused(i, "a tensor")
        return self._importer.as_tensor(v) if isinstance(v, np.ndarray) else v

    def const(self, i, what=None):
        """Input i as a numpy array; it must be known while importing."""
        if not self.has(i):
            raise Unsupported(f"input {i} ({what or 'operand'}) is missing")
        v = self._symbolic_sizes_refused(i, what or "operand")
        if not isinstance(v, np.ndarray):
            self._importer.needed_constants.add(self.proto.input[i])
            raise NeedsValue(f"input {i} ({what or 'operand'}) must be a constant or computable from "
                             "constants and static shapes; it is computed at run time")
        return v

    def sharding(self, i):
        """How input i, a weight named in load()'s `sharding`, is split over the ranks: "column",
        "row" or None."""
        name = self.proto.input[i] if self.has(i) else None
        how = self._importer.sharding.get(name)
        if how:
            self._importer.sharded.add(name)
        return how

    def ints(self, i, what=None):
        return [int(v) for v in np.asarray(self.const(i, what)).reshape(-1)]

    def sizes(self, i, what=None):
        """Input i, a shape operand, as ints and the symbolic Sizes it holds (converters/sizes.py)."""
        v = self._inputs[i] if self.has(i) else None
        return entries(v) if isinstance(v, Sizes) else self.ints(i, what)

    def collection(self, i, kind, what=None):
        """Input i as the Sequence or Optional (`kind`) it must be."""
        v = self._inputs[i] if self.has(i) else None
        if not isinstance(v, kind):
            self._kind_refused(i, what, v, kind.__name__.lower())
        return v

    def _kind_refused(self, i, what, v, wanted):
        got = "missing" if v is None else f"a {type(v).__name__.lower()}" if is_collection(v) else "a tensor"
        raise Unsupported(f"input {i} ({what or 'operand'}) is {got}, where {wanted} is expected")

    def _symbolic_sizes_refused(self, i, what):
        """Input i, unless it holds symbolic sizes where only an ordinary value will do (or a
        sequence or optional where a tensor must be)."""
        v = self._inputs[i]
        if is_collection(v):
            self._kind_refused(i, what, v, "a tensor")
        if isinstance(v, Sizes):
            raise NeedsShape(f"input {i} ({what}) holds sizes of symbolic dimensions {v.values.tolist()}: "
                             "its value waits for a run's input shapes (or give them with load(input_shapes=...))")
        return v

    def shape(self, i):
        v = self._inputs[i]
        if is_collection(v):
            self._kind_refused(i, None, v, "a tensor")
        return tuple(v.shape) if isinstance(v, np.ndarray) else v.shape

    def rank(self, i):
        return len(self.shape(i))

    def dtype(self, i):
        v = self._inputs[i]
        if is_collection(v):
            self._kind_refused(i, None, v, "a tensor")
        return _dtypes.from_numpy(v.dtype) if isinstance(v, np.ndarray) else v.dtype

    def attr(self, name, default=None):
        return self.attrs.get(name, default)

    def subgraph(self, name, inline=False):
        return self._importer.subgraph_function(self.attrs[name], inline)

    def describe(self):
        label = f" '{self.proto.name}'" if self.proto.name else ""
        return f"{self.op_type}{label} (outputs {', '.join(self.proto.output)})"


def single_assignment(graph):
    """What breaks ONNX's rule that every name in a graph has one definition (ONNX Runtime
    refuses the model): two graph inputs, two initializers, or two node outputs of one name, or a
    node output that an input or initializer defines already. As (where, reason) failures."""
    failures, defined = [], {}
    for kind, names in (("input", [vi.name for vi in graph.input]), ("initializer", [i.name for i in graph.initializer])):
        seen = set()
        for name in names:
            if name in seen:
                failures.append((f"{kind} '{name}'", f"two graph {kind}s have this name"))
            seen.add(name)
            defined.setdefault(name, f"the graph {kind}")
    for k, node in enumerate(graph.node):
        label = f"{node.op_type} '{node.name}'" if node.name else f"{node.op_type} (node {k})"
        for name in node.output:
            if name and name in defined:
                failures.append((f"{label} -> {name}", f"'{name}' is defined already, by {defined[name]}"))
            elif name:
                defined[name] = label
    return failures


class Importer(FoldingImporter):
    refused = Unsupported

    def __init__(self, model, input_shapes=None, constants=None, sharding=None, weights=None, max_memory_bytes=None):
        super().__init__(folding_cap(model) if max_memory_bytes is None else max_memory_bytes)
        self.model = model
        self.weights = weights if weights is not None else Weights()
        self.sharding = dict(sharding or {})  # initializer name -> "column" or "row"
        self.sharded = set()  # the names a MatMul or Gemm took as its weight
        self.opset = self._opset(model)
        self.input_shapes = dict(input_shapes or {})
        self.given_constants = {k: np.asarray(v) for k, v in (constants or {}).items()}
        self.needed_constants = set()
        self.values = {}
        self.failures = []
        self.waiting = 0  # failures that are operands known only at run time (NeedsValue)
        self.waits_for_shapes = False  # one of them is a symbolic size (NeedsShape)

    @staticmethod
    def _opset(model):
        versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
        if not versions:  # no default-domain op should be in it; read any as opset 18 defines it
            return VERIFIED_OPSET
        opset = versions[0]
        if not MIN_OPSET <= opset <= MAX_OPSET:
            raise ImportFailed(model.graph.name, [("model", f"opset {opset} is outside the supported "
                                                            f"{MIN_OPSET}..{MAX_OPSET}")])
        return opset

    def lookup(self, name):
        if name not in self.values:
            raise Unsupported(f"value '{name}' is used before it is defined")
        return self.values[name]

    def _run(self, builder):
        self._builder = builder
        graph = self.model.graph
        self.failures.extend(single_assignment(graph))
        for index, init in enumerate(graph.initializer):
            self.values[init.name] = self._initializer(init, index)
        for sparse in graph.sparse_initializer:
            self.failures.append((f"sparse initializer '{sparse.values.name}'", "sparse tensors are not supported"))
            self.values[sparse.values.name] = POISONED
        declared = {vi.name: vi for vi in graph.input}
        for option, given in (("constants", self.given_constants), ("input_shapes", self.input_shapes)):
            unknown = sorted(set(given) - set(declared))
            if unknown:
                raise ImportFailed(graph.name or "model", [(option, f"the model has no input named {', '.join(unknown)}")])
        for name, value in self.given_constants.items():
            if kind_of(declared[name].type) != "tensor":
                raise ImportFailed(graph.name or "model", [(f"constants['{name}']", "freezes tensors; this input is a "
                                                            f"{kind_of(declared[name].type)}")])
            # A frozen input keeps the element type the model declares for it.
            try:
                elem_type = declared[name].type.tensor_type.elem_type
                self.values[name] = np.asarray(value, dtype=_dtypes.numpy_dtype(_dtypes.esg_dtype(elem_type)))
            except _dtypes.UnsupportedType as e:
                self.failures.append((f"constants['{name}']", str(e)))
                self.values[name] = POISONED
        for vi in graph.input:
            if vi.name not in self.values:
                self.values[vi.name] = self._graph_input(builder, vi)
        self._check_sharding(graph)
        self.convert_nodes(graph.node)
        for name in sorted(set(self.sharding) - self.sharded):
            self.failures.append((f"sharding['{name}']", "no MatMul or Gemm reads it as its weight (input B)"))
        if not self.failures:
            outputs = [self._result(vi.name) for vi in graph.output]
        if self.failures:
            raise ImportFailed(graph.name or "model", self.failures, self._inputs_behind(self.needed_constants),
                               waits_for_values=self.waiting == len(self.failures), waits_for_shapes=self.waits_for_shapes)
        # A sequence output stands for its elements, an optional one for its value, if any.
        self.output_layouts = [layout_of(v) for v in outputs]
        self.output_names = [name for vi, v in zip(graph.output, outputs) for name in flat_names(vi.name, v)]
        if outputs and not self.output_names:
            raise ImportFailed(graph.name or "model", [("outputs", "every output is an empty sequence or optional: "
                                                                   "the graph would compute nothing")])
        return [self.as_tensor(v) if isinstance(v, np.ndarray) else v for v in (t for out in outputs for t in flatten(out))]

    def _check_sharding(self, graph):
        initializers = {init.name for init in graph.initializer}
        for name, how in self.sharding.items():
            if how not in ("column", "row"):
                raise ImportFailed(graph.name or "model", [(f"sharding['{name}']", f"is {how!r}: say 'column' or 'row'")])
            if name not in initializers:
                raise ImportFailed(graph.name or "model", [(f"sharding['{name}']", "the model has no initializer of that name")])

    def _inputs_behind(self, names):
        """The graph inputs the values `names` are computed from: given with constants=, they
        would make those values known. Shape and Size read no data, so the walk stops there."""
        graph = self.model.graph
        producer = {o: node for node in graph.node for o in node.output}
        inputs = {vi.name for vi in graph.input if kind_of(vi.type) == "tensor"}  # what constants= can freeze
        found, seen, todo = set(), set(), list(names)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in inputs:
                found.add(name)
            elif name in producer and producer[name].op_type not in ("Shape", "Size"):
                todo.extend(i for i in producer[name].input if i)
        return found

    def _initializer(self, init, index=None):
        """The value of an initializer: the main graph's `index`th, read by self.weights, or a
        body's (index None), whose data is in its message."""
        if any(d < 0 for d in init.dims):  # numpy would read -1 as "the rest"
            self.failures.append((f"initializer '{init.name}'", f"has dims {list(init.dims)}: a dimension is negative"))
            return POISONED
        try:
            _dtypes.esg_dtype(init.data_type)
            array = numpy_helper.to_array(init) if index is None else self.weights.array(index, init)
            if init.data_type == onnx.TensorProto.BFLOAT16:
                # numpy_helper reads bf16 as its float values; the graph keeps them as bf16.
                return _C.ops.cast(_C.constant(array.astype(np.float32)), _C.bf16)
            return array
        except _dtypes.UnsupportedType as e:
            self.failures.append((f"initializer '{init.name}'", str(e)))
            return POISONED
        except _C.FormatError:  # external data that is not where it says: the file is refused, as any bad file
            raise
        except (ValueError, TypeError) as e:  # numpy_helper's: data that does not fill the dims, an unknown type
            self.failures.append((f"initializer '{init.name}'", f"malformed: {e}"))
            return POISONED

    def _graph_input(self, builder, vi):
        kind = kind_of(vi.type)
        if kind in ("sequence", "optional"):
            return self._collection_input(builder, vi, kind)
        if kind != "tensor":
            self.failures.append((f"input '{vi.name}'", f"a {kind} input is not supported (tensors, sequences and optionals are)"))
            return POISONED
        t = vi.type.tensor_type
        try:
            dtype = _dtypes.esg_dtype(t.elem_type)
        except _dtypes.UnsupportedType as e:
            self.failures.append((f"input '{vi.name}'", str(e)))
            return POISONED
        if vi.name in self.input_shapes:
            dims = list(self.input_shapes[vi.name])
        elif not t.HasField("shape"):
            self.failures.append((f"input '{vi.name}'", "has no rank; give it with input_shapes="))
            return POISONED
        else:
            dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or f"{vi.name}_{i}")
                    for i, d in enumerate(t.shape.dim)]
        return builder.input(vi.name, dtype, dims)

    def _collection_input(self, builder, vi, kind):
        """A sequence input as its elements, inputs `name[0]`, `name[1]`, ... of the shapes
        input_shapes gives (a list of shapes); an optional one as its value, or empty where
        input_shapes gives None. Without input_shapes the graph waits for a run's values."""
        where = f"input '{vi.name}'"
        try:
            dtype = _dtypes.esg_dtype(element_type(vi.type))
        except _dtypes.UnsupportedType as e:
            self.failures.append((where, str(e)))
            return POISONED
        if vi.name not in self.input_shapes:
            self.failures.append((where, f"a {kind}: its elements come with a run (or give their shapes with input_shapes=)"))
            self.waiting += 1
            self.waits_for_shapes = True
            return POISONED
        given = self.input_shapes[vi.name]
        inner = vi.type.optional_type.elem_type if kind == "optional" else vi.type
        if kind == "optional" and given is None:
            return Optional(None)
        try:
            if kind_of(inner) == "sequence":
                value = Sequence([builder.input(f"{vi.name}[{k}]", dtype, list(dims)) for k, dims in enumerate(given)], dtype)
            else:
                value = builder.input(vi.name, dtype, list(given))
        except TypeError:
            shape = "a list of shapes" if kind_of(inner) == "sequence" else "a shape"
            self.failures.append((where, f"input_shapes gives {given!r}; a {describe(vi.type)} takes {shape}"))
            return POISONED
        return Optional(value) if kind == "optional" else value

    def convert_nodes(self, nodes):
        for proto in nodes:
            self._convert(proto)

    def _convert(self, proto):
        # Ops of other domains (ONNX Runtime's com.microsoft) are keyed "<domain>.<op type>".
        standard = proto.domain in ("", "ai.onnx")
        convert = CONVERTERS.get(proto.op_type if standard else f"{proto.domain}.{proto.op_type}")
        if convert is None:
            if standard:
                return self._fail(proto, "no converter for this op type")
            known = sorted(k.rsplit(".", 1)[1] for k in CONVERTERS if k.startswith(proto.domain + "."))
            return self._fail(proto, f"domain '{proto.domain}' is not supported" + (
                f" beyond {', '.join(known)}" if known else ""))
        newer = too_new(proto.op_type, self.opset) if standard else None
        if newer:
            return self._fail(proto, newer)
        try:
            node = Node(self, proto, self.opset)
        except Unsupported as e:
            return self._fail(proto, str(e))
        if any(v is POISONED for v in node._inputs):
            return self._poison(proto)
        # A dequantized constant stays integers in the graph, for the compiler to take into a
        # quantized op (or fold there).
        foldable = proto.op_type != "DequantizeLinear" and proto.op_type not in SEQUENCE_OPS and not any(
            a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in proto.attribute)
        try:
            if any(isinstance(v, Sizes) for v in node._inputs) and proto.op_type in SIZES_CONVERTERS and standard \
                    and all(v is None or isinstance(v, (np.ndarray, Sizes)) for v in node._inputs):
                try:
                    outputs = SIZES_CONVERTERS[proto.op_type](node)
                except Unsupported:
                    raise
                except Exception as e:  # numpy's refusal of sizes the model combines oddly: the run's shapes decide
                    raise NeedsShape(f"sizes of symbolic dimensions: {type(e).__name__}: {e}") from e
            elif foldable and node._inputs and all(v is None or isinstance(v, np.ndarray) for v in node._inputs):
                try:
                    outputs = self.fold(lambda: convert(node))
                except (_C.DTypeError, _C.LimitError):  # a bf16 result, or one beyond the cap: the graph computes it
                    outputs = convert(node)
            else:
                outputs = convert(node)
        except (Unsupported, _C.Error, _dtypes.UnsupportedType) as e:
            self.waiting += isinstance(e, NeedsValue)
            self.waits_for_shapes = self.waits_for_shapes or isinstance(e, NeedsShape)
            return self._fail(proto, str(e))
        except Exception as e:  # a converter's own bug: still one report, with the exception's type
            return self._fail(proto, f"{type(e).__name__}: {e}")
        outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        if len(outputs) < len([o for o in proto.output if o]):
            return self._fail(proto, f"converter produced {len(outputs)} output(s)")
        for name, value in zip(proto.output, outputs):
            if name:
                self.values[name] = value

    def _fail(self, proto, reason):
        label = f" '{proto.name}'" if proto.name else ""
        self.failures.append((f"{proto.op_type}{label} -> {', '.join(o for o in proto.output if o)}", reason))
        self._poison(proto)

    def _poison(self, proto):
        for name in proto.output:
            if name:
                self.values[name] = POISONED

    def subgraph_function(self, graph, inline=False):
        """An ONNX subgraph as a Python function of its formal inputs; outer-scope values are
        captured by name. As an if_/while_ body (the default) it returns tensors and makes its
        constants inside the body; `inline` converts it into the current scope and keeps
        values known while importing as they are."""
        def body(*params):
            saved_values, saved_constants = dict(self.values), self._constants
            if not inline:
                self._constants = {}  # a body's constants belong to the body
            try:
                failures_before, waiting_before = len(self.failures), self.waiting
                self.failures.extend(single_assignment(graph))
                for vi, p in zip(graph.input, params):
                    self.values[vi.name] = p
                for init in graph.initializer:
                    self.values[init.name] = self._initializer(init)
                self.convert_nodes(graph.node)
                # sizes of symbolic dimensions leave an inlined body as they are, and the scope outside reads them
                results = [self._result(vi.name, sizes=inline) for vi in graph.output]
                if len(self.failures) > failures_before:
                    why = f"its subgraph '{graph.name}' has unsupported nodes (listed above)"
                    if self.waiting - waiting_before == len(self.failures) - failures_before:  # each waits for a run's values
                        raise (NeedsShape if self.waits_for_shapes else NeedsValue)(why)
                    raise Unsupported(why)
                if inline:
                    return results
                if any(is_collection(v) for v in results):
                    raise Unsupported(f"its subgraph '{graph.name}' gives a sequence or an optional, which a loop or branch "
                                      "computed at run time cannot carry")
                return [self.as_tensor(v) if isinstance(v, np.ndarray) else v for v in results]
            finally:
                self.values, self._constants = saved_values, saved_constants
        return body

    def _result(self, name, sizes=False):
        """The value a graph (or body) gives as output `name`; `sizes`: symbolic Sizes may be one."""
        if name not in self.values:
            self.failures.append((f"output '{name}'", "no node produces it"))
            return POISONED
        if self.values[name] is None:
            self.failures.append((f"output '{name}'", "its node leaves this optional output out"))
            return POISONED
        if isinstance(self.values[name], Sizes) and not sizes:  # a graph has no op that reads a tensor's sizes
            self.failures.append((f"output '{name}'", "sizes of symbolic dimensions: known only from a run's input shapes"))
            self.waiting += 1
            self.waits_for_shapes = True
            return POISONED
        return self.values[name]


_ELEMENT_BYTES = {k: 2 if v == _C.bf16 else _dtypes.numpy_dtype(v).itemsize for k, v in _dtypes.ONNX_TO_ESG.items()}

# What folding at import may hold beyond the weights: shape arithmetic needs bytes, and a
# constant transform of weights (a cast, a transpose) the weights' size; see folding_cap.
FOLDING_BASE_BYTES = 256 << 20


def folding_cap(model):
    """The default memory folding at import may hold: 256 MiB, plus twice the bytes of the main
    graph's initializers (a chain of two transforms of every weight). A fold beyond it is left
    to the compiled graph, where the run-time cap (compile's max_memory_bytes) applies: a small
    file cannot make the import allocate gigabytes, and no model loses its import, only the
    early folding of an unusually large constant."""
    weights = 0
    for t in model.graph.initializer:
        if any(d < 0 for d in t.dims):
            continue  # refused by name when it is read
        size = int(np.prod(t.dims, dtype=object)) if t.dims else 1
        weights += size * _ELEMENT_BYTES.get(t.data_type, 8)
    return FOLDING_BASE_BYTES + 2 * weights


def load_graph(model, input_shapes=None, constants=None, name=None, sharding=None, weights=None, max_memory_bytes=None):
    if max_memory_bytes is not None and (isinstance(max_memory_bytes, bool) or not isinstance(max_memory_bytes, int)
                                         or max_memory_bytes < 0):
        raise _C.InvalidArgumentError(f"load: max_memory_bytes must be 0 (no bound) or more, got {max_memory_bytes!r}")
    return import_graph(model, input_shapes, constants, name, sharding, weights, max_memory_bytes)[0]


def import_graph(model, input_shapes=None, constants=None, name=None, sharding=None, weights=None, max_memory_bytes=None):
    """load_graph's Graph, and the layouts of its outputs (_sequences.py): what the graph's flat
    outputs stand for, where the model gives sequences or optionals."""
    importer = Importer(model, input_shapes, constants, sharding, weights, max_memory_bytes)
    with _C.GraphBuilder(name or model.graph.name or "onnx") as b:
        outputs = importer.run(b)
        claimed = {n for vi in model.graph.input for n in flat_names(vi.name, importer.values[vi.name])}
        claimed.update(importer.given_constants, importer.constant_names())
        named = name_outputs(outputs, importer.output_names, claimed)
    return b.build(named), importer.output_layouts
