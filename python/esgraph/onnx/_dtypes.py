"""ONNX element types <-> esgraph dtypes <-> numpy dtypes: the one table both directions use."""
from .. import _C
from .._dtypes import UnsupportedType, from_numpy, numpy_dtype  # noqa: F401  (the importer's, with ONNX's numbers)

# ONNX TensorProto.DataType value -> esgraph dtype. Types esgraph has no counterpart for
# (strings, complex) are absent and reported as unsupported.
ONNX_TO_ESG = {
    1: _C.f32, 2: _C.u8, 3: _C.i8, 4: _C.u16, 5: _C.i16, 6: _C.i32, 7: _C.i64,
    9: getattr(_C, "bool"), 10: _C.f16, 11: _C.f64, 12: _C.u32, 13: _C.u64, 16: _C.bf16,
}
ESG_TO_ONNX = {v: k for k, v in ONNX_TO_ESG.items()}

ONNX_TYPE_NAMES = {
    0: "UNDEFINED", 1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32",
    7: "INT64", 8: "STRING", 9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64",
    14: "COMPLEX64", 15: "COMPLEX128", 16: "BFLOAT16", 17: "FLOAT8E4M3FN", 18: "FLOAT8E4M3FNUZ", 19: "FLOAT8E5M2",
    20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4", 23: "FLOAT4E2M1", 24: "FLOAT8E8M0", 25: "UINT2", 26: "INT2",
    27: "FLOAT6E2M3", 28: "FLOAT6E3M2",
}


def esg_dtype(onnx_type: int):
    try:
        return ONNX_TO_ESG[onnx_type]
    except KeyError:
        raise UnsupportedType(f"element type {ONNX_TYPE_NAMES.get(onnx_type, onnx_type)}") from None
