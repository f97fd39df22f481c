"""The converter table: TF op name -> function(Node) -> output value(s) (esgraph tensors, numpy
arrays known while importing, or `Nchw` values); and what the converters share."""
from functools import partial

from ..._frontend import NeedsShape, NeedsValue, Unsupported, converts as _converts

CONVERTERS = {}
converts = partial(_converts, table=CONVERTERS)

__all__ = ["CONVERTERS", "NeedsShape", "NeedsValue", "Unsupported", "converts", "data_format"]


def data_format(n):
    """The node's data_format, "NHWC" (TF's default) or "NCHW"; others are refused."""
    fmt = n.attr("data_format", "NHWC")
    if fmt not in ("NHWC", "NCHW"):
        raise Unsupported(f"data_format {fmt}")
    return fmt
