"""Weight-only quantization of an ONNX model: each product with a constant f32 matrix (MatMul, and
Gemm without transA) becomes ONNX Runtime's com.microsoft MatMulNBits, its weights quantized in
blocks along K (esgraph.quantization.quantize_blockwise). A table that a Gather also reads (a
decoder's embedding tied to its LM head) is stored once, as codes: the Gather takes the rows'
codes, scales and zero points and dequantizes them with standard ops. Both esgraph and ONNX
Runtime run the result."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..quantization import quantize_blockwise

_MS = "com.microsoft"


def quantize_weights(model, bits=4, block_size=32, symmetric=False, exclude=()):
    """A copy of `model` (a ModelProto, or an .onnx file's path or bytes) with its constant f32
    weight matrices quantized to `bits` (2, 4 or 8) in blocks of `block_size` along K, per column.
    `exclude` names initializers to keep in f32 (an embedding table: its products and Gathers
    stay as they are)."""
    if not isinstance(model, onnx.ModelProto):
        model = onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(model)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {i.name: i for i in graph.initializer}
    readers = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    quantized = {}  # initializer name -> (b, scales, zero_points, K, N, transposed) names and sizes
    nodes = []
    fresh = _Names(out)

    def weight(name, transposed):
        """The quantized form of initializer `name` ([K, N], or [N, K] when `transposed`)."""
        if name not in quantized:
            w = numpy_helper.to_array(inits[name])
            w = w.T if transposed else w
            b, scales, zeros = quantize_blockwise(w, bits, block_size, symmetric)
            names = [fresh(f"{name}_{what}") for what in ("codes", "scales", "zero_points")]
            graph.initializer.extend([numpy_helper.from_array(b, names[0]), numpy_helper.from_array(scales, names[1])])
            if zeros is not None:
                graph.initializer.append(numpy_helper.from_array(_pack_zero_points(zeros, bits), names[2]))
            quantized[name] = (names[0], names[1], names[2] if zeros is not None else "", w.shape[0], w.shape[1], transposed)
        return quantized[name]

    def takes(name):
        init = inits.get(name)
        return init is not None and name not in exclude and init.data_type == TensorProto.FLOAT and len(init.dims) == 2

    for node in graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "MatMul" and node.domain in ("", "ai.onnx") and takes(node.input[1]):
            nodes.append(_product(node.input[0], weight(node.input[1], False), node.output[0], bits, block_size, node.name))
        elif (node.op_type == "Gemm" and node.domain in ("", "ai.onnx") and takes(node.input[1]) and not attrs.get("transA", 0)
              and attrs.get("alpha", 1.0) == 1.0 and attrs.get("beta", 1.0) == 1.0):
            q = weight(node.input[1], bool(attrs.get("transB", 0)))
            if len(node.input) > 2 and node.input[2]:
                product = fresh(f"{node.output[0]}_product")
                nodes.append(_product(node.input[0], q, product, bits, block_size, node.name))
                nodes.append(helper.make_node("Add", [product, node.input[2]], [node.output[0]]))
            else:
                nodes.append(_product(node.input[0], q, node.output[0], bits, block_size, node.name))
        else:
            nodes.append(node)
    # Gathers from a quantized table read its codes; the f32 table goes when nothing else reads it.
    final = []
    for node in nodes:
        if node.op_type == "Gather" and node.input[0] in quantized:
            axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), 0)
            final.extend(_gathered_rows(node, quantized[node.input[0]], axis, bits, block_size, fresh))
        else:
            final.append(node)
    del graph.node[:]
    graph.node.extend(final)
    read = {name for node in final for name in node.input} | {o.name for o in graph.output}
    kept = [i for i in graph.initializer if i.name not in quantized or i.name in read]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    if quantized and not any(o.domain == _MS for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid(_MS, 1))
    return out


def _product(a, q, y, bits, block_size, name):
    b, scales, zeros, k, n, _ = q
    return helper.make_node("MatMulNBits", [a, b, scales, zeros], [y], name=name, domain=_MS, K=k, N=n, bits=bits,
                            block_size=block_size)


def _pack_zero_points(zeros, bits):
    """One code a block [N, blocks] packed as MatMulNBits takes them: each column's in whole bytes."""
    n, blocks = zeros.shape
    packed = np.zeros((n, -(-blocks * bits // 8)), np.uint8)
    for b in range(blocks):
        packed[:, b * bits // 8] |= (zeros[:, b] << (b * bits % 8)).astype(np.uint8)
    return packed.reshape(-1)


def _gathered_rows(node, q, axis, bits, block_size, fresh):
    """Nodes that compute `node`'s Gather of the table q holds as codes: columns of w [K, N] (axis
    1 of w, or axis 0 of the table Gemm took transposed), dequantized as matmul_nbits reads them."""
    b, scales, zeros, k, n, transposed = q
    if axis != (0 if transposed else 1):
        raise ValueError(f"Gather '{node.name}' reads the quantized table along axis {axis}, not one of its columns")
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
            base = const(float(1 << bits), dtype=np.float32)
            planes = []
            for p in range(8 // bits):
                shifted = op("Floor", [op("Div", [x, const(float(1 << (p * bits)), dtype=np.float32)])])
                code = op("Sub", [shifted, op("Mul", [op("Floor", [op("Div", [shifted, base])]), base])])
                planes.append(op("Unsqueeze", [code, const(-1)]))
            x = op("Concat", planes, axis=-1)
        return op("Reshape", [x, const(-1, width)])

    blocks = -(-k // block_size)
    ids = op("Reshape", [node.input[1], const(-1)])  # R ids
    codes = op("Reshape", [codes_of(op("Gather", [b, ids], axis=0), blocks * block_size), const(-1, blocks, block_size)])
    if zeros:
        per_column = -(-blocks * bits // 8)
        packed = op("Gather", [op("Reshape", [zeros, const(n, per_column)]), ids], axis=0)
        zero = op("Slice", [codes_of(packed, per_column * 8 // bits), const(0), const(blocks), const(1)])
        zero = op("Unsqueeze", [zero, const(-1)])
    else:
        zero = const(float(1 << (bits - 1)), dtype=np.float32)
    scale = op("Unsqueeze", [op("Gather", [scales, ids], axis=0), const(-1)])
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
