"""Walks a TensorFlow GraphDef and rebuilds it through esgraph's builder API.

Each TF tensor ("node:k") resolves to an esgraph Tensor, or, when it is known while importing
(Const nodes and what is computed only from them), to a numpy array, which folding computes
with esgraph's own kernels (_folding.py). Known values are what lets TF's tensor-valued operands
(Reshape's shape, Mean's axes, Pad's paddings, ...) become the static attributes esgraph's ops
take.

Layout: TF's convolutions and pools take NHWC; esgraph's take NCHW, and its compiler chooses the
physical format (blocked or channels last) for them. A 4-D value a convolution makes stays NCHW
(an `Nchw`), through the ops that do not care about the order of axes (elementwise ops, their
per-channel operands, batch norm, pads, means over the spatial axes, channel concatenations), and
goes back to TF's order only where an op reads the order (a Reshape, a graph output). So an NHWC
model costs one transpose at its input and one at its output, not two around every convolution.

Conversion goes on past a failing node, skipping only what depends on it, so that one error lists
every node that cannot be imported.
"""
import numpy as np

from .. import _C
from .._dtypes import from_numpy
from .._folding import FoldingImporter
from .._frontend import ImportFailed, NeedsShape, name_outputs
from .._sizes import Sizes, entries
from . import _functions, _tensors, _v1_cond, _v1_loop
from ._refs import POISONED, parse_ref, tensor_key
from ._layout import NCHW_TO_NHWC, NHWC_TO_NCHW, Nchw
from .converters import CONVERTERS, SIZES_CONVERTERS, NeedsValue, Unsupported

ops = _C.ops

# Ops that compute nothing: their output is their input (the first), or they have none.
_PASS_THROUGH = {"Identity", "StopGradient", "Snapshot", "PreventGradient", "CheckNumerics", "EnsureShape",
                 "ReadVariableOp", "Enter"}  # an Enter left in the graph is a v1 loop's read-only value
_NOTHING = {"NoOp", "Assert", "SaveV2", "RestoreV2"}

# What folding may hold beyond the constants: shape arithmetic and transforms of weights.
FOLDING_BASE_BYTES = 256 << 20


def attr_value(a):
    """An AttrValue as Python: str for s (TF's strings are bytes; the ones ops read are ASCII),
    int, float, bool, a type number, dims for a shape, an array for a tensor, lists of those."""
    kind = a.WhichOneof("value")
    if kind == "s":
        return a.s.decode("utf-8", "replace")
    if kind in ("i", "f", "b", "type", "placeholder"):
        return getattr(a, kind)
    if kind == "shape":
        return _tensors.tensor_dims(a.shape)
    if kind == "tensor":
        return _tensors.to_array(a.tensor)
    if kind == "func":
        return a.func.name
    if kind == "list":
        lst = a.list
        for field in ("i", "f", "b", "type"):
            if len(getattr(lst, field)):
                return list(getattr(lst, field))
        if len(lst.s):
            return [s.decode("utf-8", "replace") for s in lst.s]
        if len(lst.shape):
            return [_tensors.tensor_dims(s) for s in lst.shape]
        return []
    return None


