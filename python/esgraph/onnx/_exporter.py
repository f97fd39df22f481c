"""Writes an esgraph graph as an ONNX model (opset 17), from Graph.inspect().

One emitter per esgraph op turns a node into ONNX nodes: most ops have an ONNX counterpart;
the rest (rsqrt, silu, gelu, mish, rms_norm, softmax's scale and mask, matmul's transpose
flags, not_equal) are written as the short ONNX subgraph they stand for. Constants become
initializers; symbolic dimensions become dim_params.
"""
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .. import _C
from .._frontend import ExportFailed
from . import _dtypes

OPSET = 17


class _Emitter:
    def __init__(self, info):
        self.info = info
        self.nodes, self.initializers = [], []
        self.names = {}
        self._taken = set()
        self._value_names = {meta["name"] for meta in info["values"].values()}
        self._count = 0

    def name(self, value):
        """The ONNX name of an esgraph value id: its own name, made unique."""
        if value not in self.names:
            base = self.info["values"][value]["name"]
            name, k = base, 1
            while name in self._taken:
                name, k = f"{base}_{k}", k + 1
            self._taken.add(name)
            self.names[value] = name
        return self.names[value]

    def fresh(self, hint):
        """A name for an ONNX-only value, never one a graph value has or will be given."""
        while True:
            self._count += 1
            name = f"{hint}__{self._count}"
            if name not in self._taken and name not in self._value_names:
                self._taken.add(name)
                return name

    def const(self, array, hint="const"):
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op_type, inputs, outputs=None, **attrs):
        outputs = outputs or [self.fresh(op_type.lower())]
        self.nodes.append(helper.make_node(op_type, [i or "" for i in inputs], outputs,
                                           **{k: v for k, v in attrs.items() if v is not None}))
        return outputs[0] if len(outputs) == 1 else outputs


def _numpy_dtype(esg_dtype):
    return _dtypes.numpy_dtype(esg_dtype)


_UNARY = {
    "abs": "Abs", "neg": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "reciprocal": "Reciprocal",
    "sigmoid": "Sigmoid", "tanh": "Tanh", "relu": "Relu", "erf": "Erf", "sin": "Sin", "cos": "Cos", "tan": "Tan",
    "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh", "asinh": "Asinh",
    "acosh": "Acosh", "atanh": "Atanh", "floor": "Floor", "ceil": "Ceil", "round": "Round", "sign": "Sign",
    "logical_not": "Not", "softplus": "Softplus", "softsign": "Softsign", "is_nan": "IsNaN",
    "hard_swish": "HardSwish",
}
_BINARY = {
    "add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "maximum": "Max", "minimum": "Min",
    "equal": "Equal", "less": "Less", "less_equal": "LessOrEqual", "greater": "Greater",
    "greater_equal": "GreaterOrEqual", "logical_and": "And", "logical_or": "Or",
}
_REDUCE = {"reduce_sum": "ReduceSum", "reduce_mean": "ReduceMean", "reduce_max": "ReduceMax",
           "reduce_min": "ReduceMin", "reduce_prod": "ReduceProd"}


def _scalar(e, like, value):
    """A rank-0 initializer of value `like`'s dtype."""
    return e.const(np.array(value, dtype=_numpy_dtype(e.info["values"][like]["dtype"])), "scalar")


