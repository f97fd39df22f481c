"""The weight-only quantizer: esgraph.quantization.quantize_blockwise against numpy's own
rounding of each block (asymmetric: within half a step of the weight, 0 exact; symmetric:
within one step, no zero points), and esgraph.onnx.quantize_weights on an ONNX model with a
tied embedding (a Gather and a MatMul reading one table) and a Gemm with transB and a bias: the
result runs in ONNX Runtime and in esgraph with the same outputs, stores the table once as
codes, and stays within the quantization's error of the f32 model's outputs."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import esgraph
import esgraph.onnx
from esgraph.quantization import dequantize_blockwise, quantize_blockwise

ort = pytest.importorskip("onnxruntime")


def steps(scales, k, block_size):
    """Each weight's quantization step [K, N]."""
    return np.repeat(scales, block_size, axis=1)[:, :k].T.astype(np.float64)


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("block_size, k", [(16, 16), (32, 100), (128, 300)])
def test_asymmetric_blocks_round_to_the_nearest_code(bits, block_size, k):
    rng = np.random.default_rng(bits * 1000 + k)
    w = rng.standard_normal((k, 9)).astype(np.float32) + np.float32(0.3)
    w[0, 0] = 0.0
    b, scales, zero_points = quantize_blockwise(w, bits, block_size)
    blocks = -(-k // block_size)
    assert b.shape == (9, blocks, block_size * bits // 8) and b.dtype == np.uint8
    assert scales.shape == zero_points.shape == (9, blocks) and scales.dtype == np.float32
    back = dequantize_blockwise(b, scales, zero_points, k, bits, block_size)
    assert back.shape == w.shape
    assert np.all(np.abs(back - w) <= 0.5 * steps(scales, k, block_size) * (1 + 1e-5))
    assert back[0, 0] == 0.0  # the range holds 0, on a whole code
    # each block's extremes are codes 0 and 2^bits - 1 (or the zero point, when 0 is one)
    codes = np.round(w.T.reshape(9, -1)[:, :block_size] / scales[:, :1]) + zero_points[:, :1]
    assert codes.max() == (1 << bits) - 1 or codes.min() == 0


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_symmetric_blocks_have_no_zero_points(bits):
    rng = np.random.default_rng(bits)
    w = rng.standard_normal((64, 5)).astype(np.float32)
    b, scales, zero_points = quantize_blockwise(w, bits, 32, symmetric=True)
    assert zero_points is None
    back = dequantize_blockwise(b, scales, None, 64, bits, 32)
    assert np.all(np.abs(back - w) <= steps(scales, 64, 32) * (1 + 1e-5))


def test_padding_codes_past_k_are_zero_and_zero_blocks_are_exact():
    w = np.zeros((20, 3), np.float32)
    w[:, 1] = np.linspace(-1, 1, 20)
    b, scales, zero_points = quantize_blockwise(w, 4, 16)
    codes = np.stack([b & 15, b >> 4], axis=-1).reshape(3, -1)
    assert np.all(codes[:, 20:] == 0)
    assert np.all(dequantize_blockwise(b, scales, zero_points, 20, 4, 16)[:, 0] == 0)


@pytest.mark.parametrize("w, kwargs, message", [
    (np.ones(8, np.float32), {}, r"a float matrix \[K, N\], got float32 \[8\]"),
    (np.ones((8, 2), np.int32), {}, "a float matrix"),
    (np.full((8, 2), np.nan, np.float32), {}, "NaN or infinite"),
    (np.ones((8, 2), np.float32), {"bits": 3}, "bits must be 2, 4 or 8, got 3"),
    (np.ones((8, 2), np.float32), {"block_size": 24}, "block_size must be a power of two of at least 16, got 24"),
    (np.ones((8, 2), np.float32), {"block_size": 8}, "at least 16, got 8"),
])
def test_bad_weights_are_refused(w, kwargs, message):
    with pytest.raises(ValueError, match=message):
        quantize_blockwise(w, **kwargs)


K, V = 48, 40


def tied_model(rng):
    """ids [1, 3] -> the embedding as columns of the head's [K, V] table (Gather along axis 1),
    its logits by the same table; and a Gemm (transB, bias) whose weights a Gather also reads."""
    table = rng.standard_normal((K, V)).astype(np.float32)
    g = rng.standard_normal((V, K)).astype(np.float32)
    nodes = [helper.make_node("Gather", ["table", "ids"], ["columns"], axis=1),  # [K, 1, 3]
             helper.make_node("Transpose", ["columns"], ["embedded"], perm=[1, 2, 0]),  # [1, 3, K]
             helper.make_node("MatMul", ["embedded", "table"], ["logits"]),
             helper.make_node("Gather", ["g", "ids"], ["rows"], axis=0),  # [1, 3, K]
             helper.make_node("Reshape", ["rows", "flat"], ["rows2"]),
             helper.make_node("Gemm", ["rows2", "g", "bias"], ["y"], transB=1)]
    inits = [numpy_helper.from_array(table, "table"), numpy_helper.from_array(g, "g"),
             numpy_helper.from_array(np.array([3, K], np.int64), "flat"),
             numpy_helper.from_array(rng.standard_normal(V).astype(np.float32), "bias")]
    graph = helper.make_graph(nodes, "tied", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 3])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 3, V]),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, V])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run_ort(model, ids):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"ids": ids})


