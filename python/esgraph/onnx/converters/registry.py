"""The converter table: ONNX op type ('<domain>.<op type>' outside the default domain, as
'com.microsoft.MatMulNBits') -> function(Node) -> output value(s); and what the converters share:
their errors and the import's memory."""
import contextvars
import math

CONVERTERS = {}

# The import under way (_importer.Importer), whose memory cap the converters' own arrays count against.
current_import = contextvars.ContextVar("esgraph_onnx_import", default=None)


class Unsupported(Exception):
    """A node this converter cannot express in esgraph; the reason names the attribute or input."""


class NeedsValue(Unsupported):
    """An operand the converter needs as a value (a shape, axes, a count) that the model computes
    at run time: the graph waits for a run's values (esgraph.onnx.ValueDependentGraph)."""


class NeedsShape(NeedsValue):
    """A size the converter needs as a number that is symbolic in the model (Shape of a tensor
    with a dynamic axis): the graph waits for a run's input shapes."""


def converts(*op_types, table=CONVERTERS):
    """Registers the decorated function as the converter of `op_types` in `table`."""
    def register(fn):
        for op in op_types:
            assert op not in table, f"two converters for {op}"
            table[op] = fn
        return fn
    return register


def check_attrs(node, supported):
    """Refuses attributes this converter does not handle (rather than ignoring them)."""
    extra = sorted(set(node.attrs) - set(supported))
    if extra:
        raise Unsupported(f"attribute(s) {', '.join(extra)} not supported")


def reserve(shape, itemsize, what, kept):
    """Room for the arrays of `shape` (`itemsize` bytes an element, all of them together) that a
    converter is about to make while importing: an index table, a mask, an interpolation or
    Fourier matrix, sized by the model's shapes and constants. Beyond what is left of load()'s
    max_memory_bytes the node is refused, naming them, before anything is allocated: a small
    file cannot make the import fill the machine. `kept` bytes an element stay, as the graph's
    constants, and count against the cap from then on; the rest are temporaries."""
    importer = current_import.get()
    if importer is not None:
        elements = math.prod(int(d) for d in shape)
        importer.reserve(elements * itemsize, elements * kept, what)
