"""The converter table: ONNX op type ('<domain>.<op type>' outside the default domain, as
'com.microsoft.MatMulNBits') -> function(Node) -> output value(s); and what the converters share:
their errors and the import's memory."""
import contextvars
import math
from functools import partial

from ..._frontend import NeedsShape, NeedsValue, Unsupported, converts as _converts

CONVERTERS = {}
converts = partial(_converts, table=CONVERTERS)

# The import under way (_importer.Importer), whose memory cap the converters' own arrays count against.
current_import = contextvars.ContextVar("esgraph_onnx_import", default=None)


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
