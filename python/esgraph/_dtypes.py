"""esgraph dtypes <-> numpy dtypes, for every importer (the formats' own type numbers are theirs:
onnx/_dtypes.py, tensorflow/_tensors.py)."""
import numpy as np

from . import _C

# Every dtype but bf16, whose uint16 bit patterns are not a numpy type of their own.
_NUMPY = {t: t.numpy for t in _C.DType.__members__.values() if t != _C.bf16}


class UnsupportedType(Exception):
    """An element type esgraph, or numpy, has no counterpart for."""


def numpy_dtype(dtype):
    """The numpy dtype of an esgraph dtype (bf16 has none: it is refused)."""
    try:
        return np.dtype(_NUMPY[dtype])
    except KeyError:
        raise UnsupportedType(f"dtype {dtype.name} has no numpy counterpart") from None


def from_numpy(dtype: np.dtype):
    for esg, np_type in _NUMPY.items():
        if np.dtype(np_type) == dtype:
            return esg
    raise UnsupportedType(f"numpy dtype {dtype}")
