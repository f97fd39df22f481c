"""Models whose graph depends on the values of some inputs: shape operands (Reshape's shape,
Slice's starts, TopK's k, Expand's shape, ...) that a model takes as inputs or computes from
them, or from the sizes of its inputs' dynamic axes (Shape of one). What ONNX Runtime does: read
those values on the host when a run brings them, and run the graph they fix. Here each set of
values (and of input shapes, where sizes are read) imports and compiles its graph once, and at
most `max_plans` such graphs are kept, the least recently run dropped first."""
import collections
import threading

import numpy as np

from .. import _C
from .._frontend import ImportFailed
from . import _dtypes
from ._importer import import_graph
from ._sequences import kind_of, structure, unflatten


class ValueDependentGraph:
    """An ONNX model whose graph depends on the values of `shape_inputs` (the inputs its shape
    operands are computed from). `esgraph.compile()` of it, or `.compile()`, gives a model that
    takes every input of the ONNX model and imports and compiles the graph for each set of those
    values the first time a run brings it. The rest of the model imports then too: an op it cannot
    import fails that run with `ImportFailed`."""

    def __init__(self, model, shape_inputs, input_shapes=None, constants=None, name=None, by_shapes=False, sharding=None,
                 weights=None, max_memory_bytes=None):
        self.model = model
        self._max_memory_bytes = max_memory_bytes  # folding's, at every import
        self._weights = weights  # the initializers read at the first import, for every later one
        self._sharding = sharding
        self.shape_inputs = tuple(sorted(shape_inputs))
        # by_shapes: the graph also waits for the inputs' shapes (Shape of a dynamic axis)
        self._input_shapes = dict(input_shapes or {})
        self._constants = dict(constants or {})
        self._name = name
        self.input_names = [vi.name for vi in model.graph.input if vi.name not in self._constants]
        # Inputs that are sequences or optionals: a run brings their elements, whose number and
        # shapes fix the graph as shapes do.
        self.collections = {vi.name: vi.type for vi in model.graph.input if kind_of(vi.type) in ("sequence", "optional")
                            and vi.name not in self._constants}
        self.by_shapes = by_shapes or bool(set(self.collections) - set(self._input_shapes))

    def __repr__(self):
        waits = [f"the values of {', '.join(self.shape_inputs)}"] if self.shape_inputs else []
        waits += ["its inputs' shapes"] if self.by_shapes else []
        what = f"its graph waits for {' and '.join(waits)}" if waits else "it gives sequences or optionals"
        return f"<esgraph.onnx.ValueDependentGraph '{self.model.graph.name}': {what}>"

    def checked(self, name, value, what, cast):
        """A shape input's array as the model declares that input: its element type (another one
        only with `cast`, and then only if every value survives), its rank and its fixed sizes,
        as a compiled model checks its inputs; a wrong one would fix another graph silently."""
        declared = next(vi for vi in self.model.graph.input if vi.name == name).type.tensor_type
        dtype = _dtypes.esg_dtype(declared.elem_type)
        want = _dtypes.numpy_dtype(dtype)
        array = np.asarray(value)
        if array.dtype != want:
            converted = array.astype(want) if cast and array.dtype.kind in "biuf" else None
            if converted is None or not np.array_equal(converted, array):
                hint = "" if cast else "; cast=True converts a value that stays the same"
                raise _C.DTypeError(f"{what}: input `{name}` is {array.dtype} (values {array.ravel()[:8].tolist()}), "
                                    f"the model's is {dtype.name}{hint}")
            array = converted
        dims = [d.dim_value if d.HasField("dim_value") else None for d in declared.shape.dim]
        if declared.HasField("shape") and (array.ndim != len(dims) or any(d is not None and d != s for d, s in zip(dims, array.shape))):
            shown = ",".join("?" if d is None else str(d) for d in dims)
            raise _C.ShapeError(f"{what}: input `{name}` is [{shown}], got {list(array.shape)}")
        return array

    def key(self, values):
        """What fixes the graph for a run's `values` ({name: array}, every input)."""
        key = tuple((name, str(values[name].dtype), values[name].shape, values[name].tobytes()) for name in self.shape_inputs)
        return key + (tuple((name, structure(values[name])) for name in self.input_names) if self.by_shapes else ())

    def graph_for(self, values, what="run", cast=False):
        """The esgraph Graph for a run's `values` ({name: array}, every input; a list of arrays
        for a sequence, None for an empty optional). Importing it may show that more inputs
        carry shapes, or that sizes are read: shape_inputs and by_shapes then grow (and key()
        with them). The shape inputs' arrays are checked (checked()) first."""
        return self.import_for(values, what, cast)[0]

    def import_for(self, values, what="run", cast=False):
        """graph_for's Graph, and what its flat outputs stand for (_sequences.unflatten)."""
        while True:
            frozen = {name: self.checked(name, values[name], what, cast) for name in self.shape_inputs}
            shapes = {name: structure(values[name]) for name in self.input_names} if self.by_shapes else self._input_shapes
            try:
                return import_graph(self.model, input_shapes={k: v for k, v in shapes.items() if k not in frozen},
                                  constants={**self._constants, **frozen}, name=self._name, sharding=self._sharding,
                                  weights=self._weights, max_memory_bytes=self._max_memory_bytes)
            except ImportFailed as e:
                more = set(e.needed_constants) - set(self.shape_inputs) - set(self._constants)
                sizes = e.waits_for_shapes and not self.by_shapes
                if not (e.waits_for_values and (more or sizes) and more <= set(values)):
                    raise
                self.shape_inputs = tuple(sorted(set(self.shape_inputs) | more))
                self.by_shapes = self.by_shapes or sizes

    def compile(self, **options):
        """A model over every input, compiling a graph per set of shape input values with `options`
        (esgraph.compile's; `max_plans` also bounds the graphs kept)."""
        return ValueDependentModel(self, options)