@pytest.mark.parametrize("bits, symmetric", [(2, False), (4, False), (4, True), (8, False)])
def test_quantized_model_runs_alike_in_esgraph_and_onnx_runtime(bits, symmetric):
    rng = np.random.default_rng(bits)
    model = tied_model(rng)
    quantized = esgraph.onnx.quantize_weights(model, bits=bits, block_size=16, symmetric=symmetric)
    onnx.checker.check_model(quantized)
    ops_used = [n.op_type for n in quantized.graph.node]
    assert ops_used.count("MatMulNBits") == 2 and "MatMul" not in ops_used and "Gemm" not in ops_used
    assert {o.domain for o in quantized.opset_import} >= {"", "com.microsoft"}
    names = {i.name for i in quantized.graph.initializer}
    assert "table" not in names and "g" not in names  # each table once, as codes
    ids = np.array([[0, 7, V - 1]], np.int64)
    got = esgraph.compile(esgraph.onnx.load(quantized)).run([ids])
    theirs, f32 = run_ort(quantized, ids), run_ort(model, ids)
    for ours, peer, exact in zip(got, theirs, f32):
        assert np.abs(ours - peer).max() <= 1e-4 * np.abs(peer).max()
        # The f32 outputs within what the weights' rounding allows: a few percent at 4 bits.
        assert np.abs(ours - exact).max() <= {2: 0.6, 4: 0.1, 8: 0.01}[bits] * np.abs(exact).max()


def test_excluded_tables_stay_f32():
    model = tied_model(np.random.default_rng(0))
    quantized = esgraph.onnx.quantize_weights(model, bits=4, block_size=16, exclude=("table",))
    assert [n.op_type for n in quantized.graph.node].count("MatMulNBits") == 1
    kept = {i.name: numpy_helper.to_array(i) for i in quantized.graph.initializer}
    assert kept["table"].dtype == np.float32 and "g" not in kept
    ids = np.array([[1, 2, 3]], np.int64)
    got = esgraph.compile(esgraph.onnx.load(quantized)).run([ids])
    want = run_ort(model, ids)
    assert np.abs(got[0] - want[0]).max() <= 1e-5 * np.abs(want[0]).max()  # the f32 head, untouched


def test_a_model_given_as_a_path_or_bytes(tmp_path):
    model = tied_model(np.random.default_rng(1))
    path = tmp_path / "tied.onnx"
    onnx.save(model, path)
    from_path = esgraph.onnx.quantize_weights(str(path), bits=8, block_size=32)
    from_bytes = esgraph.onnx.quantize_weights(model.SerializeToString(), bits=8, block_size=32)
    assert from_path.SerializeToString() == from_bytes.SerializeToString()
    assert len(model.graph.node) == 6  # the model given is left as it was