def _emit(e, n):
    op, a = n["op"], n["attrs"]
    ins = [e.name(v) if v is not None else None for v in n["inputs"]]
    outs = [e.name(v) for v in n["outputs"]]
    x = n["inputs"][0] if n["inputs"] else None
    if op == "constant":
        e.initializers.append(numpy_helper.from_array(n["data"], outs[0]))
    elif op in _UNARY:
        e.node(_UNARY[op], ins, outs)
    elif op in _BINARY:
        e.node(_BINARY[op], ins, outs)
    elif op == "not_equal":
        e.node("Not", [e.node("Equal", ins)], outs)
    elif op == "where":
        e.node("Where", ins, outs)
    elif op == "rsqrt":
        e.node("Reciprocal", [e.node("Sqrt", ins)], outs)
    elif op == "silu":
        e.node("Mul", [ins[0], e.node("Sigmoid", ins)], outs)
    elif op == "mish":
        e.node("Mul", [ins[0], e.node("Tanh", [e.node("Softplus", ins)])], outs)
    elif op == "gelu":
        half, one = _scalar(e, x, 0.5), _scalar(e, x, 1.0)
        if a["approximate"] == "tanh":
            cube = e.node("Mul", [e.node("Mul", [ins[0], ins[0]]), ins[0]])
            inner = e.node("Mul", [e.node("Add", [ins[0], e.node("Mul", [cube, _scalar(e, x, 0.044715)])]),
                                   _scalar(e, x, math.sqrt(2 / math.pi))])
            gate = e.node("Add", [e.node("Tanh", [inner]), one])
        else:
            gate = e.node("Add", [e.node("Erf", [e.node("Mul", [ins[0], _scalar(e, x, 1 / math.sqrt(2))])]), one])
        e.node("Mul", [e.node("Mul", [ins[0], half]), gate], outs)
    elif op == "leaky_relu":
        e.node("LeakyRelu", ins, outs, alpha=a["alpha"])
    elif op == "elu":
        e.node("Elu", ins, outs, alpha=a["alpha"])
    elif op == "selu":
        e.node("Selu", ins, outs, alpha=a["alpha"], gamma=a["gamma"])
    elif op == "hard_sigmoid":
        e.node("HardSigmoid", ins, outs, alpha=a["alpha"], beta=a["beta"])
    elif op == "is_inf":
        e.node("IsInf", ins, outs, detect_positive=int(a["positive"]), detect_negative=int(a["negative"]))
    elif op == "cast":
        e.node("Cast", ins, outs, to=_dtypes.ESG_TO_ONNX[a["to"]])
    elif op == "clip":
        low = _scalar(e, x, a["min"]) if a["min"] != -math.inf else None
        high = _scalar(e, x, a["max"]) if a["max"] != math.inf else None
        e.node("Clip", [ins[0], low, high], outs)
    elif op == "matmul":
        operands = []
        for v, name, flag in zip(n["inputs"], ins, (a["transpose_a"], a["transpose_b"])):
            rank = len(e.info["values"][v]["shape"])
            operands.append(e.node("Transpose", [name], perm=list(range(rank - 2)) + [rank - 1, rank - 2]) if flag else name)
        e.node("MatMul", operands, outs)
    elif op == "conv2d":
        e.node("Conv", ins, outs, strides=a["strides"], pads=a["pads"], dilations=a["dilations"], group=a["groups"])
    elif op in ("max_pool2d", "avg_pool2d"):
        e.node("MaxPool" if op == "max_pool2d" else "AveragePool", ins, outs, kernel_shape=a["kernel"],
               strides=a["strides"], pads=a["pads"], ceil_mode=int(a["ceil_mode"]))
    elif op in _REDUCE:
        keep = int(a["keepdims"])
        if op == "reduce_sum":
            axes = e.const(np.array(a["axes"], np.int64), "axes") if a["axes"] else None
            e.node("ReduceSum", [ins[0], axes], outs, keepdims=keep)
        else:
            e.node(_REDUCE[op], ins, outs, keepdims=keep, axes=a["axes"] or None)
    elif op in ("argmax", "argmin"):
        e.node("ArgMax" if op == "argmax" else "ArgMin", ins, outs, axis=a["axis"], keepdims=int(a["keepdims"]))
    elif op in ("softmax", "log_softmax"):
        z = ins[0]
        if op == "softmax" and a["scale"] != 1.0:
            z = e.node("Mul", [z, _scalar(e, x, a["scale"])])
        if op == "softmax" and ins[1]:
            z = e.node("Add", [z, ins[1]])
        e.node("Softmax" if op == "softmax" else "LogSoftmax", [z], outs, axis=a["axis"])
    elif op == "layer_norm":
        shape = e.info["values"][x]["shape"][a["axis"]:]
        scale = ins[1] or e.const(np.ones(shape, _numpy_dtype(e.info["values"][x]["dtype"])), "ones")
        e.node("LayerNormalization", [ins[0], scale, ins[2]], outs, axis=a["axis"], epsilon=a["epsilon"])
    elif op == "rms_norm":
        rank = len(e.info["values"][x]["shape"])
        axes = list(range(a["axis"] % rank, rank))
        mean_sq = e.node("ReduceMean", [e.node("Mul", [ins[0], ins[0]])], axes=axes, keepdims=1)
        inv = e.node("Reciprocal", [e.node("Sqrt", [e.node("Add", [mean_sq, _scalar(e, x, a["epsilon"])])])])
        normed = e.node("Mul", [ins[0], inv], None if ins[1] else outs)
        if ins[1]:
            e.node("Mul", [normed, ins[1]], outs)
    elif op == "reshape":
        e.node("Reshape", [ins[0], e.const(np.array(a["shape"], np.int64), "shape")], outs)
    elif op == "transpose":
        rank = len(e.info["values"][x]["shape"])
        e.node("Transpose", ins, outs, perm=[p % rank for p in a["perm"]] or None)
    elif op == "concat":
        e.node("Concat", ins, outs, axis=a["axis"])
    elif op == "split":
        e.node("Split", [ins[0], e.const(np.array(a["sizes"], np.int64), "split")], outs, axis=a["axis"])
    elif op == "slice":
        count = len(a["starts"])
        axes = a["axes"] or list(range(count))
        steps = a["steps"] or [1] * count
        e.node("Slice", [ins[0]] + [e.const(np.array(v, np.int64), k) for k, v in
                                    (("starts", a["starts"]), ("ends", a["ends"]), ("axes", axes), ("steps", steps))], outs)
    elif op == "top_k":
        e.node("TopK", [ins[0], e.const(np.array([a["k"]], np.int64), "k")], outs, axis=a["axis"],
               largest=int(a["largest"]), sorted=1)
    elif op == "scatter_elements":
        e.node("ScatterElements", ins, outs, axis=a["axis"], reduction=a["reduction"])
    elif op == "scatter_nd":
        e.node("ScatterND", ins, outs, reduction=a["reduction"])
    elif op == "gather":
        e.node("Gather", ins, outs, axis=a["axis"])
    elif op == "expand":
        e.node("Expand", [ins[0], e.const(np.array(a["shape"], np.int64), "shape")], outs)
    elif op in ("squeeze", "unsqueeze"):
        axes = e.const(np.array(a["axes"], np.int64), "axes") if a["axes"] else None
        e.node("Squeeze" if op == "squeeze" else "Unsqueeze", [ins[0], axes], outs)
    elif op == "pad":
        rank = len(e.info["values"][x]["shape"])
        value = _scalar(e, x, a["value"]) if a["mode"] == "constant" else None
        e.node("Pad", [ins[0], e.const(np.array(a["pads"], np.int64), "pads"), value], outs, mode=a["mode"])
    elif op == "fill":
        dtype = _numpy_dtype(a["dtype"])
        e.node("ConstantOfShape", [e.const(np.array(a["shape"], np.int64), "shape")], outs,
               value=numpy_helper.from_array(np.array([a["value"]], dtype=dtype)))
    elif op == "range":
        dtype = _numpy_dtype(a["dtype"])
        e.node("Range", [e.const(np.array(a[k], dtype), k) for k in ("start", "limit", "step")], outs)
    else:
        raise ValueError(f"op {op} has no ONNX export yet")