class ValueDependentModel:
    """Runs a ValueDependentGraph: each run reads the shape inputs' values, finds (or imports and
    compiles) the graph for them and runs it on the other inputs. A value the graph rejects (a
    negative size, an axis out of range, a reshape that does not fit) raises the error naming the
    op, and the model runs on. As a Model: run and call (with `out` and `cast`), prepare, profile,
    cancel, input_names and output_names, stats and report, and graph and to_dot of the graph run
    last; save is refused by name."""

    def __init__(self, graph, options):
        self._graph = graph
        self._options = dict(options)
        self._max_plans = self._options.get("max_plans", _C.DEFAULT_MAX_PLANS)
        if not isinstance(self._max_plans, int) or self._max_plans < 0:
            raise _C.InvalidArgumentError(f"compile: max_plans must be 0 (no limit) or more, got {self._max_plans!r}")
        self._models = collections.OrderedDict()  # the values' key -> Model, least recently run first
        self._layouts = {}  # the values' key -> what the model's flat outputs stand for
        self._compiled = 0
        self._lock = threading.Lock()  # runs may come from several threads; the graph learns as it imports
        self.input_names = list(graph.input_names)
        self.output_names = [vi.name for vi in graph.model.graph.output]

    def _model_for(self, values, what, cast):
        """The model for a run's values, what its outputs stand for, and the inputs that are not
        its own (the shape inputs)."""
        with self._lock:
            key = self._find_or_compile(values, what, cast)
            return self._models[key], self._layouts[key], self._graph.shape_inputs

    def _find_or_compile(self, values, what, cast):
        key = self._graph.key(values)
        if key in self._models:
            self._models.move_to_end(key)
            return key
        graph, layouts = self._graph.import_for(values, what, cast)
        model = _C.compile(graph, **self._options)
        if self._graph.key(values) != key:  # importing found more that fixes the graph: key on it too
            key = self._graph.key(values)
            if key in self._models:
                self._models.move_to_end(key)
                return key
        self._compiled += 1
        self._models[key], self._layouts[key] = model, layouts
        if self._max_plans and len(self._models) > self._max_plans:
            self._layouts.pop(self._models.popitem(last=False)[0])
        return key

    def _graph_and_data(self, inputs, what, cast=False):
        """For inputs given as {name: array} or a list in the ONNX model's input order: every
        input's value by name, the model for them, and the inputs that are its own (the shape
        inputs are not)."""
        if isinstance(inputs, dict):
            unknown = sorted(set(inputs) - set(self.input_names))
            if unknown:
                raise _C.InvalidArgumentError(f"{what}: the model has no input named {', '.join(unknown)}")
            missing = [name for name in self.input_names if name not in inputs]
            if missing:
                raise _C.InvalidArgumentError(f"{what}: no value for input(s) {', '.join(missing)}")
            inputs = [inputs[name] for name in self.input_names]
        inputs = list(inputs)
        if len(inputs) != len(self.input_names):
            raise _C.InvalidArgumentError(f"{what}: the model takes {len(self.input_names)} input(s), got {len(inputs)}")
        values = {name: self._value(name, a, what) for name, a in zip(self.input_names, inputs)}
        for name in self._graph.shape_inputs:
            values[name] = self._graph.checked(name, values[name], what, cast)
        model, layouts, shape_inputs = self._model_for(values, what, cast)
        data = []
        for name, a in zip(self.input_names, inputs):
            if name in self._graph.collections:  # its elements, in order; an empty optional none
                v = values[name]
                data.extend([] if v is None else v if isinstance(v, list) else [v])
            elif name not in shape_inputs:
                data.append(a)
        return values, model, layouts, data

    def _value(self, name, a, what):
        """A run's value of one input, as its declared type says: an array; for a sequence a
        list of arrays; for an optional None, or what its type holds."""
        declared = self._graph.collections.get(name)
        if declared is None:
            return np.asarray(a)
        if kind_of(declared) == "optional":
            if a is None:
                return None
            declared = declared.optional_type.elem_type
            if kind_of(declared) == "tensor":
                return np.asarray(a)
        if not isinstance(a, (list, tuple)):
            raise _C.InvalidArgumentError(f"{what}: input `{name}` is a sequence: give a list of arrays, got "
                                          f"{type(a).__name__}")
        return [np.asarray(e) for e in a]

    def run(self, inputs, out=None, *, cast=False):
        """Runs on inputs given as {name: array} or a list in the ONNX model's input order; returns
        the outputs as a list (`out`: arrays to write them into; `cast`: convert inputs of another
        dtype, as Model.run takes them). A sequence is given and returned as a list of arrays,
        an empty optional as None."""
        _, model, layouts, data = self._graph_and_data(inputs, "run", cast)
        return unflatten(layouts, model.run(data, out=out, cast=cast))

    def prepare(self, inputs, out=None):
        """A prepared run (Model.prepare) of the graph for the shape inputs' values as they are
        now: every run reads the other inputs' arrays in place and checks that the shape inputs
        still hold those values (changed, they would need another graph: prepare again)."""
        values, model, layouts, data = self._graph_and_data(inputs, "prepare")
        return PreparedValueRun(self._graph, values, model.prepare(data, out=out), layouts)

    def profile(self, *inputs, path):
        """Runs once on the inputs (in the ONNX model's input order), writing each kernel's time
        to `path` as a Chrome trace (Model.profile); returns the outputs as a list."""
        _, model, layouts, data = self._graph_and_data(list(inputs), "profile")
        return unflatten(layouts, model.profile(*data, path=path))

    def _latest(self, what):
        with self._lock:
            latest = next(reversed(self._models.values()), None)
        if latest is None:
            raise _C.InvalidArgumentError(f"{what}: no graph yet: the graph depends on the inputs, and the first run imports one")
        return latest

    def graph(self):
        """The graph run last (each set of shape input values has its own)."""
        return self._latest("graph").graph()

    def to_dot(self):
        """The launch list of the graph run last, as Graphviz DOT (Model.to_dot)."""
        return self._latest("to_dot").to_dot()

    def cancel(self):
        """Stops the runs under way, from another thread, as Model.cancel does: each raises
        CancelledError. Runs that start later are not affected."""
        with self._lock:
            models = list(self._models.values())
        for model in models:
            model.cancel()

    def save(self, path):
        """Refused: a compiled-model file holds one graph's plans, and this model's graph depends
        on input values (docs/model-format.md)."""
        waits = f"the values of {', '.join(self._graph.shape_inputs)}" if self._graph.shape_inputs else "its inputs' sizes"
        raise _C.UnsupportedError(f"save: this model compiles a graph per set of {waits}, and a compiled-model file holds one "
                                  "graph's plans; fix them when importing (esgraph.onnx.load(..., constants=..., input_shapes=...)) "
                                  "and save the model of that graph")

    def __call__(self, *inputs, cast=False):
        outputs = self.run(list(inputs), cast=cast)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def stats(self):
        """The stats of the graph run last, with `graphs`: the graphs compiled for sets of shape
        input values so far (dropped ones included), `graphs_kept` and `max_graphs` (0: no limit),
        the figures the report prints."""
        with self._lock:
            latest = next(reversed(self._models.values()), None)
            return {**(latest.stats() if latest is not None else {}), "graphs": self._compiled, "graphs_kept": len(self._models),
                    "max_graphs": self._max_plans}

    def report(self):
        """Which inputs carry shapes, the graphs kept, and the report of the one run last."""
        what = [f"values of {', '.join(self._graph.shape_inputs)}"] if self._graph.shape_inputs else []
        what += ["input shapes"] if self._graph.by_shapes else []
        with self._lock:
            head = (f"graphs per set of {' and '.join(what)}: {len(self._models)} kept "
                    f"({'at most ' + str(self._max_plans) if self._max_plans else 'no limit'}), {self._compiled} compiled\n")
            latest = next(reversed(self._models.values()), None)
        return head + (latest.report() if latest is not None else "no graph yet: the first run imports one for its values\n")


class PreparedValueRun:
    """ValueDependentModel.prepare's run: the graph's prepared run for the shape inputs' values it
    was made with, which each run checks are still the arrays' (the values read when the run was
    prepared fixed the graph)."""

    def __init__(self, graph, values, run, layouts):
        self._graph, self._values, self._run, self._layouts = graph, values, run, layouts
        self._key = graph.key(values)

    def run(self):
        """Runs once; returns the output arrays (the same ones every time), in a new list."""
        if self._graph.key(self._values) != self._key:
            raise _C.InvalidArgumentError(f"run: the values of {', '.join(self._graph.shape_inputs) or 'the inputs'} changed since "
                                          "the run was prepared, and they fix the graph: prepare again")
        return unflatten(self._layouts, self._run.run())

    @property
    def inputs(self):
        return self._run.inputs

    @property
    def outputs(self):
        return self._run.outputs
