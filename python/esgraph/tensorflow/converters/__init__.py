"""TF op converters, one module per family; importing them fills CONVERTERS."""
from . import control, detection, elementwise, nn, reduce, resize, shape  # noqa: F401
from .registry import CONVERTERS, NeedsValue, Unsupported  # noqa: F401
from .sizes import SIZES_CONVERTERS  # noqa: F401
