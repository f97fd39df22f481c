"""Weight-only quantization of an ONNX model: each product with a constant f32 matrix (MatMul, and
Gemm without transA) becomes ONNX Runtime's com.microsoft MatMulNBits, its weights quantized in
blocks along K (esgraph.quantization.quantize_blockwise). A table that a Gather also reads (a
decoder's embedding tied to its LM head) is stored once, as codes: the Gather takes the rows'
codes, scales and zero points and dequantizes them with standard ops. Both esgraph and ONNX
Runtime run the result."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..quantization import pack_zero_points, quantize_blockwise
from ._exporter import _names_read

_MS = "com.microsoft"


def quantize_weights(model, bits=4, block_size=32, symmetric=False, exclude=(), accuracy_level=0):
    """A copy of `model` (a ModelProto, or an .onnx file's path or bytes) with its constant f32
    weight matrices quantized to `bits` (2, 4 or 8) in blocks of `block_size` along K, per column:
    the weights of every MatMul, and of every Gemm without transA whose alpha and beta are 1.
    `exclude` names initializers to keep in f32 (an embedding table: its products and Gathers
    stay as they are). `accuracy_level` goes on every MatMulNBits as ONNX Runtime reads it: 4
    lets the products round their activations to int8 (docs/quantization.md)."""
    if not isinstance(model, onnx.ModelProto):
        model = onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(model)
    exclude = {exclude} if isinstance(exclude, str) else set(exclude)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {i.name: i for i in graph.initializer}
    # (initializer name, transposed) -> (b, scales, zero_points, K, N) names and sizes: a table
    # that one product reads as [K, N] and another transposed is quantized once each way.
    quantized = {}
    nodes = []
    fresh = _Names(out)

    def weight(name, transposed):
        """The quantized form of initializer `name` ([K, N], or [N, K] when `transposed`)."""
        if (name, transposed) not in quantized:
            w = numpy_helper.to_array(inits[name])
            w = w.T if transposed else w
            b, scales, zeros = quantize_blockwise(w, bits, block_size, symmetric)
            names = [fresh(f"{name}_{what}") for what in ("codes", "scales", "zero_points")]
            graph.initializer.extend([numpy_helper.from_array(b, names[0]), numpy_helper.from_array(scales, names[1])])
            if zeros is not None:
                graph.initializer.append(numpy_helper.from_array(pack_zero_points(zeros, bits), names[2]))
            quantized[name, transposed] = (names[0], names[1], names[2] if zeros is not None else "", w.shape[0], w.shape[1])
        return quantized[name, transposed]

    def takes(name):
        init = inits.get(name)
        return init is not None and name not in exclude and init.data_type == TensorProto.FLOAT and len(init.dims) == 2

    for node in graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        standard = node.domain in ("", "ai.onnx")
        if standard and node.op_type == "MatMul" and takes(node.input[1]):
            nodes.append(_product(node.input[0], weight(node.input[1], False), node.output[0], bits, block_size, node.name, accuracy_level))
        elif (standard and node.op_type == "Gemm" and takes(node.input[1]) and not attrs.get("transA", 0)
              and attrs.get("alpha", 1.0) == 1.0 and attrs.get("beta", 1.0) == 1.0):
            q = weight(node.input[1], bool(attrs.get("transB", 0)))
            if len(node.input) > 2 and node.input[2]:
                product = fresh(f"{node.output[0]}_product")
                nodes.append(_product(node.input[0], q, product, bits, block_size, node.name, accuracy_level))
                nodes.append(helper.make_node("Add", [product, node.input[2]], [node.output[0]]))
            else:
                nodes.append(_product(node.input[0], q, node.output[0], bits, block_size, node.name, accuracy_level))
        else:
            nodes.append(node)
    # A Gather of a quantized table's columns (axis 1 of [K, N], or axis 0 of the table a Gemm
    # took transposed) reads their codes; any other Gather keeps reading the f32 table.
    final = []
    for node in nodes:
        axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), 0)
        q = quantized.get((node.input[0], axis % 2 == 0)) if node.op_type == "Gather" and node.input else None
        if q is None:
            final.append(node)
            continue
        opset = next((o.version for o in out.opset_import if o.domain in ("", "ai.onnx")), 1)
        if opset < 10:
            raise ValueError(f"quantize_weights: Gather '{node.name}' of table '{node.input[0]}' needs opset 10 or later to read "
                             f"its codes (Slice's inputs), the model has {opset}; keep the table with exclude=['{node.input[0]}']")
        final.extend(_gathered_rows(node, q, axis % 2 == 0, bits, block_size, fresh))
    del graph.node[:]
    graph.node.extend(final)
    # The f32 tables go when nothing reads them any more, subgraphs and outputs included.
    gone = {name for name, _ in quantized} - (_names_read(final) | {o.name for o in graph.output})
    kept = [i for i in graph.initializer if i.name not in gone]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    inputs = [i for i in graph.input if i.name not in gone]  # initializers listed as inputs too (IR below 4)
    del graph.input[:]
    graph.input.extend(inputs)
    if quantized and not any(o.domain == _MS for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid(_MS, 1))
    return out


def _product(a, q, y, bits, block_size, name, accuracy_level):
    b, scales, zeros, k, n = q
    return helper.make_node("MatMulNBits", [a, b, scales, zeros], [y], name=name, domain=_MS, K=k, N=n, bits=bits,
                            block_size=block_size, accuracy_level=accuracy_level)


def _gathered_rows(node, q, transposed, bits, block_size, fresh):
    """Nodes that compute `node`'s Gather of the columns of w [K, N] that q holds as codes (axis 1
    of w, or axis 0 of the table a Gemm took transposed), dequantized as matmul_nbits reads them.
    Standard ops of opset 10 on: Reshape where later opsets would Unsqueeze."""
    b, scales, zeros, k, n = q
    out = node.output[0]
    made = []

    def op(op_type, inputs, **attrs):
        result = fresh(f"{out}_{op_type.lower()}")
        made.append(helper.make_node(op_type, inputs, [result], **attrs))
        return result

    def const(*values, dtype=np.int64):
        return op("Constant", [], value=numpy_helper.from_array(np.array(values, dtype)))

    def codes_of(packed, width):
        """u8 bytes [R, ...] as float codes [R, width]: each byte's codes low bits first."""
        x = op("Cast", [packed], to=TensorProto.FLOAT)
        if bits < 8:
            base, column = const(float(1 << bits), dtype=np.float32), const(-1, 1)
            planes = []
            for p in range(8 // bits):  # each byte's p-th code, one column of [bytes, planes]
                shifted = op("Floor", [op("Div", [x, const(float(1 << (p * bits)), dtype=np.float32)])])
                planes.append(op("Reshape", [op("Sub", [shifted, op("Mul", [op("Floor", [op("Div", [shifted, base])]), base])]), column]))
            x = op("Concat", planes, axis=1)
        return op("Reshape", [x, const(-1, width)])

    blocks = -(-k // block_size)
    ids = op("Reshape", [node.input[1], const(-1)])  # R ids
    codes = op("Reshape", [codes_of(op("Gather", [b, ids], axis=0), blocks * block_size), const(-1, blocks, block_size)])
    if zeros:
        per_column = -(-blocks * bits // 8)
        packed = op("Gather", [op("Reshape", [zeros, const(n, per_column)]), ids], axis=0)
        zero = op("Slice", [codes_of(packed, per_column * 8 // bits), const(0), const(blocks), const(1)])
        zero = op("Reshape", [zero, const(-1, blocks, 1)])
    else:
        zero = const(float(1 << (bits - 1)), dtype=np.float32)
    scale = op("Reshape", [op("Gather", [scales, ids], axis=0), const(-1, blocks, 1)])
    w = op("Mul", [op("Sub", [codes, zero]), scale])
    rows = op("Slice", [op("Reshape", [w, const(-1, blocks * block_size)]), const(0), const(k), const(1)])  # [R, K]
    ids_shape = op("Shape", [node.input[1]])
    if transposed:  # the table's rows: [ids..., K]
        made.append(helper.make_node("Reshape", [rows, op("Concat", [ids_shape, const(k)], axis=0)], [out]))
    else:  # w's columns: [K, ids...]
        made.append(helper.make_node("Reshape", [op("Transpose", [rows], perm=[1, 0]), op("Concat", [const(k), ids_shape], axis=0)], [out]))
    return made


class _Names:
    """Fresh value names: none a model already has."""

    def __init__(self, model):
        self.taken = {i.name for i in model.graph.initializer} | {i.name for i in model.graph.input}
        self.taken |= {o for n in model.graph.node for o in n.output}
        self.count = 0

    def __call__(self, hint):
        while True:
            self.count += 1
            name = f"{hint}__{self.count}"
            if name not in self.taken:
                self.taken.add(name)
                return name