class Node:
    """What a converter sees of one TF node: its attributes, and its inputs as esgraph tensors in
    TF's layout (`x(i)`), in NCHW (`nchw(i)`) or as import-time constants (`const(i)`)."""

    def __init__(self, importer, proto, inputs):
        self.proto = proto
        self.op = proto.op
        self.name = proto.name
        self._attrs = proto.attr
        self.importer = importer  # converters/control.py converts bodies with it
        self._inputs = inputs

    @property
    def num_inputs(self):
        return len(self._inputs)

    def attr(self, name, default=None):
        if name not in self._attrs:
            return default
        try:
            return attr_value(self._attrs[name])
        except (ValueError, _tensors.UnsupportedType) as e:
            raise Unsupported(f"attribute '{name}': {e}") from None

    def value(self, i):
        return self._inputs[i]

    def known(self, i):
        return isinstance(self._inputs[i], np.ndarray)

    def is_nchw(self, i):
        return isinstance(self._inputs[i], Nchw)

    def const(self, i, what=None):
        v = self._symbolic_sizes_refused(i, what or "operand")
        if not isinstance(v, np.ndarray):
            raise NeedsValue(f"input {i} ({what or 'operand'}) must be a constant or computable from constants; "
                             "it is computed at run time")
        return v

    def ints(self, i, what=None):
        return [int(v) for v in self.const(i, what).reshape(-1)]

    def sizes(self, i, what=None):
        """Input i, a shape operand, as ints and the symbolic Sizes it holds (esgraph/_sizes.py)."""
        v = self._inputs[i]
        return entries(v) if isinstance(v, Sizes) else self.ints(i, what)

    def _symbolic_sizes_refused(self, i, what):
        v = self._inputs[i]
        if isinstance(v, Sizes):
            raise NeedsShape(f"input {i} ({what}) holds sizes of symbolic dimensions {v.values.tolist()}: "
                             "known only at run time (give the inputs' shapes with shapes=)")
        return v

    def x(self, i):
        """Input i in TF's own layout."""
        return self.importer.tf_layout(self._symbolic_sizes_refused(i, "a tensor"))

    def nchw(self, i):
        """Input i, a 4-D NHWC value, as NCHW."""
        return self.importer.nchw(self._inputs[i])

    def shape(self, i):
        """Input i's shape in TF's layout (ints, and symbols for dynamic sizes)."""
        v = self._inputs[i]
        if isinstance(v, Nchw):
            n, c, h, w = v.tensor.shape
            return (n, h, w, c)
        return tuple(v.shape)

    def rank(self, i):
        return len(self.shape(i))

    def dtype(self, i):
        v = self._inputs[i]
        if isinstance(v, (np.ndarray, Sizes)):
            return from_numpy(v.dtype)
        return (v.tensor if isinstance(v, Nchw) else v).dtype

    def tensor(self, v):
        """A value (array, tensor or Nchw) as a tensor of the graph being built, in TF's layout."""
        return self.importer.tf_layout(v)


