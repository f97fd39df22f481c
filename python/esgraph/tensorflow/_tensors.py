"""TensorFlow's element types and TensorProto values, as esgraph dtypes and numpy arrays."""
import numpy as np

from .. import _C
from .._dtypes import UnsupportedType  # a TF element type esgraph has no dtype for (strings, complex, ...)

# TF's DataType numbers (types.proto) -> (name, numpy dtype or None, esgraph dtype or None).
# bfloat16 has no numpy dtype: its arrays hold the bits as uint16 and become bf16 constants.
_TYPES = {
    1: ("float32", np.float32, _C.f32), 2: ("float64", np.float64, _C.f64), 3: ("int32", np.int32, _C.i32),
    4: ("uint8", np.uint8, _C.u8), 5: ("int16", np.int16, _C.i16), 6: ("int8", np.int8, _C.i8),
    7: ("string", None, None), 8: ("complex64", None, None), 9: ("int64", np.int64, _C.i64),
    10: ("bool", np.bool_, getattr(_C, "bool")), 11: ("qint8", None, None), 12: ("quint8", None, None),
    13: ("qint32", None, None), 14: ("bfloat16", np.uint16, _C.bf16), 15: ("qint16", None, None),
    16: ("quint16", None, None), 17: ("uint16", np.uint16, _C.u16), 18: ("complex128", None, None),
    19: ("float16", np.float16, _C.f16), 20: ("resource", None, None), 21: ("variant", None, None),
    22: ("uint32", np.uint32, _C.u32), 23: ("uint64", np.uint64, _C.u64),
}
BFLOAT16 = 14


def type_name(number):
    # A reference type (a v1 variable's) is its value type plus 100.
    return _TYPES[number][0] if number in _TYPES else f"DataType {number}"


def esg_dtype(number):
    entry = _TYPES.get(number)
    if entry is None or entry[2] is None:
        raise UnsupportedType(f"element type {type_name(number)}")
    return entry[2]


def numpy_dtype(number):
    entry = _TYPES.get(number)
    if entry is None or entry[1] is None:
        raise UnsupportedType(f"element type {type_name(number)}")
    return np.dtype(entry[1])


# TensorProto's typed fields by element type; float16 and bfloat16 keep their bits in half_val.
_VALUE_FIELDS = {1: "float_val", 2: "double_val", 3: "int_val", 4: "int_val", 5: "int_val", 6: "int_val",
                 9: "int64_val", 10: "bool_val", 14: "half_val", 17: "int_val", 19: "half_val",
                 22: "uint32_val", 23: "uint64_val"}


def tensor_dims(shape):
    """A TensorShapeProto's dims; -1 for an unknown size, None for an unknown rank."""
    return None if shape.unknown_rank else [int(d.size) for d in shape.dim]


def to_array(proto, max_bytes=None):
    """A TensorProto's value as a read-only numpy array (bfloat16 as its uint16 bits). TF writes
    either the raw bytes (tensor_content) or a typed list, whose last element fills the rest of
    the shape (a splat constant is one value). ValueError for data that does not fit the shape,
    and for an array beyond `max_bytes` (None: no bound) before it is made."""
    dtype = numpy_dtype(proto.dtype)
    dims = tensor_dims(proto.tensor_shape)
    if dims is None or any(d < 0 for d in dims):
        raise ValueError(f"a constant's shape {dims} is not fully known")
    count = int(np.prod(dims, dtype=object)) if dims else 1
    if max_bytes is not None and count * dtype.itemsize > max_bytes:
        raise ValueError(f"a {dims} {type_name(proto.dtype)} constant would take {count * dtype.itemsize} bytes, "
                         f"beyond the import's memory cap ({max_bytes} bytes)")
    if proto.tensor_content:
        if len(proto.tensor_content) != count * dtype.itemsize:
            raise ValueError(f"its {len(proto.tensor_content)} bytes of data do not hold {dims} {type_name(proto.dtype)} elements")
        array = np.frombuffer(proto.tensor_content, dtype=dtype).reshape(dims)
    else:
        values = getattr(proto, _VALUE_FIELDS[proto.dtype])
        if len(values) > count:
            raise ValueError(f"it lists {len(values)} values for {dims} ({count} elements)")
        if proto.dtype in (14, 19):  # the bits, in the low 16 of each int32
            listed = np.array(values, np.int64).astype(np.uint16).view(dtype)
        else:
            listed = np.array(values, dtype)
        array = np.empty(count, dtype)
        if count:
            if not len(listed):
                listed = np.zeros(1, dtype)
            array[:len(listed)] = listed
            array[len(listed):] = listed[-1]
        array = array.reshape(dims)
    array.setflags(write=False)
    return array
