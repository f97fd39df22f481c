"""The converter table: ONNX op type ('<domain>.<op type>' outside the default domain, as
'com.microsoft.MatMulNBits') -> function(Node) -> output value(s); and what the converters share:
their errors and the import's memory."""
from functools import partial

from ..._folding import reserve  # noqa: F401  (the converters import it from here)
from ..._frontend import NeedsShape, NeedsValue, Unsupported, converts as _converts

CONVERTERS = {}
converts = partial(_converts, table=CONVERTERS)


def check_attrs(node, supported):
    """Refuses attributes this converter does not handle (rather than ignoring them)."""
    extra = sorted(set(node.attrs) - set(supported))
    if extra:
        raise Unsupported(f"attribute(s) {', '.join(extra)} not supported")