def one_table_model(nodes, outputs, table, opset=17, extra=()):
    """A model over ids [1, 3] and x [1, K] reading one initializer `table` in `nodes`."""
    graph = helper.make_graph(nodes, "one table", [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 3]),
                                                   helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, K])],
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in outputs],
                              [numpy_helper.from_array(table, "table"), *extra])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_a_table_read_both_ways_is_quantized_once_each_way():
    """A square table that a MatMul reads as [K, N] and a Gemm transposed (transB) is quantized for
    each; a Gather along axis -1 reads the first's columns."""
    rng = np.random.default_rng(5)
    table = rng.standard_normal((K, K)).astype(np.float32)
    model = one_table_model([helper.make_node("MatMul", ["x", "table"], ["plain"]),
                             helper.make_node("Gemm", ["x", "table"], ["transposed"], transB=1),
                             helper.make_node("Gather", ["table", "ids"], ["columns"], axis=-1)],
                            [("plain", [1, K]), ("transposed", [1, K]), ("columns", [K, 1, 3])], table)
    quantized = esgraph.onnx.quantize_weights(model, bits=8, block_size=16)
    assert [n.op_type for n in quantized.graph.node].count("MatMulNBits") == 2
    assert "table" not in {i.name for i in quantized.graph.initializer}
    ids, x = np.array([[0, 5, K - 1]], np.int64), rng.standard_normal((1, K)).astype(np.float32)
    got = esgraph.compile(esgraph.onnx.load(quantized)).run([ids, x])
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"ids": ids, "x": x})
    for ours, exact in zip(got, want):
        assert np.abs(ours - exact).max() <= 0.01 * np.abs(exact).max()


def test_tables_other_readers_need_stay_f32():
    """A Gather of a quantized table's rows (not columns) and a read from an If's branch keep the
    f32 table beside its codes; exclude may name one table as a string."""
    rng = np.random.default_rng(6)
    table = rng.standard_normal((K, V)).astype(np.float32)
    branch = helper.make_graph([helper.make_node("Identity", ["table"], ["inner"])], "branch", [],
                               [helper.make_tensor_value_info("inner", TensorProto.FLOAT, [K, V])])
    nodes = [helper.make_node("MatMul", ["x", "table"], ["logits"]),
             helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0),
             helper.make_node("If", ["flag"], ["whole"], then_branch=branch, else_branch=branch)]
    flag = numpy_helper.from_array(np.array(True), "flag")
    model = one_table_model(nodes, [("logits", [1, V]), ("rows", [1, 3, V]), ("whole", [K, V])], table, extra=[flag])
    quantized = esgraph.onnx.quantize_weights(model, bits=4, block_size=16)
    onnx.checker.check_model(quantized)
    assert "table" in {i.name for i in quantized.graph.initializer}
    assert [n.op_type for n in quantized.graph.node].count("MatMulNBits") == 1
    ids, x = np.array([[1, 2, 3]], np.int64), rng.standard_normal((1, K)).astype(np.float32)
    got = esgraph.compile(esgraph.onnx.load(quantized)).run([ids, x])
    np.testing.assert_array_equal(got[1], table[[1, 2, 3]][None])
    np.testing.assert_array_equal(got[2], table)
    kept = esgraph.onnx.quantize_weights(model, bits=4, block_size=16, exclude="table")
    assert "MatMulNBits" not in [n.op_type for n in kept.graph.node]


def test_a_tied_gather_before_opset_10_is_refused_with_the_way_out():
    rng = np.random.default_rng(7)
    model = one_table_model([helper.make_node("MatMul", ["x", "table"], ["logits"]),
                             helper.make_node("Gather", ["table", "ids"], ["columns"], axis=1)],
                            [("logits", [1, V]), ("columns", [K, 1, 3])], rng.standard_normal((K, V)).astype(np.float32), opset=9)
    with pytest.raises(ValueError, match=r"needs opset 10 or later .* the model has 9; keep the table with exclude=\['table'\]"):
        esgraph.onnx.quantize_weights(model)
