"""Writes an esgraph graph as an ONNX model (opset 17), from Graph.inspect().

One emitter per esgraph op turns a node into ONNX nodes: most ops have an ONNX counterpart;
the rest (rsqrt, silu, gelu, mish, rms_norm, softmax's scale and mask, matmul's transpose
flags, not_equal) are written as the short ONNX subgraph they stand for; if and while become
If and Loop with their bodies as subgraphs. Constants become initializers; symbolic
dimensions become dim_params.
"""
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .. import _C
from .._frontend import ExportFailed
from . import _dtypes

OPSET = 17


class _Names:
    """The names of one model: ONNX wants each once, subgraphs included."""

    def __init__(self, info):
        self.taken = set()
        self.graph_values = {meta["name"] for meta in info["values"].values()}
        self.count = 0


class _Emitter:
    """Writes ONNX nodes for one scope: the graph, a subgraph (If branch, Loop body), or an
    inline copy of a body in its parent's node list. Value names resolve through the enclosing
    scopes; a value first named here is defined here."""

    def __init__(self, info, names=None, parent=None, inline=False):
        self.info = info
        self.shared = names or _Names(info)
        self.parent = parent
        self.nodes, self.initializers = (parent.nodes, parent.initializers) if inline else ([], [])
        self.local = {}

    def child(self, inline=False):
        return _Emitter(self.info, self.shared, self, inline)

    def bind(self, value, name):
        self.local[value] = name

    def name(self, value):
        """The ONNX name of an esgraph value id: its own name, made unique."""
        scope = self
        while scope is not None:
            if value in scope.local:
                return scope.local[value]
            scope = scope.parent
        base = self.info["values"][value]["name"]
        name, k = base, 1
        while name in self.shared.taken:
            name, k = f"{base}_{k}", k + 1
        self.shared.taken.add(name)
        self.local[value] = name
        return name

    def fresh(self, hint):
        """A name for an ONNX-only value, never one a graph value has or will be given."""
        while True:
            self.shared.count += 1
            name = f"{hint}__{self.shared.count}"
            if name not in self.shared.taken and name not in self.shared.graph_values:
                self.shared.taken.add(name)
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

    def outputs(self, values):
        """Value infos for `values` as this scope's outputs: ONNX outputs come from this scope's
        nodes, each named once, so anything else (an input, a constant, an outer value, a repeat)
        goes through an Identity."""
        produced = {o for node in self.nodes for o in node.output}
        infos = []
        for v in values:
            name = self.name(v)
            if name not in produced or any(i.name == name for i in infos):
                alias = self.fresh(self.info["values"][v]["name"])
                self.node("Identity", [name], [alias])
                name = alias
            infos.append(_tensor_info(name, self.info["values"][v]))
        return infos


def _tensor_info(name, meta):
    dims = [d if isinstance(d, int) else str(d) for d in meta["shape"]]
    return helper.make_tensor_value_info(name, _dtypes.ESG_TO_ONNX[meta["dtype"]], dims)


def _emit_body(scope, body, params):
    """Emits an esgraph body's nodes into `scope`, its parameters bound to the ONNX names
    `params` and its captures to the enclosing values' names; returns its results' value ids."""
    for inner, outer in body["captures"]:
        scope.bind(inner, scope.parent.name(outer))
    for value, name in zip(body["params"], params):
        scope.bind(value, name)
    for n in body["nodes"]:
        _emit(scope, n)
    return body["results"]


def _emit_if(e, n, ins, outs):
    branches = []
    for label, body in zip(("then", "else"), n["bodies"]):
        child = e.child()
        results = _emit_body(child, body, [])
        branches.append(helper.make_graph(child.nodes, e.fresh(label), [], child.outputs(results), child.initializers))
    e.node("If", ins, outs, then_branch=branches[0], else_branch=branches[1])


def _emit_while(e, n, ins, outs):
    # ONNX Loop tests its condition before the first iteration from an input and before each
    # next one from the body's first output: the cond body is written once here, on the
    # initial values, and once at the end of the loop body, on the next ones.
    cond, body = n["bodies"]
    first = e.child(inline=True)
    first_test = first.name(_emit_body(first, cond, ins)[0])
    child = e.child()
    iteration, going = child.fresh("iteration"), child.fresh("condition")
    carried = [child.fresh(e.info["values"][v]["name"]) for v in body["params"]]
    nexts = _emit_body(child, body, carried)
    test = child.child(inline=True)
    next_test = _emit_body(test, cond, [child.name(v) for v in nexts])[0]
    child.bind(next_test, test.name(next_test))
    inputs = [helper.make_tensor_value_info(iteration, TensorProto.INT64, []),
              helper.make_tensor_value_info(going, TensorProto.BOOL, [])]
    inputs += [_tensor_info(name, e.info["values"][v]) for name, v in zip(carried, body["params"])]
    graph = helper.make_graph(child.nodes, e.fresh("loop_body"), inputs, child.outputs([next_test] + list(nexts)),
                              child.initializers)
    e.node("Loop", ["", first_test] + ins, outs, body=graph)


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
        if e.info["values"][n["outputs"][0]]["dtype"] == _C.bf16:  # bit patterns in uint16
            data = n["data"]
            e.initializers.append(helper.make_tensor(outs[0], TensorProto.BFLOAT16, data.shape, data.tobytes(), raw=True))
        else:
            e.initializers.append(numpy_helper.from_array(n["data"], outs[0]))
    elif op == "if":
        _emit_if(e, n, ins, outs)
    elif op == "while":
        _emit_while(e, n, ins, outs)
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


def to_model(graph):
    """The graph as an onnx.ModelProto (opset 17), checked by onnx.checker."""
    info = graph.inspect()
    e = _Emitter(info)
    for v in info["inputs"] + info["outputs"]:  # the graph's own names first: they stay as they are
        e.name(v)
    failures = []
    for i, n in enumerate(info["nodes"]):
        try:
            _emit(e, n)
        except (ValueError, KeyError, _dtypes.UnsupportedType) as ex:
            failures.append((f"{n['op']} (node {i})", str(ex)))
    if failures:
        raise ExportFailed(info["name"], failures)
    inputs = [_tensor_info(e.name(v), info["values"][v]) for v in info["inputs"]]
    onnx_graph = helper.make_graph(e.nodes, info["name"], inputs, e.outputs(info["outputs"]), e.initializers)
    model = helper.make_model(onnx_graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="esgraph", producer_version=_C.__version__)
    model.ir_version = 8
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as ex:  # a defect of the exporter: reported, not leaked
        raise ExportFailed(info["name"], [("model", f"onnx.checker: {ex}".splitlines()[0])]) from ex
    return model
