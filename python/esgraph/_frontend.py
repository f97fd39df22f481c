"""What the model importers and exporters (esgraph.onnx, esgraph.tensorflow, esgraph.torch) share:
their errors, and their converter tables."""
from . import _C


class ImportFailed(_C.Error, ValueError):
    """A model esgraph cannot import; `failures` lists (node description, reason), every
    unsupported node at once rather than the first one."""

    verb = "import model"

    def __init__(self, model_name, failures, needed_constants=(), waits_for_values=False, waits_for_shapes=False):
        self.failures = list(failures)
        # ONNX: the graph inputs whose values shape operands are computed from; given with
        # load(constants=...), they make those operands known while importing.
        self.needed_constants = sorted(needed_constants)
        # Every failure is such an operand (or a size that is symbolic, `waits_for_shapes`): the
        # model imports once a run brings those values (or its inputs' shapes).
        self.waits_for_values = waits_for_values
        self.waits_for_shapes = waits_for_shapes
        # Nodes are named "<op type> ... -> <outputs>"; the rest are the model's inputs, outputs
        # or options (two inputs of one name, an output no node makes, a sharding spec).
        nodes = sum(" -> " in where for where, _ in self.failures)
        counts = [f"{nodes} unsupported node(s)"] * bool(nodes)
        counts += [f"{len(self.failures) - nodes} {'other ' if nodes else ''}problem(s)"] * bool(len(self.failures) - nodes)
        lines = [f"cannot {self.verb} '{model_name}': {' and '.join(counts)}"]
        lines += [f"  {where}: {why}" for where, why in self.failures]
        super().__init__("\n".join(lines))


class ExportFailed(ImportFailed):
    """A graph esgraph cannot write in another format; `failures` lists every node that stops it."""

    verb = "export graph"


def name_outputs(tensors, names, claimed):
    """Gives each output tensor its name. An output needs a tensor of its own: a model may
    return an input, a constant or one value twice, and naming those (whose names are in
    `claimed`) would rename the input, the constant or the earlier output; they go through a
    copy instead (a reshape to the same shape)."""
    claimed, named = set(claimed), []
    for t, name in zip(tensors, names):
        if t.name in claimed:
            t = _C.ops.reshape(t, [0] * t.ndim)
        t.name = name
        claimed.add(name)
        named.append(t)
    return named


class Unsupported(Exception):
    """A node this converter cannot express in esgraph; the reason names the attribute or input."""


class NeedsValue(Unsupported):
    """An operand the converter needs as a value (a shape, axes, a count) that the model computes
    at run time: the graph waits for a run's values (esgraph.onnx.ValueDependentGraph)."""


class NeedsShape(NeedsValue):
    """A size the converter needs as a number that is symbolic in the model (Shape of a tensor
    with a dynamic axis): the graph waits for a run's input shapes."""


def converts(*op_types, table):
    """Registers the decorated function as the converter of `op_types` in `table`."""
    def register(fn):
        for op in op_types:
            assert op not in table, f"two converters for {op}"
            table[op] = fn
        return fn
    return register