class Importer(FoldingImporter):
    refused = Unsupported

    def __init__(self, graph_def, name, inputs=None, outputs=None, shapes=None, max_memory_bytes=None, resources=None,
                 names=None):
        super().__init__(FOLDING_BASE_BYTES + 2 * _constant_bytes(graph_def) if max_memory_bytes is None else max_memory_bytes)
        self.graph_def = graph_def
        self.name = name
        self.nodes = {}
        self.failures = []
        for node in graph_def.node:
            if node.name in self.nodes:
                self.failures.append((f"node '{node.name}'", "two nodes have this name"))
            self.nodes[node.name] = node
        self.nodes, self.v1_loops, self._malformed_loops = _v1_loop.rewrite(self.nodes)  # TF1 loops, one node each
        self.functions = {f.signature.name: f for f in graph_def.library.function}
        self._calls = []  # the functions being converted, innermost last (recursion is refused)
        self.shapes = {tensor_key(k): list(v) for k, v in (shapes or {}).items()}
        # By default the graph's Placeholders, in its order, whether the outputs read them or not.
        # (TF's lowering of a while loop leaves Placeholders of its own, unused_control_flow_input.)
        self.input_keys = ([tensor_key(k) for k in inputs] if inputs is not None
                           else [f"{n.name}:0" for n in graph_def.node
                                 if n.op == "Placeholder" and not n.name.startswith("unused_control_flow_input")])
        self.output_refs = list(outputs) if outputs is not None else self._sinks()
        # Values from outside the graph, by node: a SavedModel's variables (VarHandleOp), a TF.js
        # model's weights (Const nodes without a value).
        self.resources = dict(resources or {})
        self.names = dict(names or {})  # tensor key -> the name the graph gives it (a signature's keys)
        self.values = {}
        # v1 conditionals (_v1_cond.py): what a Switch's branch computes carries its guard, the
        # (predicate, branch) pairs it lies under, outermost first; by tensor and by node.
        self.guards, self.node_guards = {}, {}
        self._cycles = set()  # nodes found on a cycle
        self._cut = set()  # nodes whose values are given: the walk stops there
        self.input_tensors = []
        self._layouts = {}  # id(value) -> (value, its other layout's tensor)

    def _sinks(self):
        """The default outputs: output 0 of every node no other node reads, but for those that
        compute nothing (NoOp, Const, Placeholder)."""
        read = {parse_ref(r)[0] for node in self.graph_def.node for r in node.input}
        return [n.name for n in self.graph_def.node
                if n.name not in read and n.op not in _NOTHING | {"Const", "Placeholder", "PlaceholderWithDefault"}]

    def _run(self, builder):
        self._builder = builder
        self._cut = {key.rsplit(":", 1)[0] for key in self.input_keys}
        for key in self.input_keys:
            name = key.rsplit(":", 1)[0]
            if name not in self.nodes:
                raise ImportFailed(self.name, [("inputs", f"the graph has no node named '{name}'")])
            self.values[key] = self._input(builder, self.nodes[name], key)
        for ref in self.output_refs:
            if parse_ref(ref)[0] not in self.nodes:
                raise ImportFailed(self.name, [("outputs", f"the graph has no node named '{parse_ref(ref)[0]}'")])
        if not self.output_refs:
            raise ImportFailed(self.name, [("outputs", "the graph has no node whose output nobody reads: name them with outputs=")])
        order = self._order([parse_ref(r)[0] for r in self.output_refs])
        reached = {n.name for n in order} | self._cycles
        self.failures.extend(sorted({why for enter, why in self._malformed_loops.items() if enter in reached}))
        for node in order:
            self._convert(node)
        outputs = [self.values.get(tensor_key(r), POISONED) for r in self.output_refs]
        for ref, v in zip(self.output_refs, outputs):
            if isinstance(v, Sizes):  # a graph has no op that reads a tensor's sizes
                self.failures.append((f"output '{ref}'", "sizes of symbolic dimensions: known only from a run's input shapes"))
        for ref, v in zip(self.output_refs, outputs):
            if tensor_key(ref) not in self.values and parse_ref(ref)[0] in self.nodes and self.nodes[parse_ref(ref)[0]].op not in _NOTHING:
                self.failures.append((f"output '{ref}'", "its node has no such output"))
        if self.failures:
            raise ImportFailed(self.name, self.failures)
        return [self.tf_layout(v) for v in outputs]

    def _order(self, names):
        """The nodes the outputs depend on, each after its inputs (a GraphDef need not list them
        so); a node on a cycle is a failure, once."""
        order, state, stack = [], {}, [(n, False) for n in reversed(names)]
        while stack:
            name, done = stack.pop()
            if done:
                state[name] = 2
                order.append(self.nodes[name])
                continue
            if state.get(name) == 2:
                continue
            if state.get(name) == 1:
                if name not in self._cycles:
                    self.failures.append((f"node '{name}'", "is part of a cycle"))
                self._cycles.add(name)
                continue
            if name not in self.nodes:
                continue  # reported by the reader
            # an input, a value a loop's condition or body is given, or one converted already
            if name in self._cut or f"{name}:0" in self.values:
                state[name] = 2
                continue
            state[name] = 1
            stack.append((name, True))
            for ref in reversed(self.nodes[name].input):
                dep = parse_ref(ref)[0]
                if state.get(dep) != 2:
                    stack.append((dep, False))
        return order

    def _input(self, builder, node, key):
        dtype_number = node.attr["dtype"].type if "dtype" in node.attr else node.attr["T"].type if "T" in node.attr else 0
        try:
            dtype = _tensors.esg_dtype(dtype_number)
        except _tensors.UnsupportedType as e:
            self.failures.append((f"input '{node.name}'", str(e)))
            return POISONED
        if key in self.shapes:
            dims = self.shapes[key]
        else:
            dims = _tensors.tensor_dims(node.attr["shape"].shape) if "shape" in node.attr else None
            if dims is None and "_output_shapes" in node.attr and len(node.attr["_output_shapes"].list.shape):
                dims = _tensors.tensor_dims(node.attr["_output_shapes"].list.shape[0])
            if dims is None:
                self.failures.append((f"input '{node.name}'", "has no known rank; give its shape with shapes="))
                return POISONED
        name = self.names.get(key, output_name(key))  # a signature's key, or the Placeholder's name
        dims = [d if not isinstance(d, int) or d >= 0 else f"{name}_{i}" for i, d in enumerate(dims)]
        tensor = builder.input(name, dtype, dims)
        self.input_tensors.append(tensor)
        return tensor

    def _convert(self, proto):
        if proto.op in ("Switch", "Merge"):
            return _v1_cond.convert(self, proto)
        if proto.op == _v1_loop.OP and proto.name in self.v1_loops:
            self._v1_while(proto)
        else:
            self._convert_node(proto)
        guard = _v1_cond.guard_of(self, proto)
        if guard:
            self.node_guards[proto.name] = guard
            k = 0
            while f"{proto.name}:{k}" in self.values:
                self.guards[f"{proto.name}:{k}"] = guard
                k += 1

    def _convert_node(self, proto):
        refs = [r for r in proto.input if not r.startswith("^")]
        missing = [r for r in refs if tensor_key(r) not in self.values and parse_ref(r)[0] not in self.nodes]
        if missing:
            return self._fail(proto, f"reads '{missing[0]}', which no node of the graph makes")
        inputs = [self.values.get(tensor_key(r), POISONED) for r in refs]
        if any(v is POISONED for v in inputs):
            return self._poison(proto)
        if proto.op == "Placeholder":
            return self._fail(proto, "a Placeholder the outputs read, which inputs= does not name")
        if proto.op in _PASS_THROUGH or proto.op == "PlaceholderWithDefault":  # its default, unless it is an input
            self.values[f"{proto.name}:0"] = inputs[0]
            return
        if proto.op == "IdentityN":
            for k, v in enumerate(inputs):
                self.values[f"{proto.name}:{k}"] = v
            return
        if proto.op in _NOTHING:
            return
        if proto.op in ("VarHandleOp", "Const") and proto.name in self.resources:
            self.values[f"{proto.name}:0"] = self.resources[proto.name]
            return
        if proto.op == "VarHandleOp":
            return self._fail(proto, "a variable the graph's object graph does not bind (only a SavedModel's are)")
        if proto.op == "Const":
            try:
                tensor = proto.attr["value"].tensor
                left = self.max_memory_bytes - self.folded_bytes if self.max_memory_bytes else None
                array = _tensors.to_array(tensor, left)
                if not tensor.tensor_content:  # a listed value spread over its shape: memory the file did not hold
                    self.folded_bytes += array.nbytes
                self.values[f"{proto.name}:0"] = array
            except (ValueError, _tensors.UnsupportedType) as e:
                self._fail(proto, f"its value: {e}")
            return
        if proto.op in ("PartitionedCall", "StatefulPartitionedCall"):
            return self._call(proto, inputs)
        convert = CONVERTERS.get(proto.op)
        if convert is None:
            return self._fail(proto, "no converter for this op")
        node = Node(self, proto, inputs)
        try:
            if any(isinstance(v, Sizes) for v in inputs) and proto.op in SIZES_CONVERTERS \
                    and all(isinstance(v, (np.ndarray, Sizes)) for v in inputs):
                try:
                    outputs = SIZES_CONVERTERS[proto.op](node)
                except Unsupported:
                    raise
                except Exception as e:  # numpy's refusal of sizes the graph combines oddly
                    raise NeedsShape(f"sizes of symbolic dimensions: {type(e).__name__}: {e}") from e
            elif inputs and all(isinstance(v, np.ndarray) for v in inputs):
                try:
                    outputs = self.fold(lambda: _in_tf_layout(self, convert(node)))
                except (_C.DTypeError, _C.LimitError):  # a bf16 result, or one beyond the cap: the graph computes it
                    outputs = convert(node)
            else:
                outputs = convert(node)
        except (Unsupported, _C.Error, _tensors.UnsupportedType) as e:
            return self._fail(proto, str(e))
        except Exception as e:  # a converter's own bug: still one report, with the exception's type
            return self._fail(proto, f"{type(e).__name__}: {e}")
        outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        for k, value in enumerate(outputs):
            self.values[f"{proto.name}:{k}"] = value

    def _call(self, proto, inputs):
        """A function call, converted inline."""
        try:
            outputs = self.function(proto.attr["f"].func.name, inputs)
        except Unsupported as e:
            return self._fail(proto, str(e))
        for k, value in enumerate(outputs):
            self.values[f"{proto.name}:{k}"] = value

    def function(self, name, inputs, body=False):
        """The results of function `name` of the library on `inputs`, its nodes converted in a
        scope of their own. As a body of an if or a while (`body`), its constants are made
        inside the body and its results are tensors in TF's layout. Unsupported when the
        function is missing or recursive, or when one of its nodes fails (each failure is
        listed, named with the function)."""
        fdef = self.functions.get(name)
        if fdef is None:
            raise Unsupported(f"calls '{name}', which the graph's function library does not define")
        if name in self._calls:
            raise Unsupported(f"calls '{name}' within itself")
        if len(inputs) != len(fdef.signature.input_arg):
            raise Unsupported(f"gives {len(inputs)} inputs to '{name}', which takes {len(fdef.signature.input_arg)}")
        try:
            nodes, results = _functions.body(fdef)
        except _functions.UnknownOutput as e:
            raise Unsupported(f"its function '{name}' names an unknown output {e}") from None
        outer = self.nodes, self.values, len(self.failures), self._constants, self._layouts, self._cut
        self.nodes, self._cut = {n.name: n for n in nodes}, set()
        self.values = {f"{a.name}:0": v for a, v in zip(fdef.signature.input_arg, inputs)}
        if body:  # a body's constants and transposes belong to the body
            self._constants, self._layouts = {}, {}
        self._calls.append(name)
        try:
            for node in self._order([parse_ref(r)[0] for r in results]):
                self._convert(node)
            outputs = [self.values.get(tensor_key(r), POISONED) for r in results]
            if body and not any(v is POISONED for v in outputs):
                outputs = [self.tf_layout(v) for v in outputs]
        finally:
            self.nodes, self.values, self._cut = outer[0], outer[1], outer[5]
            if body:
                self._constants, self._layouts = outer[3], outer[4]
            self._calls.pop()
        for k in range(outer[2], len(self.failures)):  # what failed inside, named with the function
            where, why = self.failures[k]
            self.failures[k] = (f"{where} (in function '{name}')", why)
        if any(v is POISONED for v in outputs):
            raise Unsupported(f"its function '{name}' has nodes that cannot be imported (listed)")
        return outputs

    def _v1_while(self, proto):
        """A TF1 loop (_v1_loop.py) as esgraph's while."""
        missing = [r for r in proto.input if tensor_key(r) not in self.values]
        if missing:
            return self._fail(proto, f"its loop starts from '{missing[0]}', which no node of the graph makes")
        values = [self.values[tensor_key(r)] for r in proto.input]
        if any(v is POISONED for v in values):
            return self._poison(proto)
        loop = self.v1_loops[proto.name]

        def condition(*current):
            (c,) = self.subgraph([loop.loop_cond.input[0]], {f"{m.name}:0": v for m, v in zip(loop.merges, current)})
            return ops.reshape(c, []) if c.ndim else c

        def body(*current):
            return self.subgraph([n.input[0] for n in loop.nexts], {f"{s.name}:1": v for s, v in zip(loop.switches, current)})
        try:
            outputs = ops.while_([self.tf_layout(v) for v in values], condition, body)
        except (Unsupported, _C.Error) as e:
            return self._fail(proto, str(e))
        for k, value in enumerate(outputs if isinstance(outputs, (list, tuple)) else [outputs]):
            self.values[f"{proto.name}:{k}"] = value

    def subgraph(self, refs, given):
        """Tensors `refs` as tensors in TF's layout, their nodes converted in a scope of their
        own where the tensors of `given` ({key: value}) have those values and the graph is cut:
        a TF1 loop's condition or body. Unsupported when one of its nodes fails (listed)."""
        outer = self.values, self._cut, self._constants, self._layouts, len(self.failures)
        self.values = {**self.values, **given}
        self._cut = self._cut | {key.rsplit(":", 1)[0] for key in given}
        self._constants, self._layouts = {}, {}
        try:
            for node in self._order([parse_ref(r)[0] for r in refs]):
                self._convert(node)
            results = [self.values.get(tensor_key(r), POISONED) for r in refs]
            if len(self.failures) > outer[4] or any(v is POISONED for v in results):
                raise Unsupported("its loop's condition or body has nodes that cannot be imported (listed)")
            return [self.tf_layout(v) for v in results]
        finally:
            self.values, self._cut, self._constants, self._layouts = outer[:4]

    def _fail(self, proto, reason):
        self.failures.append((f"{proto.op} '{proto.name}' -> {proto.name}", reason))
        self._poison(proto)

    def _poison(self, proto):
        # Every output a consumer could name: as many as any reader asks for.
        self.values[f"{proto.name}:0"] = POISONED
        for node in self.nodes.values():
            for r in node.input:
                name, index, control = parse_ref(r)
                if name == proto.name and not control:
                    self.values[f"{name}:{index}"] = POISONED

    def tf_layout(self, v):
        """A value as a tensor in TF's layout: a known array becomes a constant, an NCHW value is
        transposed back once, however many ops read it so."""
        if isinstance(v, np.ndarray):
            return self.as_tensor(v)
        if isinstance(v, Nchw):
            return self._other_layout(v, lambda: ops.transpose(v.tensor, perm=NCHW_TO_NHWC))
        return v

    def nchw(self, v):
        """A 4-D value in TF's NHWC as NCHW: transposed once, however many ops read it so."""
        if isinstance(v, Nchw):
            return v.tensor
        if isinstance(v, np.ndarray):
            return self.as_tensor(np.ascontiguousarray(v.transpose(NHWC_TO_NCHW)))
        if v.ndim != 4:
            raise Unsupported(f"expected a 4-D NHWC value, got shape {v.shape}")
        return self._other_layout(v, lambda: ops.transpose(v, perm=NHWC_TO_NCHW))

    def _other_layout(self, v, make):
        key = (id(v), id(self._builder))
        if key not in self._layouts:
            self._layouts[key] = (v, make())
        return self._layouts[key][1]


