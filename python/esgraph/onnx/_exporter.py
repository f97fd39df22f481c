"""Writes an esgraph graph as an ONNX model (opset 17), from Graph.inspect().

An op whose ONNX counterpart is the same computation is one node of that type, its attributes
written by name: the table of those ops, ONE_NODE, is generated from the `onnx:` keys of the op
YAML. Every other op has an export function here, registered by op name: rsqrt, silu, gelu,
mish, rms_norm, attention, softmax's scale and mask, matmul's transpose flags and not_equal are
written as the short ONNX subgraph they stand for; ops whose ONNX counterpart takes tensors where esgraph
has attributes get those as initializers; if and while become If and Loop with their bodies as
subgraphs. Constants become initializers; symbolic dimensions become dim_params.
"""
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .. import _C
from .._frontend import ExportFailed
from ..quantization import pack_zero_points
from . import _dtypes
from ._export_table import ONE_NODE

OPSET = 17


class _Names:
    """The names of one model: ONNX wants each once, subgraphs included."""

    def __init__(self, info):
        self.taken = set()
        self.graph_values = {meta["name"] for meta in info["values"].values()}
        self.count = 0
        self.domains = set()  # besides ONNX's own: the model imports them (ONNX Runtime's com.microsoft)


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

    def node(self, op_type, inputs, outputs=None, domain=None, **attrs):
        outputs = outputs or [self.fresh(op_type.lower())]
        if domain:
            self.shared.domains.add(domain)
        self.nodes.append(helper.make_node(op_type, [i or "" for i in inputs], outputs, domain=domain,
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


def _onnx_attr(value, attr_type):
    """An attribute's value as ONNX holds it: a bool as an int, a dtype as an element type. An
    empty list is left out: ONNX's default is what the empty list means to every op whose YAML
    maps it (all axes, for the reductions)."""
    if attr_type == "bool":
        return int(value)
    if attr_type == "dtype":
        return _dtypes.ESG_TO_ONNX[value]
    if attr_type.startswith("list<"):
        return value or None
    return value


def _emit_one_node(e, n, ins, outs):
    op_type, attrs = ONE_NODE[n["op"]]
    e.node(op_type, ins, outs, **{onnx_name: _onnx_attr(n["attrs"][name], attr_type)
                                  for name, onnx_name, attr_type in attrs})


_EXPORTS = {}  # op name -> export(e, n, ins, outs), for the ops ONE_NODE does not cover


def _exports(*ops):
    def register(fn):
        for op in ops:
            assert op not in _EXPORTS and op not in ONE_NODE, f"two ONNX exports for {op}"
            _EXPORTS[op] = fn
        return fn
    return register


def _emit(e, n):
    ins = [e.name(v) if v is not None else None for v in n["inputs"]]
    outs = [e.name(v) for v in n["outputs"]]
    if n["op"] in ("scatter_elements", "scatter_nd") and n["attrs"]["reduction"] in ("max", "min"):
        raise ValueError(f"{n['op']} with reduction {n['attrs']['reduction']}: ONNX has it from opset 18, and the "
                         f"export writes opset {OPSET}")
    if n["op"] in ONE_NODE:
        _emit_one_node(e, n, ins, outs)
    elif n["op"] in _EXPORTS:
        _EXPORTS[n["op"]](e, n, ins, outs)
    else:
        raise ValueError(f"op {n['op']} has no ONNX export yet")


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


@_exports("if")
def _emit_if(e, n, ins, outs):
    branches = []
    for label, body in zip(("then", "else"), n["bodies"]):
        child = e.child()
        results = _emit_body(child, body, [])
        branches.append(helper.make_graph(child.nodes, e.fresh(label), [], child.outputs(results), child.initializers))
    e.node("If", ins, outs, then_branch=branches[0], else_branch=branches[1])


@_exports("while")
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


def _meta(e, n):
    """The value info of node n's first input."""
    return e.info["values"][n["inputs"][0]]


def _scalar(e, n, value):
    """A rank-0 initializer of the dtype of node n's first input."""
    return e.const(np.array(value, dtype=_numpy_dtype(_meta(e, n)["dtype"])), "scalar")


def _ints(e, values, hint):
    return e.const(np.array(values, np.int64), hint)


@_exports("constant")
def _emit_constant(e, n, ins, outs):
    if e.info["values"][n["outputs"][0]]["dtype"] == _C.bf16:  # bit patterns in uint16
        data = n["data"]
        e.initializers.append(helper.make_tensor(outs[0], TensorProto.BFLOAT16, data.shape, data.tobytes(), raw=True))
    else:
        e.initializers.append(numpy_helper.from_array(n["data"], outs[0]))


@_exports("not_equal")
def _emit_not_equal(e, n, ins, outs):
    e.node("Not", [e.node("Equal", ins)], outs)


@_exports("rsqrt")
def _emit_rsqrt(e, n, ins, outs):
    e.node("Reciprocal", [e.node("Sqrt", ins)], outs)


@_exports("silu")
def _emit_silu(e, n, ins, outs):
    e.node("Mul", [ins[0], e.node("Sigmoid", ins)], outs)


@_exports("mish")
def _emit_mish(e, n, ins, outs):
    e.node("Mul", [ins[0], e.node("Tanh", [e.node("Softplus", ins)])], outs)


@_exports("gelu")
def _emit_gelu(e, n, ins, outs):
    half, one = _scalar(e, n, 0.5), _scalar(e, n, 1.0)
    if n["attrs"]["approximate"] == "tanh":
        cube = e.node("Mul", [e.node("Mul", [ins[0], ins[0]]), ins[0]])
        inner = e.node("Mul", [e.node("Add", [ins[0], e.node("Mul", [cube, _scalar(e, n, 0.044715)])]),
                               _scalar(e, n, math.sqrt(2 / math.pi))])
        gate = e.node("Add", [e.node("Tanh", [inner]), one])
    else:
        gate = e.node("Add", [e.node("Erf", [e.node("Mul", [ins[0], _scalar(e, n, 1 / math.sqrt(2))])]), one])
    e.node("Mul", [e.node("Mul", [ins[0], half]), gate], outs)


@_exports("clip")
def _emit_clip(e, n, ins, outs):
    a = n["attrs"]
    low = _scalar(e, n, a["min"]) if a["min"] != -math.inf else None
    high = _scalar(e, n, a["max"]) if a["max"] != math.inf else None
    e.node("Clip", [ins[0], low, high], outs)


def _quantization_axis(e, n):
    """ONNX's form of a quantization op's scale and zero point (inputs 1, 2): None for one
    value each, an axis of x for a row of values along that axis alone, else False (no one node
    says it)."""
    out_shape = e.info["values"][n["outputs"][0]]["shape"]
    if list(e.info["values"][n["inputs"][0]]["shape"]) != list(out_shape):
        return False  # the parameters widen x
    axes = set()
    for v in n["inputs"][1:]:
        shape = e.info["values"][v]["shape"]
        lead = len(out_shape) - len(shape)
        axes |= {lead + k for k, d in enumerate(shape) if d != 1}
    return False if len(axes) > 1 else next(iter(axes), None)


def _emit_quantization(e, n, ins, outs, op_type, elementwise):
    axis = _quantization_axis(e, n)
    if axis is False:
        elementwise()
        return
    shape = [] if axis is None else [-1]

    def as_onnx(value, name):  # a constant reshaped here, else a Reshape node
        data = _constant_data(e, value)
        if data is not None:
            return e.const(data.reshape(shape), "quantization")
        return e.node("Reshape", [name, _ints(e, shape, "shape")])

    e.node(op_type, [ins[0]] + [as_onnx(v, i) for v, i in zip(n["inputs"][1:], ins[1:])], outs, axis=axis)


@_exports("quantize_linear")
def _emit_quantize_linear(e, n, ins, outs):
    def elementwise():  # saturate(round(x / scale) + zero_point), as the op defines it
        q = e.node("Add", [e.node("Round", [e.node("Div", ins[:2])]), e.node("Cast", [ins[2]], to=TensorProto.FLOAT)])
        info = np.iinfo(_numpy_dtype(e.info["values"][n["outputs"][0]]["dtype"]))
        low, high = e.const(np.array(info.min, np.float32), "low"), e.const(np.array(info.max, np.float32), "high")
        e.node("Cast", [e.node("Clip", [q, low, high])], outs, to=_dtypes.ESG_TO_ONNX[e.info["values"][n["outputs"][0]]["dtype"]])

    _emit_quantization(e, n, ins, outs, "QuantizeLinear", elementwise)


@_exports("dequantize_linear")
def _emit_dequantize_linear(e, n, ins, outs):
    def elementwise():
        widen = [e.node("Cast", [i], to=TensorProto.FLOAT) for i in (ins[0], ins[2])]
        e.node("Mul", [e.node("Sub", widen), ins[1]], outs)

    _emit_quantization(e, n, ins, outs, "DequantizeLinear", elementwise)


@_exports("quantized_add")
def _emit_quantized_add(e, n, ins, outs):
    """DequantizeLinear of each operand, Add, a Clip of the sum where min or max bound it, and
    QuantizeLinear (the QDQ form ONNX Runtime fuses back into QLinearAdd); with parameters of
    more than one value, the same arithmetic as elementwise ops."""
    a = n["attrs"]
    y_type = e.info["values"][n["outputs"][0]]["dtype"]
    scalars = all(math.prod(e.info["values"][v]["shape"]) == 1 for v in n["inputs"][1:3] + n["inputs"][4:8])
    as_float = lambda name: e.node("Cast", [name], to=TensorProto.FLOAT)  # noqa: E731
    if scalars:
        flat = _ints(e, [], "shape")
        one = lambda name: e.node("Reshape", [name, flat])  # noqa: E731
        parts = [e.node("DequantizeLinear", [ins[i], one(ins[i + 1]), one(ins[i + 2])]) for i in (0, 3)]
    else:
        parts = [e.node("Mul", [e.node("Sub", [as_float(ins[i]), as_float(ins[i + 2])]), ins[i + 1]]) for i in (0, 3)]
    total = e.node("Add", parts)
    if a["min"] != -math.inf or a["max"] != math.inf:
        low = e.const(np.array(a["min"], np.float32), "low") if a["min"] != -math.inf else None
        high = e.const(np.array(a["max"], np.float32), "high") if a["max"] != math.inf else None
        total = e.node("Clip", [total, low, high])
    if scalars:
        e.node("QuantizeLinear", [total, one(ins[6]), one(ins[7])], outs)
        return
    q = e.node("Add", [e.node("Round", [e.node("Div", [total, ins[6]])]), as_float(ins[7])])
    info = np.iinfo(_numpy_dtype(y_type))
    low, high = e.const(np.array(info.min, np.float32), "low"), e.const(np.array(info.max, np.float32), "high")
    e.node("Cast", [e.node("Clip", [q, low, high])], outs, to=_dtypes.ESG_TO_ONNX[y_type])


@_exports("quantized_conv2d")
def _emit_quantized_conv2d(e, n, ins, outs):
    """QLinearConv, the same operands in the same order; a folded clip as the clip of its result
    dequantized, quantized again (the same values: requantizing what was quantized with the same
    scale gives it back)."""
    a = n["attrs"]
    clipped = a["min"] != -math.inf or a["max"] != math.inf
    y_type = e.info["values"][n["outputs"][0]]["dtype"]
    if y_type in (_C.f32, _C.f16, _C.bf16):
        _emit_real_quantized_conv2d(e, n, ins, outs, y_type)
        return
    conv = e.node("QLinearConv", ins, None if clipped else outs, strides=a["strides"], pads=a["pads"],
                  dilations=a["dilations"], group=a["groups"])
    if clipped:
        low = e.const(np.array(a["min"], np.float32), "low") if a["min"] != -math.inf else None
        high = e.const(np.array(a["max"], np.float32), "high") if a["max"] != math.inf else None
        real = e.node("Clip", [e.node("DequantizeLinear", [conv, ins[6], ins[7]]), low, high])
        e.node("QuantizeLinear", [real, ins[6], ins[7]], outs)


def _emit_real_quantized_conv2d(e, n, ins, outs, y_type):
    """A float result, which QLinearConv cannot give: the integers less their zero points as
    floats (exact), Conv with the int32 bias, scaled by x_scale · w_scale per output channel,
    clipped, then divided by y_scale and the zero point added, as the op defines it."""
    a = n["attrs"]
    as_float = lambda name: e.node("Cast", [name], to=TensorProto.FLOAT)  # noqa: E731
    channels = [-1, 1, 1]
    x = e.node("Sub", [as_float(ins[0]), as_float(ins[2])])
    w = e.node("Sub", [as_float(ins[3]), e.node("Reshape", [as_float(ins[5]), _ints(e, [-1, 1, 1, 1], "shape")])])
    bias = [as_float(ins[8])] if len(ins) > 8 and ins[8] else []
    sums = e.node("Conv", [x, w] + bias, strides=a["strides"], pads=a["pads"], dilations=a["dilations"], group=a["groups"])
    scale = e.node("Reshape", [e.node("Mul", [ins[1], ins[4]]), _ints(e, channels, "shape")])
    real = e.node("Mul", [sums, scale])
    if a["min"] != -math.inf or a["max"] != math.inf:
        low = e.const(np.array(a["min"], np.float32), "low") if a["min"] != -math.inf else None
        high = e.const(np.array(a["max"], np.float32), "high") if a["max"] != math.inf else None
        real = e.node("Clip", [real, low, high])
    shifted = e.node("Add", [e.node("Div", [real, ins[6]]), as_float(ins[7])])
    e.node("Cast", [shifted], outs, to=_dtypes.ESG_TO_ONNX[y_type])


@_exports("matmul_integer")
def _emit_matmul_integer(e, n, ins, outs):
    e.node("MatMulInteger", ins, outs)  # the same operands in the same order


def _constant_data(e, value):
    """The array of a graph-level constant `value`, or None when it is computed (the table made
    once an export: a QDQ graph asks it twice a quantization)."""
    if not hasattr(e.shared, "constants"):
        e.shared.constants = {n["outputs"][0]: n["data"] for n in e.info["nodes"] if n["op"] == "constant"}
    return e.shared.constants.get(value)


@_exports("matmul_nbits")
def _emit_matmul_nbits(e, n, ins, outs):
    """ONNX Runtime's MatMulNBits (com.microsoft): the same codes and scales. Zero points below 8
    bits packed as the codes are, when constant (ONNX Runtime's fast kernels want initializers);
    computed ones as floats, its unpacked form. f16 and bf16 activations are multiplied in f32
    (the scales are), between casts."""
    a = n["attrs"]
    bits = a["bits"]
    y_type = e.info["values"][n["outputs"][0]]["dtype"]
    activations, results = ins[0], outs
    if y_type != _C.f32:
        activations = e.node("Cast", [ins[0]], to=TensorProto.FLOAT)
        results = None
    k = e.info["values"][n["inputs"][0]]["shape"][-1]
    columns = e.info["values"][n["inputs"][1]]["shape"][0]
    zero_points = ins[3]
    if zero_points and bits < 8:
        codes = _constant_data(e, n["inputs"][3])
        if codes is None:
            zero_points = e.node("Cast", [zero_points], to=TensorProto.FLOAT)
        else:
            zero_points = e.const(pack_zero_points(codes, bits), "zero_points")
    y = e.node("MatMulNBits", [activations, ins[1], ins[2], zero_points], results, domain="com.microsoft", K=k, N=columns,
               bits=bits, block_size=a["block_size"], **({"accuracy_level": a["accuracy_level"]} if a["accuracy_level"] else {}))
    if y_type != _C.f32:
        e.node("Cast", [y], outs, to=_dtypes.ESG_TO_ONNX[y_type])


@_exports("matmul")
def _emit_matmul(e, n, ins, outs):
    operands = []
    for v, name, flag in zip(n["inputs"], ins, (n["attrs"]["transpose_a"], n["attrs"]["transpose_b"])):
        rank = len(e.info["values"][v]["shape"])
        operands.append(e.node("Transpose", [name], perm=list(range(rank - 2)) + [rank - 1, rank - 2]) if flag else name)
    e.node("MatMul", operands, outs)


@_exports("reduce_sum")
def _emit_reduce_sum(e, n, ins, outs):
    # Since opset 13 ReduceSum takes its axes as an input; the other reductions follow in 18.
    axes = _ints(e, n["attrs"]["axes"], "axes") if n["attrs"]["axes"] else None
    e.node("ReduceSum", [ins[0], axes], outs, keepdims=int(n["attrs"]["keepdims"]))


@_exports("softmax")
def _emit_softmax(e, n, ins, outs):
    a, z = n["attrs"], ins[0]
    if a["scale"] != 1.0:
        z = e.node("Mul", [z, _scalar(e, n, a["scale"])])
    if ins[1]:
        z = e.node("Add", [z, ins[1]])
    e.node("Softmax", [z], outs, axis=a["axis"])


@_exports("attention")
def _emit_attention(e, n, ins, outs):
    """The heads to [batch, heads, seq, size] (a Reshape and a Transpose for rank-3 layouts), the
    scores as MatMul, Mul, Add and Softmax, the product with v, and the heads back."""
    a, shape = n["attrs"], _meta(e, n)["shape"]
    rank4, heads = len(shape) == 4, n["attrs"]["num_heads"]
    head_size = shape[3] if rank4 else shape[2] // heads if isinstance(shape[2], int) else None
    scale = a["scale"] or (1 / math.sqrt(head_size) if head_size else None)
    if scale is None:
        raise ValueError("attention with its default scale needs a static head size to export")
    # Where [batch, heads, seq, size] takes each axis from the split operand: [batch, seq, heads,
    # size], or [seq, batch, heads, size] with seq_first.
    to_bhsd = [0, 1, 2, 3] if rank4 else [1, 2, 0, 3] if a["seq_first"] else [0, 2, 1, 3]

    def heads_of(x, perm):
        if not rank4:
            x = e.node("Reshape", [x, _ints(e, [0, 0, heads, -1], "heads")])
        return e.node("Transpose", [x], perm=perm)

    q = heads_of(ins[0], to_bhsd)
    k_t = heads_of(ins[1], to_bhsd[:2] + [to_bhsd[3], to_bhsd[2]])
    scores = e.node("Mul", [e.node("MatMul", [q, k_t]), _scalar(e, n, scale)])
    if ins[3]:
        scores = e.node("Add", [scores, ins[3]])
    y = e.node("MatMul", [e.node("Softmax", [scores], axis=-1), heads_of(ins[2], to_bhsd)], None if not rank4 else outs)
    if not rank4:
        back = e.node("Transpose", [y], perm=[to_bhsd.index(i) for i in range(4)])
        e.node("Reshape", [back, _ints(e, [0, 0, -1], "joined")], outs)


@_exports("layer_norm")
def _emit_layer_norm(e, n, ins, outs):
    a, meta = n["attrs"], _meta(e, n)
    scale = ins[1] or e.const(np.ones(meta["shape"][a["axis"]:], _numpy_dtype(meta["dtype"])), "ones")
    e.node("LayerNormalization", [ins[0], scale, ins[2]], outs, axis=a["axis"], epsilon=a["epsilon"])


@_exports("rms_norm")
def _emit_rms_norm(e, n, ins, outs):
    a = n["attrs"]
    rank = len(_meta(e, n)["shape"])
    axes = list(range(a["axis"] % rank, rank))
    mean_sq = e.node("ReduceMean", [e.node("Mul", [ins[0], ins[0]])], axes=axes, keepdims=1)
    inv = e.node("Reciprocal", [e.node("Sqrt", [e.node("Add", [mean_sq, _scalar(e, n, a["epsilon"])])])])
    normed = e.node("Mul", [ins[0], inv], None if ins[1] else outs)
    if ins[1]:
        e.node("Mul", [normed, ins[1]], outs)


@_exports("reshape")
def _emit_reshape(e, n, ins, outs):
    e.node("Reshape", [ins[0], _ints(e, n["attrs"]["shape"], "shape")], outs)


@_exports("transpose")
def _emit_transpose(e, n, ins, outs):
    rank = len(_meta(e, n)["shape"])
    e.node("Transpose", ins, outs, perm=[p % rank for p in n["attrs"]["perm"]] or None)


@_exports("split")
def _emit_split(e, n, ins, outs):
    e.node("Split", [ins[0], _ints(e, n["attrs"]["sizes"], "split")], outs, axis=n["attrs"]["axis"])


@_exports("slice")
def _emit_slice(e, n, ins, outs):
    a = n["attrs"]
    count = len(a["starts"])
    axes = a["axes"] or list(range(count))
    steps = a["steps"] or [1] * count
    e.node("Slice", [ins[0]] + [_ints(e, v, k) for k, v in
                                (("starts", a["starts"]), ("ends", a["ends"]), ("axes", axes), ("steps", steps))], outs)


@_exports("top_k")
def _emit_top_k(e, n, ins, outs):
    a = n["attrs"]
    e.node("TopK", [ins[0], _ints(e, [a["k"]], "k")], outs, axis=a["axis"], largest=int(a["largest"]), sorted=1)


@_exports("non_max_suppression")
def _emit_non_max_suppression(e, n, ins, outs):
    a = n["attrs"]
    scalars = [_ints(e, [a["max_boxes_per_class"]], "max_boxes"), e.const(np.array([a["iou_threshold"]], np.float32), "iou"),
               e.const(np.array([a["score_threshold"]], np.float32), "score")]
    e.node("NonMaxSuppression", ins[:2] + scalars, outs, center_point_box=int(a["center_point_box"]))


@_exports("expand")
def _emit_expand(e, n, ins, outs):
    e.node("Expand", [ins[0], _ints(e, n["attrs"]["shape"], "shape")], outs)


@_exports("squeeze", "unsqueeze")
def _emit_squeeze(e, n, ins, outs):
    axes = _ints(e, n["attrs"]["axes"], "axes") if n["attrs"]["axes"] else None
    e.node({"squeeze": "Squeeze", "unsqueeze": "Unsqueeze"}[n["op"]], [ins[0], axes], outs)


@_exports("pad")
def _emit_pad(e, n, ins, outs):
    a = n["attrs"]
    value = _scalar(e, n, a["value"]) if a["mode"] == "constant" else None
    e.node("Pad", [ins[0], _ints(e, a["pads"], "pads"), value], outs, mode=a["mode"])


@_exports("fill")
def _emit_fill(e, n, ins, outs):
    a = n["attrs"]
    dtype = _numpy_dtype(a["dtype"])
    e.node("ConstantOfShape", [_ints(e, a["shape"], "shape")], outs,
           value=numpy_helper.from_array(np.array([a["value"]], dtype=dtype)))


@_exports("fill_to")
def _emit_fill_to(e, n, ins, outs):
    a = n["attrs"]
    shape = e.node("Cast", [ins[0]], to=TensorProto.INT64)  # ConstantOfShape takes int64 sizes
    e.node("ConstantOfShape", [shape], outs, value=numpy_helper.from_array(np.array([a["value"]], dtype=_numpy_dtype(a["dtype"]))))


@_exports("top_k_to")
def _emit_top_k_to(e, n, ins, outs):
    a = n["attrs"]
    k = e.node("Reshape", [e.node("Cast", [ins[1]], to=TensorProto.INT64), _ints(e, [1], "k_shape")])  # TopK's K: int64 [1]
    e.node("TopK", [ins[0], k], outs, axis=a["axis"], largest=int(a["largest"]), sorted=1)


@_exports("pad_to")
def _emit_pad_to(e, n, ins, outs):
    a = n["attrs"]
    value = _scalar(e, n, a["value"]) if a["mode"] == "constant" else None
    e.node("Pad", [ins[0], e.node("Cast", [ins[1]], to=TensorProto.INT64), value], outs, mode=a["mode"])


def _range_of_doubles(e, scalars, dtype, outs):
    """esgraph's range counts and steps in double and stores each element in `dtype` (0, 1.5 by
    0.5 into i64 is [0, 0, 1]): ONNX's Range over doubles, then a Cast (Range itself takes five
    types only)."""
    if dtype == _C.f64:
        e.node("Range", scalars, outs)
    else:
        e.node("Cast", [e.node("Range", scalars)], outs, to=_dtypes.ESG_TO_ONNX[dtype])


def _range_of_int64(e, scalars, dtype, outs):
    """integer_range, and range_to of integers, count exactly: ONNX's Range over int64, then a
    Cast to `dtype` unless it is i64."""
    if dtype == _C.i64:
        e.node("Range", scalars, outs)
    else:
        e.node("Cast", [e.node("Range", scalars)], outs, to=_dtypes.ESG_TO_ONNX[dtype])


@_exports("range_to")
def _emit_range_to(e, n, ins, outs):
    # Ours are [] or [1] of any type; Range's are scalars. Integers count in int64, as integer_range.
    integers = e.info["values"][n["inputs"][0]]["dtype"] not in (_C.f16, _C.bf16, _C.f32, _C.f64)
    via = TensorProto.INT64 if integers else TensorProto.DOUBLE
    scalars = [e.node("Reshape", [e.node("Cast", [x], to=via), _ints(e, [], "scalar_shape")]) for x in ins]
    (_range_of_int64 if integers else _range_of_doubles)(e, scalars, n["attrs"]["dtype"], outs)


@_exports("shift_left")
def _emit_shift_left(e, n, ins, outs):
    e.node("BitShift", ins, outs, direction="LEFT")


@_exports("shift_right")
def _emit_shift_right(e, n, ins, outs):
    e.node("BitShift", ins, outs, direction="RIGHT")


@_exports("sequence_at")
def _emit_sequence_at(e, n, ins, outs):
    # ONNX's own: the elements as a sequence, picked at the position.
    e.node("SequenceAt", [e.node("SequenceConstruct", ins[:-1]), ins[-1]], outs)


@_exports("integer_range")
def _emit_integer_range(e, n, ins, outs):
    scalars = [e.const(np.array(n["attrs"][k], np.int64), k) for k in ("start", "limit", "step")]
    _range_of_int64(e, scalars, n["attrs"]["dtype"], outs)


@_exports("range")
def _emit_range(e, n, ins, outs):
    scalars = [e.const(np.array(n["attrs"][k], np.float64), k) for k in ("start", "limit", "step")]
    _range_of_doubles(e, scalars, n["attrs"]["dtype"], outs)


def _names_read(nodes):
    """The value names `nodes` and their subgraphs read."""
    names = set()
    for node in nodes:
        names.update(node.input)
        for attr in node.attribute:
            for body in list(attr.graphs) + ([attr.g] if attr.HasField("g") else []):
                names |= _names_read(body.node) | {o.name for o in body.output}
    return names


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
    outputs = e.outputs(info["outputs"])
    read = _names_read(e.nodes) | {o.name for o in outputs}  # a constant an export replaced is left out
    initializers = [i for i in e.initializers if i.name in read]
    onnx_graph = helper.make_graph(e.nodes, info["name"], inputs, outputs, initializers)
    domains = [helper.make_opsetid(d, 1) for d in sorted(e.shared.domains)]
    model = helper.make_model(onnx_graph, opset_imports=[helper.make_opsetid("", OPSET)] + domains,
                              producer_name="esgraph", producer_version=_C.__version__)
    model.ir_version = 8
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as ex:  # a defect of the exporter: reported, not leaked
        raise ExportFailed(info["name"], [("model", f"onnx.checker: {ex}".splitlines()[0])]) from ex
    return model
