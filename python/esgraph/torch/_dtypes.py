"""torch dtypes <-> esgraph dtypes: the one table of the torch frontend."""
import torch

from .. import _C

TO_ESG = {
    torch.float32: _C.f32, torch.float64: _C.f64, torch.float16: _C.f16, torch.bfloat16: _C.bf16,
    torch.int8: _C.i8, torch.int16: _C.i16, torch.int32: _C.i32, torch.int64: _C.i64,
    torch.uint8: _C.u8, torch.bool: getattr(_C, "bool"),
}
FLOATS = (_C.f32, _C.f64, _C.f16, _C.bf16)