def _in_tf_layout(importer, outputs):
    """A folded node's outputs, an NCHW one back in TF's layout (folding yields TF's arrays)."""
    if isinstance(outputs, (list, tuple)):
        return [importer.tf_layout(o) if isinstance(o, Nchw) else o for o in outputs]
    return importer.tf_layout(outputs) if isinstance(outputs, Nchw) else outputs


def _constant_bytes(graph_def):
    total = 0
    for node in graph_def.node:
        if node.op == "Const" and "value" in node.attr:
            t = node.attr["value"].tensor
            total += len(t.tensor_content)
    return total


def import_graph(graph_def, inputs=None, outputs=None, shapes=None, name=None, max_memory_bytes=None, resources=None,
                 names=None):
    if max_memory_bytes is not None and (isinstance(max_memory_bytes, bool) or not isinstance(max_memory_bytes, int)
                                         or max_memory_bytes < 0):
        raise _C.InvalidArgumentError(f"load: max_memory_bytes must be 0 (no bound) or more, got {max_memory_bytes!r}")
    importer = Importer(graph_def, name or "tensorflow", inputs, outputs, shapes, max_memory_bytes, resources, names)
    with _C.GraphBuilder(importer.name) as b:
        tensors = importer.run(b)
        claimed = {t.name for t in importer.input_tensors} | importer.constant_names()
        names = [importer.names.get(tensor_key(r), output_name(tensor_key(r))) for r in importer.output_refs]
        named = name_outputs(tensors, names, claimed)
    return b.build(named)


def output_name(key):
    """The graph's name for TF tensor "node:k": the node's name for output 0, as TF users say it."""
    return key[:-2] if key.endswith(":0") else key