def _tensor_info(name, meta):
    dims = [d if isinstance(d, int) else str(d) for d in meta["shape"]]
    return helper.make_tensor_value_info(name, _dtypes.ESG_TO_ONNX[meta["dtype"]], dims)


def to_model(graph):
    """The graph as an onnx.ModelProto (opset 17), checked by onnx.checker."""
    info = graph.inspect()
    e = _Emitter(info)
    for v in info["inputs"] + info["outputs"]:  # the graph's own names first: they stay as they are
        e.name(v)
    failures = []
    for i, n in enumerate(info["nodes"]):
        if n["bodies"]:
            failures.append((f"{n['op']} (node {i})", "control flow is not exported yet"))
            continue
        try:
            _emit(e, n)
        except (ValueError, KeyError, _dtypes.UnsupportedType) as ex:
            failures.append((f"{n['op']} (node {i})", str(ex)))
    if failures:
        raise ExportFailed(info["name"], failures)
    inputs = [_tensor_info(e.name(v), info["values"][v]) for v in info["inputs"]]
    outputs, produced = [], {node_out for node in e.nodes for node_out in node.output}
    for v in info["outputs"]:
        name = e.name(v)
        if name not in produced or any(o.name == name for o in outputs):
            # ONNX outputs come from nodes, each named once: an input, a constant or a repeated
            # output is given through an Identity.
            name = e.fresh(info["values"][v]["name"])
            e.node("Identity", [e.name(v)], [name])
        outputs.append(_tensor_info(name, info["values"][v]))
    onnx_graph = helper.make_graph(e.nodes, info["name"], inputs, outputs, e.initializers)
    model = helper.make_model(onnx_graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="esgraph", producer_version=_C.__version__)
    model.ir_version = 8
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as ex:  # a defect of the exporter: reported, not leaked
        raise ExportFailed(info["name"], [("model", f"onnx.checker: {ex}".splitlines()[0])]) from ex
    return model
