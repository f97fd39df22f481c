"""Which version of each ONNX op the converters implement.

Every converter implements its op as opsets 1 to 18 define it: ONNX 1.12's node suite checks
those (docs/conformance.md). A later version counts only where NEWER names it: versions that add
element types alone (types esgraph has no dtype for, float8, int4 and the like, are refused by
name when a tensor has one), and versions whose new attributes or inputs the converter reads.
A node whose op is newer at the model's opset than what its converter implements is refused by
name, so that no converter reads a version it was not written for. The versions of each op come
from _op_versions.py (ONNX's schemas, written by scripts/onnx-op-versions.py), since the onnx
package an import runs with may be older than the model."""
from ._op_versions import HISTORY, LATEST_OPSET, ONNX_RELEASE  # noqa: F401  (LATEST_OPSET: the importer's bound)

VERIFIED_OPSET = 18

# op -> the newest version its converter implements, where that is past opset 18. Versions
# that add element types, or values of an attribute the converter refuses by name until it
# reads them (Pad's wrap, Resize's half_pixel_symmetric, Mod's floats: all read now):
_TYPES_ONLY = [
    "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BitShift", "Celu", "Compress", "Constant", "ConstantOfShape",
    "Conv", "ConvTranspose", "Cos", "Cosh", "DepthToSpace", "Det", "Dropout", "Einsum", "Elu", "Equal", "EyeLike",
    "Flatten", "GRU", "GlobalAveragePool", "GlobalMaxPool", "HardSigmoid", "HardSwish", "Identity", "If",
    "InstanceNormalization", "IsInf", "IsNaN", "LSTM", "Loop", "LpNormalization", "LpPool", "GlobalLpPool", "MaxUnpool",
    "Mish", "Mod", "NegativeLogLikelihoodLoss", "OneHot", "Optional", "OptionalGetElement", "OptionalHasElement", "Pad",
    "QLinearMatMul", "RNN", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMin", "Reshape", "Resize",
    "ReverseSequence", "RoiAlign", "Round", "Scan", "Selu", "Shape", "Sin", "Sinh", "Size", "Softplus", "Softsign",
    "SplitToSequence", "Squeeze", "Tan", "ThresholdedRelu", "TopK", "Transpose", "Unique", "Unsqueeze",
]
NEWER = {op: HISTORY[op][-1] for op in _TYPES_ONLY}
# Versions whose changes the converters read:
NEWER.update({
    "AveragePool": 22,       # 19: dilations; 22: types, and windows starting in the end padding are dropped
    "MaxPool": 22,           # 22: types, and the same windows
    "Cast": HISTORY["Cast"][-1],  # 19: saturate, 24: round_mode, both for float8 types only
    "CastLike": HISTORY["CastLike"][-1],
    "DFT": 20,               # 20: the axis is an input, -2 by default
    "GridSample": 22,        # 20: modes linear and cubic (bilinear and bicubic before), N-D inputs
    "QuantizeLinear": HISTORY["QuantizeLinear"][-1],  # 19: saturate (float8); 21: block_size, output_dtype; 23: precision
    "DequantizeLinear": HISTORY["DequantizeLinear"][-1],  # 21: block_size; 23: output_dtype
    "SpaceToDepth": 28,      # 28: mode, DCR (as before) or CRD
    "Range": 27,             # 27: stash_type, what f16 and bf16 ranges count in
    # ops that came after opset 18
    "Attention": 25,         # 24: nonpad_kv_seqlen; 25: sliding windows
    "AffineGrid": 20,
    "CumProd": 26,
    "SwiGLU": 28,
    "TensorScatter": 24,
    "Gelu": 20,
    "GroupNormalization": 21,  # 21: scale and bias per channel (per group at 18)
    "RMSNormalization": 23,
    "RotaryEmbedding": 23,
    "Swish": 24,
})


def version_at(op, opset):
    """The version of `op` that a model of `opset` uses, or None if ONNX had no such op then
    (or has none of that name)."""
    return max((v for v in HISTORY.get(op, ()) if v <= opset), default=None)


def implemented(op):
    """The newest version of `op` its converter implements."""
    return NEWER.get(op) or version_at(op, VERIFIED_OPSET)


def too_new(op, opset):
    """Why a default-domain node of `op` in a model of `opset` is refused, or None."""
    version, newest = version_at(op, opset), implemented(op)
    if version is None or (newest is not None and version <= newest):
        return None
    if newest is None:
        return f"{op}-{version} came after opset {VERIFIED_OPSET}, and esgraph implements no version of it"
    return (f"{op}-{version} (the version opset {opset} uses) is newer than the {op}-{newest} esgraph implements: "
            f"export the model for opset {version - 1} or lower")
