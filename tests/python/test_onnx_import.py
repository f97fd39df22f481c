"""esgraph.onnx.load: ONNX models built with onnx.helper, imported, compiled and run against
numpy references computed independently of esgraph."""
import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from google.protobuf.message import DecodeError  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import esgraph  # noqa: E402
import esgraph.onnx  # noqa: E402

F32 = TensorProto.FLOAT
I64 = TensorProto.INT64


# ---------------------------------------------------------------------------------------------
# Helpers


def vi(name, elem_type=F32, shape=None):
    return helper.make_tensor_value_info(name, elem_type, shape)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def i64(name, values):
    return init(name, np.array(values, dtype=np.int64))


def make(nodes, inputs, outputs, initializers=(), opset=13, name="m", extra_opsets=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    return helper.make_model(graph, opset_imports=opsets)


def run(model, *inputs, **load_kwargs):
    """Imports, compiles and runs `model`; the outputs always as a list."""
    compiled = esgraph.compile(esgraph.onnx.load(model, **load_kwargs))
    return compiled.run(list(inputs))


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def close(actual, expected, rtol=1e-5, atol=1e-5):
    expected = np.asarray(expected)
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# ---------------------------------------------------------------------------------------------
# Loading: path, bytes, ModelProto and bad arguments


@pytest.fixture
def mlp():
    """x[2,4] -> MatMul W1 -> Add b1 -> Relu -> MatMul W2 -> Add b2 -> Softmax, with its weights."""
    rng = np.random.default_rng(1)
    w1, b1 = rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    w2, b2 = rng.standard_normal((8, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["features", "W1"], ["h0"]),
        helper.make_node("Add", ["h0", "B1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("MatMul", ["h2", "W2"], ["h3"]),
        helper.make_node("Add", ["h3", "B2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    model = make(nodes, [vi("features", F32, [2, 4])], [vi("probs", F32, [2, 3])],
                 [init("W1", w1), init("B1", b1), init("W2", w2), init("B2", b2)], name="mlp")

    def reference(x):
        return np_softmax(np.maximum(x @ w1 + b1, 0) @ w2 + b2, axis=-1)
    return model, reference


def test_path_bytes_and_model_proto_give_the_same_results(mlp, tmp_path):
    model, reference = mlp
    path = tmp_path / "mlp.onnx"
    path.write_bytes(model.SerializeToString())
    x = rand(2, 4)
    from_path = run(path, x)  # a pathlib.Path
    from_str_path = run(str(path), x)  # a str
    from_bytes = run(model.SerializeToString(), x)
    from_proto = run(model, x)
    close(from_proto[0], reference(x))
    for other in (from_path, from_str_path, from_bytes):
        np.testing.assert_array_equal(other[0], from_proto[0])


@pytest.mark.parametrize("bad", [42, None, 1.5, ["m.onnx"]], ids=["int", "None", "float", "list"])
def test_load_of_a_wrong_type_is_a_type_error(bad):
    with pytest.raises(TypeError, match="expected a path, bytes or onnx.ModelProto"):
        esgraph.onnx.load(bad)


def test_truncated_files_raise_or_load_but_never_crash(mlp, tmp_path):
    model, _ = mlp
    data = model.SerializeToString()
    path = tmp_path / "cut.onnx"
    decode_errors = 0
    for keep in range(len(data)):
        path.write_bytes(data[:keep])
        try:
            graph = esgraph.onnx.load(path)
        except esgraph.FormatError as e:  # protobuf's own error, as its cause
            decode_errors += isinstance(e.__cause__, DecodeError)
            continue
        except (esgraph.Error, ValueError):  # a message cut at a field boundary may parse
            continue
        graph.verify()
        esgraph.compile(graph)
    # Most cuts fall inside a field (a tensor's raw bytes, a name): protobuf refuses them.
    assert decode_errors > len(data) // 2
    path.write_bytes(data[:-1])
    with pytest.raises(esgraph.FormatError, match="is not an ONNX model: DecodeError"):
        esgraph.onnx.load(path)


# ---------------------------------------------------------------------------------------------
# A small MLP


def test_mlp_matches_numpy(mlp):
    model, reference = mlp
    compiled = esgraph.compile(esgraph.onnx.load(model))
    for seed in (0, 1, 2):
        x = rand(2, 4, seed=seed)
        y = compiled(x)  # one output: one array
        assert isinstance(y, np.ndarray)
        close(y, reference(x))
        np.testing.assert_allclose(y.sum(axis=-1), 1.0, rtol=1e-5)


def test_mlp_initializers_become_constants(mlp):
    model, _ = mlp
    graph = esgraph.onnx.load(model)
    text = graph.to_text()
    assert text.startswith("graph mlp(%features: f32[2,4]) {")  # the only input
    assert text.count("constant()") == 4  # W1, B1, W2, B2
    assert "return %probs" in text
    graph.verify()
    assert esgraph.onnx.load(model, name="renamed").to_text().startswith("graph renamed(")


def test_input_and_output_names_are_preserved(mlp):
    model, reference = mlp
    compiled = esgraph.compile(esgraph.onnx.load(model))
    assert compiled.input_names == ["features"]
    assert compiled.output_names == ["probs"]
    x = rand(2, 4)
    (by_name,) = compiled.run({"features": x})
    close(by_name, reference(x))


# ---------------------------------------------------------------------------------------------
# Matrix products, convolution, pooling, normalization


@pytest.mark.parametrize("trans_a,trans_b,alpha,beta,with_c", [
    (0, 0, 1.0, 1.0, True),
    (1, 0, 0.5, 2.0, True),
    (0, 1, 2.0, 0.25, True),
    (1, 1, -1.5, 1.0, True),
    (0, 0, 1.0, 0.0, True),  # beta 0: C ignored
    (1, 1, 3.0, 1.0, False),
])
def test_gemm(trans_a, trans_b, alpha, beta, with_c):
    a, b, c = rand(3, 4, seed=1), rand(4, 5, seed=2), rand(5, seed=3)
    a_in, b_in = (a.T.copy() if trans_a else a), (b.T.copy() if trans_b else b)
    node = helper.make_node("Gemm", ["A", "B", "C"] if with_c else ["A", "B"], ["Y"],
                            transA=trans_a, transB=trans_b, alpha=alpha, beta=beta)
    model = make([node], [vi("A", F32, list(a_in.shape)), vi("B", F32, list(b_in.shape))],
                 [vi("Y", F32, [3, 5])], [init("C", c)] if with_c else [])
    expected = alpha * (a @ b) + (beta * c if with_c else 0)
    (y,) = run(model, a_in, b_in)
    close(y, expected.astype(np.float32))


def np_conv(x, w, b, strides, pads, dilations, group):
    """Direct NCHW convolution: pads are [top, left, bottom, right] as in ONNX."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    sh, sw = strides
    dh, dw = dilations
    oh = (h + pads[0] + pads[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pads[1] + pads[3] - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, m, oh, ow), dtype=np.float64)
    per_group = m // group
    for oc in range(m):
        g = oc // per_group
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg,
                           i * sh:i * sh + dh * (kh - 1) + 1:dh, j * sw:j * sw + dw * (kw - 1) + 1:dw]
                y[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3))
    if b is not None:
        y += b.reshape(1, -1, 1, 1)
    return y.astype(np.float32)


@pytest.mark.parametrize("strides,pads,dilations,group,bias", [
    ([1, 1], [0, 0, 0, 0], [1, 1], 1, True),
    ([2, 1], [1, 2, 0, 1], [1, 1], 1, True),
    ([1, 2], [1, 1, 1, 1], [1, 1], 2, True),
    ([1, 1], [2, 2, 2, 2], [2, 1], 4, False),  # depthwise
], ids=["plain", "strided-asymmetric-pads", "grouped", "depthwise-dilated"])
def test_conv(strides, pads, dilations, group, bias):
    x = rand(2, 4, 7, 6, seed=4)
    w = rand(4, 4 // group, 3, 3, seed=5)
    b = rand(4, seed=6) if bias else None
    node = helper.make_node("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["y"], kernel_shape=[3, 3],
                            strides=strides, pads=pads, dilations=dilations, group=group)
    model = make([node], [vi("x", F32, list(x.shape))], [vi("y", F32, None)],
                 [init("w", w)] + ([init("b", b)] if bias else []))
    (y,) = run(model, x)
    close(y, np_conv(x, w, b, strides, pads, dilations, group), rtol=1e-4, atol=1e-4)


def test_conv_1d_with_auto_pad_same_upper():
    x, w, b = rand(1, 2, 9, seed=7), rand(3, 2, 4, seed=8), rand(3, seed=9)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], auto_pad="SAME_UPPER", strides=[2])
    model = make([node], [vi("x", F32, [1, 2, 9])], [vi("y", F32, None)], [init("w", w), init("b", b)])
    # out = ceil(9 / 2) = 5; total padding (5 - 1) * 2 + 4 - 9 = 3: 1 before, 2 after
    expected = np_conv(x[:, :, None, :], w[:, :, None, :], b, [1, 2], [0, 1, 0, 2], [1, 1], 1)[:, :, 0, :]
    (y,) = run(model, x)
    close(y, expected, rtol=1e-4, atol=1e-4)


def np_pool(x, kernel, strides, pads, kind, count_include_pad=False):
    n, c, h, w = x.shape
    kh, kw = kernel
    sh, sw = strides
    oh = (h + pads[0] + pads[2] - kh) // sh + 1
    ow = (w + pads[1] + pads[3] - kw) // sw + 1
    y = np.zeros((n, c, oh, ow), dtype=np.float32)
    for i in range(oh):
        for j in range(ow):
            top, left = i * sh - pads[0], j * sw - pads[1]
            rows = slice(max(top, 0), min(top + kh, h))
            cols = slice(max(left, 0), min(left + kw, w))
            window = x[:, :, rows, cols]
            if kind == "max":
                y[:, :, i, j] = window.max(axis=(2, 3))
            elif count_include_pad:
                y[:, :, i, j] = window.sum(axis=(2, 3)) / (kh * kw)
            else:
                y[:, :, i, j] = window.mean(axis=(2, 3))
    return y


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_auto_pad_same_upper(op):
    x = rand(1, 2, 6, 7, seed=10)
    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 2], auto_pad="SAME_UPPER")
    model = make([node], [vi("x", F32, [1, 2, 6, 7])], [vi("y", F32, None)])
    # rows: out 3, total pad (3-1)*2+3-6 = 1 -> [0, 1]; cols: out 4, total (4-1)*2+2-7 = 1 -> [0, 1]
    expected = np_pool(x, [3, 2], [2, 2], [0, 0, 1, 1], "max" if op == "MaxPool" else "avg")
    (y,) = run(model, x)
    assert y.shape == (1, 2, 3, 4)
    close(y, expected)


@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool_count_include_pad(count_include_pad):
    x = rand(2, 3, 5, 5, seed=11) + 2.0  # away from 0: counting the padding changes every border value
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                            count_include_pad=count_include_pad)
    model = make([node], [vi("x", F32, [2, 3, 5, 5])], [vi("y", F32, None)])
    expected = np_pool(x, [3, 3], [1, 1], [1, 1, 1, 1], "avg", bool(count_include_pad))
    (y,) = run(model, x)
    close(y, expected)
    # the corner window holds 4 of the input's values: divided by 9 or by 4
    corner = x[:, :, :2, :2].sum(axis=(2, 3)) / (9 if count_include_pad else 4)
    close(y[:, :, 0, 0], corner.astype(np.float32))


def test_max_pool_with_explicit_pads_and_ceil_mode():
    x = rand(1, 1, 5, 5, seed=12)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
    model = make([node], [vi("x", F32, [1, 1, 5, 5])], [vi("y", F32, None)])
    # ceil_mode: out = ceil((5 - 2) / 2) + 1 = 3, the last window holds one row/column
    expected = np_pool(x, [2, 2], [2, 2], [0, 0, 1, 1], "max")
    (y,) = run(model, x)
    close(y, expected)


def test_batch_normalization_inference():
    x = rand(2, 3, 4, 5, seed=13)
    scale, bias = rand(3, seed=14), rand(3, seed=15)
    mean, var = rand(3, seed=16), np.abs(rand(3, seed=17)) + 0.5
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)
    model = make([node], [vi("x", F32, [2, 3, 4, 5])], [vi("y", F32, [2, 3, 4, 5])],
                 [init("s", scale), init("b", bias), init("m", mean), init("v", var)], opset=15)
    c = (1, 3, 1, 1)
    expected = (x - mean.reshape(c)) / np.sqrt(var.reshape(c) + 1e-3) * scale.reshape(c) + bias.reshape(c)
    (y,) = run(model, x)
    close(y, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_normalization_with_mean_and_inv_std_dev(axis):
    x = rand(2, 3, 4, seed=18) * 3 + 1
    normalized = x.shape[axis % 3:]
    scale, bias = rand(*normalized, seed=19), rand(*normalized, seed=20)
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y", "mean", "inv_std"],
                            axis=axis, epsilon=1e-5)
    model = make([node], [vi("x", F32, [2, 3, 4])],
                 [vi("y", F32, None), vi("mean", F32, None), vi("inv_std", F32, None)],
                 [init("scale", scale), init("bias", bias)], opset=17)
    axes = tuple(range(axis % 3, 3))
    mu = x.mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(((x - mu) ** 2).mean(axis=axes, keepdims=True) + 1e-5)
    y, mean, inv_std = run(model, x)
    close(y, (x - mu) * inv * scale + bias, rtol=1e-4, atol=1e-4)
    close(mean, mu)  # [2,1,1] or [2,3,1]: the normalized axes kept as 1
    close(inv_std, inv, rtol=1e-4)


@pytest.mark.parametrize("axis,expected_shape", [(-1, (6, 4)), (-2, (2, 12)), (0, (1, 24)), (2, (6, 4))])
def test_flatten(axis, expected_shape):
    x = rand(2, 3, 4, seed=21)
    model = make([helper.make_node("Flatten", ["x"], ["y"], axis=axis)], [vi("x", F32, [2, 3, 4])],
                 [vi("y", F32, None)])
    (y,) = run(model, x)
    close(y, x.reshape(expected_shape))


def test_softmax_opset_11_flattens_but_opset_13_does_not():
    x = rand(2, 3, 4, seed=22)

    def softmax_model(opset):
        return make([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [vi("x", F32, [2, 3, 4])],
                    [vi("y", F32, [2, 3, 4])], opset=opset)
    (old,) = run(softmax_model(11), x)
    (new,) = run(softmax_model(13), x)
    # opset 11: one softmax over the 12 values of each batch row; opset 13: over axis 1 only
    close(old, np_softmax(x.reshape(2, 12), axis=1).reshape(2, 3, 4))
    close(new, np_softmax(x, axis=1))
    np.testing.assert_allclose(old.sum(axis=(1, 2)), 1.0, rtol=1e-5)
    np.testing.assert_allclose(new.sum(axis=1), 1.0, rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# Shape operands known at import


def shape_chain(dims):
    """Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])): x as [batch, rest]."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "minus_one"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    return make(nodes, [vi("x", F32, dims)], [vi("y", F32, None)],
                [i64("zero", 0), i64("axes", [0]), i64("minus_one", [-1])])


def test_shape_chain_with_a_static_input_is_folded():
    graph = esgraph.onnx.load(shape_chain([2, 3, 4]))
    text = graph.to_text()
    assert "reshape(%x) {shape=[2,-1]}" in text
    for folded in ("shape", "gather", "unsqueeze", "concat"):
        assert f" = {folded}(" not in text  # computed while importing, not in the graph
    assert graph.node_count == 1  # the reshape alone
    x = rand(2, 3, 4, seed=23)
    close(esgraph.compile(graph)(x), x.reshape(2, 12))


def test_shape_chain_with_a_symbolic_batch_waits_for_the_input_shapes():
    # Shape of [N, 3, 4] is a run's value: the graph is imported for each batch a run brings.
    graph = esgraph.onnx.load(shape_chain(["N", 3, 4]))
    assert isinstance(graph, esgraph.onnx.ValueDependentGraph)
    assert graph.by_shapes and graph.shape_inputs == ()
    assert "waits for its inputs' shapes" in repr(graph)
    model = esgraph.compile(graph)
    for n in (2, 5, 2):
        x = rand(n, 3, 4, seed=n)
        np.testing.assert_array_equal(model(x), x.reshape(n, 12))
    assert model.stats()["graphs"] == 2
    assert "graphs per set of input shapes: 2 kept (at most 16), 2 compiled" in model.report()


def test_shape_chain_with_a_symbolic_batch_is_fixed_by_input_shapes():
    graph = esgraph.onnx.load(shape_chain(["N", 3, 4]), input_shapes={"x": [2, 3, 4]})
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(esgraph.compile(graph)(x), x.reshape(2, 12))


def test_shape_start_over_static_dims_works_with_a_symbolic_batch():
    # Shape(start=1) of [N, 3, 4] is [3, 4]: known while importing though N is not.
    nodes = [
        helper.make_node("Shape", ["x"], ["tail"], start=1),
        helper.make_node("Concat", ["minus_one", "tail"], ["shape"], axis=0),
        helper.make_node("Reshape", ["flat", "shape"], ["y"]),
    ]
    model = make(nodes, [vi("x", F32, ["N", 3, 4]), vi("flat", F32, ["N", 12])], [vi("y", F32, None)],
                 [i64("minus_one", [-1])], opset=15)
    graph = esgraph.onnx.load(model)
    assert "reshape(%flat) {shape=[-1,3,4]}" in graph.to_text()
    compiled = esgraph.compile(graph)
    for n in (1, 3):
        x, flat = rand(n, 3, 4, seed=n), rand(n, 12, seed=n + 1)
        close(compiled(x, flat), flat.reshape(n, 3, 4))


def shape_input_model():
    """Reshape(x, shape) with `shape` a graph input: needs constants= to import."""
    return make([helper.make_node("Reshape", ["x", "shape"], ["y"])],
                [vi("x", F32, [2, 3, 4]), vi("shape", I64, [2])], [vi("y", F32, None)])


def test_a_shape_given_as_a_graph_input_is_read_at_each_run():
    graph = esgraph.onnx.load(shape_input_model())
    assert isinstance(graph, esgraph.onnx.ValueDependentGraph) and graph.shape_inputs == ("shape",)
    model = esgraph.compile(graph, max_plans=2)
    assert model.input_names == ["x", "shape"]
    x = rand(2, 3, 4, seed=7)
    for shape in ([4, 6], [-1, 2], [24], [4, 6]):
        close(model(x, np.array(shape)), x.reshape(shape))
    close(model.run({"shape": np.array([3, 8]), "x": x})[0], x.reshape(3, 8))
    assert model.stats()["graphs"] == 5  # [4, 6] was dropped (at most 2 kept) before it came back
    assert "graphs per set of values of shape: 2 kept (at most 2), 5 compiled" in model.report()


@pytest.mark.parametrize("shape, message", [
    ([5, -1], "reshape: cannot reshape"),
    ([-1, -1], "-1"),
    ([-7, 2], "-7"),
])
def test_a_shape_value_the_graph_rejects_names_the_op_and_the_model_runs_on(shape, message):
    model = esgraph.compile(esgraph.onnx.load(shape_input_model()))
    x = rand(2, 3, 4, seed=8)
    with pytest.raises(ValueError, match=message):
        model(x, np.array(shape))
    close(model(x, np.array([6, 4])), x.reshape(6, 4))


def test_a_run_of_a_value_dependent_model_checks_its_inputs():
    model = esgraph.compile(esgraph.onnx.load(shape_input_model()))
    with pytest.raises(esgraph.InvalidArgumentError, match="takes 2 input"):
        model(rand(2, 3, 4))
    with pytest.raises(esgraph.InvalidArgumentError, match="no input named nope"):
        model.run({"x": rand(2, 3, 4), "shape": np.array([24]), "nope": 1})
    with pytest.raises(esgraph.InvalidArgumentError, match="max_plans"):
        esgraph.compile(esgraph.onnx.load(shape_input_model()), max_plans=-1)


def test_constants_freeze_a_shape_input():
    graph = esgraph.onnx.load(shape_input_model(), constants={"shape": np.array([4, 6])})
    compiled = esgraph.compile(graph)
    assert compiled.input_names == ["x"]  # the frozen input is no longer one
    x = rand(2, 3, 4, seed=24)
    close(compiled(x), x.reshape(4, 6))
    # a plain list works as well
    compiled = esgraph.compile(esgraph.onnx.load(shape_input_model(), constants={"shape": [-1, 2]}))
    close(compiled(x), x.reshape(12, 2))


def test_constants_naming_an_unknown_input_fail():
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(shape_input_model(), constants={"shape": [4, 6], "nope": [1]})
    (where, why), = info.value.failures
    assert where == "constants" and "nope" in why
    assert "shape" not in why


# ---------------------------------------------------------------------------------------------
# Failures: every unsupported node at once, types and shapes


def test_one_error_lists_every_unsupported_node():
    nodes = [
        helper.make_node("Bernoulli", ["x"], ["nz"], name="find"),
        helper.make_node("Frobnicate", ["x"], ["fz"], domain="com.example"),
        helper.make_node("Relu", ["x"], ["fine"]),
        helper.make_node("Cast", ["nz"], ["nzf"], to=F32),  # consumers of failures: skipped
        helper.make_node("Add", ["fz", "fine"], ["y"]),
        helper.make_node("Add", ["nzf", "y"], ["z"]),
    ]
    model = make(nodes, [vi("x", F32, [2, 3])], [vi("z", F32, None)],
                 extra_opsets=[("com.example", 1)])
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(model)
    e = info.value
    assert len(e.failures) == 2
    (where0, why0), (where1, why1) = e.failures
    assert where0 == "Bernoulli 'find' -> nz" and "no converter" in why0
    assert where1 == "Frobnicate -> fz" and "com.example" in why1
    message = str(e)
    assert "2 unsupported node(s)" in message
    assert "Bernoulli" in message and "Frobnicate" in message
    assert "Cast" not in message and "Add" not in message
    assert e.needed_constants == []


def test_unsupported_element_type_is_reported():
    model = make([helper.make_node("Identity", ["x"], ["y"])], [vi("x", TensorProto.COMPLEX64, [3])],
                 [vi("y", TensorProto.COMPLEX64, [3])])
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(model)
    assert info.value.failures == [("input 'x'", "element type COMPLEX64")]


def test_unsupported_initializer_type_is_reported():
    model = make([helper.make_node("Add", ["x", "c"], ["y"])], [vi("x", F32, [2])], [vi("y", F32, [2])],
                 [init("c", np.array([1, 2], dtype=np.complex64))])
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(model)
    assert info.value.failures == [("initializer 'c'", "element type COMPLEX64")]


@pytest.mark.parametrize("fmod", [0, 1])
def test_integer_mod_is_exact_beyond_f64(fmod):
    a = np.array([2**62 + 3, -(2**62) - 3, 7, -7, 0], np.int64)
    b = np.array([7, 7, -3, 3, 5], np.int64)
    model = make([helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)], [vi("a", I64, [5]), vi("b", I64, [5])],
                 [vi("y", I64, [5])])
    expected = np.fmod(a, b) if fmod else np.mod(a, b)
    np.testing.assert_array_equal(run(model, a, b)[0], expected)


def test_bit_shift_of_u64_and_refusal_of_signed():
    x = np.array([1, 2**63 + 1, 2**64 - 1], np.uint64)
    s = np.array([63, 1, 4], np.uint64)
    for direction, expected in (("LEFT", x << s), ("RIGHT", x >> s)):
        model = make([helper.make_node("BitShift", ["x", "s"], ["y"], direction=direction)],
                     [vi("x", TensorProto.UINT64, [3]), vi("s", TensorProto.UINT64, [3])], [vi("y", TensorProto.UINT64, [3])])
        np.testing.assert_array_equal(run(model, x, s)[0], expected)
    signed = make([helper.make_node("BitShift", ["x", "x"], ["y"], direction="LEFT")], [vi("x", I64, [3])],
                  [vi("y", I64, [3])])
    with pytest.raises(esgraph.onnx.ImportFailed, match="unsigned integers, not i64"):
        esgraph.onnx.load(signed)


def test_input_without_a_shape_is_reported_and_input_shapes_fixes_it():
    model = make([helper.make_node("Neg", ["x"], ["y"])], [vi("x", F32, None)], [vi("y", F32, None)])
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(model)
    (where, why), = info.value.failures
    assert where == "input 'x'" and "input_shapes=" in why
    graph = esgraph.onnx.load(model, input_shapes={"x": ["B", 3]})
    assert graph.to_text().startswith("graph m(%x: f32[B,3])")
    compiled = esgraph.compile(graph)
    for batch in (1, 4):
        x = rand(batch, 3, seed=batch)
        close(compiled(x), -x)


def test_input_shapes_override_the_model_shape():
    model = make([helper.make_node("Neg", ["x"], ["y"])], [vi("x", F32, [2, 3])], [vi("y", F32, None)])
    graph = esgraph.onnx.load(model, input_shapes={"x": [5, 3]})
    x = rand(5, 3)
    close(esgraph.compile(graph)(x), -x)


def test_opset_out_of_range_is_refused():
    model = make([helper.make_node("Neg", ["x"], ["y"])], [vi("x", F32, [2])], [vi("y", F32, [2])], opset=19)
    with pytest.raises(esgraph.onnx.ImportFailed, match="opset 19"):
        esgraph.onnx.load(model)


def test_graph_output_nothing_produces_is_reported():
    model = make([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F32, [3])],
                 [vi("y", F32, [3]), vi("missing", F32, [3])])
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(model)
    assert "missing" in str(info.value)


def test_constants_take_the_declared_element_type():
    model = make([helper.make_node("Add", ["x", "offset"], ["y"])], [vi("x", F32, [2]), vi("offset", F32, [2])],
                 [vi("y", F32, [2])])
    compiled = esgraph.compile(esgraph.onnx.load(model, constants={"offset": [1.0, 2.0]}))
    assert compiled.input_names == ["x"]
    close(compiled(np.array([10, 20], np.float32)), np.array([11, 22], np.float32))


# ---------------------------------------------------------------------------------------------
# Outputs that alias an input or each other


def test_graph_output_that_is_a_graph_input():
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    model = make(nodes, [vi("x", F32, [2, 3])], [vi("x", F32, [2, 3]), vi("y", F32, [2, 3])])
    graph = esgraph.onnx.load(model)
    graph.verify()
    compiled = esgraph.compile(graph)
    assert compiled.input_names == ["x"]
    assert compiled.output_names == ["x", "y"]
    x = rand(2, 3, seed=25)
    same, relu = compiled(x)
    close(same, x)
    close(relu, np.maximum(x, 0))


def test_same_value_listed_as_two_outputs():
    nodes = [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Neg", ["e"], ["n"])]
    model = make(nodes, [vi("x", F32, [3])], [vi("e", F32, [3]), vi("n", F32, [3]), vi("e", F32, [3])])
    compiled = esgraph.compile(esgraph.onnx.load(model))
    assert compiled.output_names == ["e", "n", "e"]
    x = rand(3, seed=26)
    first, negated, second = compiled.run({"x": x})
    close(first, np.exp(x))
    close(negated, -np.exp(x))
    close(second, np.exp(x))


def test_initializer_as_a_graph_output():
    c = np.array([1.5, -2.0], dtype=np.float32)
    model = make([helper.make_node("Neg", ["x"], ["y"])], [vi("x", F32, [2])],
                 [vi("c", F32, [2]), vi("y", F32, [2])], [init("c", c)])
    compiled = esgraph.compile(esgraph.onnx.load(model))
    assert compiled.output_names == ["c", "y"]
    out_c, out_y = compiled(np.array([1, 2], np.float32))
    close(out_c, c)
    close(out_y, np.array([-1, -2], np.float32))


# ---------------------------------------------------------------------------------------------
# If


def branches(then_nodes, else_nodes, then_inits=(), else_inits=()):
    then_g = helper.make_graph(then_nodes, "then", [], [vi("t", F32, None)], initializer=list(then_inits))
    else_g = helper.make_graph(else_nodes, "else", [], [vi("e", F32, None)], initializer=list(else_inits))
    return dict(then_branch=then_g, else_branch=else_g)


def test_if_with_a_constant_condition_keeps_one_branch():
    bodies = branches([helper.make_node("Mul", ["x", "two"], ["t"])], [helper.make_node("Neg", ["x"], ["e"])],
                      then_inits=[init("two", np.float32(2))])
    for cond, expected in ((True, lambda x: 2 * x), (False, lambda x: -x)):
        model = make([helper.make_node("If", ["p"], ["y"], **bodies)], [vi("x", F32, [4])], [vi("y", F32, None)],
                     [init("p", np.array(cond))])
        graph = esgraph.onnx.load(model)
        text = graph.to_text()
        assert "if(" not in text  # only the branch taken is imported
        assert ("mul(" in text) == cond and ("neg(" in text) == (not cond)
        x = rand(4, seed=27)
        close(esgraph.compile(graph)(x), expected(x))


def test_if_with_a_constant_condition_keeps_branch_values_known():
    then_g = helper.make_graph([helper.make_node("Constant", [], ["t"], value=init("v", np.array([-1, 12])))],
                               "then", [], [vi("t", I64, [2])])
    else_g = helper.make_graph([helper.make_node("Constant", [], ["e"], value=init("v", np.array([24])))],
                               "else", [], [vi("e", I64, [1])])
    nodes = [helper.make_node("If", ["p"], ["shape"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    model = make(nodes, [vi("x", F32, [2, 3, 4])], [vi("y", F32, None)], [init("p", np.array(True))])
    x = rand(2, 3, 4, seed=32)
    (y,) = run(model, x)  # the branch taken is computed from constants only
    close(y, x.reshape(2, 12))


def test_if_with_a_runtime_condition_runs_the_right_branch():
    # Both branches capture outer-scope values: the graph input x and the computed value `h`.
    bodies = branches(
        [helper.make_node("Add", ["x", "h"], ["t0"]), helper.make_node("Mul", ["t0", "three"], ["t"])],
        [helper.make_node("Sub", ["h", "x"], ["e"])],
        then_inits=[init("three", np.float32(3))])
    nodes = [helper.make_node("Exp", ["x"], ["h"]), helper.make_node("If", ["p"], ["y"], **bodies)]
    model = make(nodes, [vi("x", F32, [2, 3]), vi("p", TensorProto.BOOL, [])], [vi("y", F32, None)])
    graph = esgraph.onnx.load(model)
    assert "if(%p)" in graph.to_text()
    compiled = esgraph.compile(graph)
    x = rand(2, 3, seed=28)
    close(compiled(x, np.array(True)), (x + np.exp(x)) * 3)
    close(compiled(x, np.array(False)), np.exp(x) - x)


def test_if_branches_sharing_an_outer_initializer():
    bodies = branches([helper.make_node("Add", ["x", "c"], ["t"])], [helper.make_node("Sub", ["x", "c"], ["e"])])
    nodes = [helper.make_node("If", ["p"], ["r"], **bodies), helper.make_node("Mul", ["r", "c"], ["y"])]
    model = make(nodes, [vi("x", F32, [3]), vi("p", TensorProto.BOOL, [])], [vi("y", F32, None)],
                 [init("c", np.full(3, 10, np.float32))])
    compiled = esgraph.compile(esgraph.onnx.load(model))
    x = rand(3, seed=29)
    close(compiled(x, np.array(True)), (x + 10) * 10)
    close(compiled(x, np.array(False)), (x - 10) * 10)


# ---------------------------------------------------------------------------------------------
# Elementwise and shape ops


def test_clip_with_bounds_computed_at_run_time():
    nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])]
    model = make(nodes, [vi("x", F32, [2, 5]), vi("lo", F32, []), vi("hi", F32, [])], [vi("y", F32, None)])
    compiled = esgraph.compile(esgraph.onnx.load(model))
    assert compiled.input_names == ["x", "lo", "hi"]
    x = rand(2, 5, seed=30) * 3
    for lo, hi in ((-1.0, 1.0), (0.0, 2.5), (-0.5, -0.25)):
        close(compiled(x, np.float32(lo), np.float32(hi)), np.clip(x, lo, hi))


def test_clip_with_constant_bounds_and_a_missing_min():
    x = rand(2, 5, seed=31) * 3
    const = make([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], [vi("x", F32, [2, 5])], [vi("y", F32, None)],
                 [init("lo", np.float32(-1)), init("hi", np.float32(0.5))])
    close(run(const, x)[0], np.clip(x, -1, 0.5))
    only_max = make([helper.make_node("Clip", ["x", "", "hi"], ["y"])], [vi("x", F32, [2, 5]), vi("hi", F32, [])],
                    [vi("y", F32, None)])
    close(run(only_max, x, np.float32(0.75))[0], np.minimum(x, 0.75))
    legacy = make([helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=0.5)], [vi("x", F32, [2, 5])],
                  [vi("y", F32, None)], opset=6)
    close(run(legacy, x)[0], np.clip(x, -0.5, 0.5))


@pytest.mark.parametrize("base_type,np_type", [(TensorProto.INT32, np.int32), (TensorProto.INT64, np.int64)])
def test_pow_with_an_integer_base(base_type, np_type):
    base = np.array([2, 3, -2, 5, 7, -3], dtype=np_type)
    exponent = np.array([3, 2, 3, 0, 1, 4], dtype=np_type)
    model = make([helper.make_node("Pow", ["b", "e"], ["y"])], [vi("b", base_type, [6]), vi("e", base_type, [6])],
                 [vi("y", base_type, None)])
    (y,) = run(model, base, exponent)
    assert y.dtype == np_type
    np.testing.assert_array_equal(y, np.array([8, 9, -8, 1, 7, 81], dtype=np_type))
    # a float exponent: the result keeps the base's integer type (opset 12+)
    mixed = make([helper.make_node("Pow", ["b", "e"], ["y"])], [vi("b", base_type, [6])], [vi("y", base_type, None)],
                 [init("e", np.float32(2))])
    (y,) = run(mixed, base)
    assert y.dtype == np_type
    np.testing.assert_array_equal(y, base.astype(np.int64) ** 2)


def test_pad_with_negative_pads_crops():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    # rows: pad 1 before, crop 1 after; columns: crop 2 before, pad 1 after; fill 9
    model = make([helper.make_node("Pad", ["x", "pads", "value"], ["y"])], [vi("x", F32, [4, 5])],
                 [vi("y", F32, None)], [i64("pads", [1, -2, -1, 1]), init("value", np.float32(9))])
    expected = np.full((4, 4), 9, dtype=np.float32)
    expected[1:, :3] = x[:3, 2:]
    (y,) = run(model, x)
    close(y, expected)
    crop_only = make([helper.make_node("Pad", ["x", "pads"], ["y"])], [vi("x", F32, [4, 5])],
                     [vi("y", F32, None)], [i64("pads", [-1, 0, -2, -3])])
    close(run(crop_only, x)[0], x[1:2, :2])


def test_tile():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = make([helper.make_node("Tile", ["x", "r"], ["y"])], [vi("x", F32, [2, 3])], [vi("y", F32, None)],
                 [i64("r", [2, 3])])
    (y,) = run(model, x)
    close(y, np.tile(x, (2, 3)))
    assert y.shape == (4, 9)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode):
    b, (n, c, h, w) = 2, (2, 12, 2, 3)
    x = np.arange(n * c * h * w, dtype=np.float32).reshape(n, c, h, w)
    model = make([helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=b, mode=mode)],
                 [vi("x", F32, [n, c, h, w])], [vi("y", F32, None)])
    out_c = c // (b * b)
    expected = np.zeros((n, out_c, h * b, w * b), dtype=np.float32)
    for oc in range(out_c):
        for i in range(b):
            for j in range(b):
                src = (i * b + j) * out_c + oc if mode == "DCR" else oc * b * b + i * b + j
                expected[:, oc, i::b, j::b] = x[:, src]
    (y,) = run(model, x)
    close(y, expected)


def test_expand_is_bidirectional():
    x = np.array([[1], [2], [3]], dtype=np.float32)
    model = make([helper.make_node("Expand", ["x", "shape"], ["y"])], [vi("x", F32, [3, 1])],
                 [vi("y", F32, None)], [i64("shape", [2, 1, 4])])
    (y,) = run(model, x)
    close(y, np.broadcast_to(x, (2, 3, 4)).astype(np.float32))
    # a target shape smaller than the input keeps the input's dimensions
    smaller = make([helper.make_node("Expand", ["x", "shape"], ["y"])], [vi("x", F32, [3, 1])],
                   [vi("y", F32, None)], [i64("shape", [1])])
    close(run(smaller, x)[0], x)


def test_split_into_equal_parts():
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    model = make([helper.make_node("Split", ["x"], ["a", "b", "c"], axis=0)], [vi("x", F32, [6, 4])],
                 [vi("a", F32, None), vi("b", F32, None), vi("c", F32, None)])
    parts = run(model, x)
    assert [p.shape for p in parts] == [(2, 4)] * 3
    for part, expected in zip(parts, np.split(x, 3, axis=0)):
        close(part, expected)


def test_split_with_a_split_input():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    model = make([helper.make_node("Split", ["x", "sizes"], ["a", "b", "c"], axis=-1)], [vi("x", F32, [4, 6])],
                 [vi("a", F32, None), vi("b", F32, None), vi("c", F32, None)], [i64("sizes", [1, 2, 3])])
    a, b, c = run(model, x)
    close(a, x[:, :1])
    close(b, x[:, 1:3])
    close(c, x[:, 3:])


def test_split_with_the_split_attribute_before_opset_13():
    x = np.arange(10, dtype=np.float32)
    model = make([helper.make_node("Split", ["x"], ["a", "b"], split=[7, 3])], [vi("x", F32, [10])],
                 [vi("a", F32, None), vi("b", F32, None)], opset=11)
    a, b = run(model, x)
    close(a, x[:7])
    close(b, x[7:])


def test_split_into_uneven_parts_at_opset_18():
    x = np.arange(14, dtype=np.float32).reshape(2, 7)
    model = make([helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)], [vi("x", F32, [2, 7])],
                 [vi("a", F32, None), vi("b", F32, None), vi("c", F32, None)], opset=18)
    a, b, c = run(model, x)  # ceil(7 / 3) = 3: the last part is smaller
    close(a, x[:, :3])
    close(b, x[:, 3:6])
    close(c, x[:, 6:])


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([-1], [-(2**63)], [0], [-1]),  # reverse everything (INT64_MIN: to the beginning)
    ([8], [1], [1], [-3]),
    ([-2, 5], [0, -(2**63)], [0, -1], [-1, -2]),
    ([1, 2**63 - 1], [3, 0], [0, 1], [1, -1]),  # a start past the end clamps
], ids=["reverse", "step-3", "two-axes", "clamped"])
def test_slice_with_negative_steps(starts, ends, axes, steps):
    x = np.arange(40, dtype=np.float32).reshape(4, 10)
    model = make([helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])],
                 [vi("x", F32, [4, 10])], [vi("y", F32, None)],
                 [i64("starts", starts), i64("ends", ends), i64("axes", axes), i64("steps", steps)])
    index = [slice(None)] * 2
    for s, e, a, st in zip(starts, ends, axes, steps):
        dim = x.shape[a]
        # numpy's slices clamp like ONNX's once the sentinels are brought into range
        e = None if e < -dim else e
        index[a] = slice(s, e, st)
    (y,) = run(model, x)
    close(y, x[tuple(index)])


# ---------------------------------------------------------------------------------------------
# Symbolic dimensions


def test_symbolic_dims_from_dim_param_survive():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 2)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "y_in"], ["y"])]
    model = make(nodes, [vi("x", F32, ["batch", 4]), vi("y_in", F32, ["batch", 2])], [vi("y", F32, ["batch", 2])],
                 [init("w", w)])
    graph = esgraph.onnx.load(model)
    assert graph.to_text().startswith("graph m(%x: f32[batch,4], %y_in: f32[batch,2])")
    assert [ln for ln in graph.to_text().splitlines() if "%y = add(" in ln][0].endswith(": f32[batch,2]")
    compiled = esgraph.compile(graph)
    for batch in (1, 5):
        x, y_in = rand(batch, 4, seed=batch), rand(batch, 2, seed=batch + 10)
        close(compiled(x, y_in), x @ w + y_in, rtol=1e-5, atol=1e-5)


def _single(op, inputs, outputs, inits=(), opset=13, **attrs):
    graph = helper.make_graph([helper.make_node(op, [i[0] for i in inputs] + [t.name for t in inits], ["y"], **attrs)], op,
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info("y", *outputs)], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_log_sum_exp_of_a_row_of_minus_infinity_is_minus_infinity():
    model = _single("ReduceLogSumExp", [("x", TensorProto.FLOAT, [2, 3])], (TensorProto.FLOAT, [2, 1]), axes=[1])
    x = np.array([[-np.inf] * 3, [0, 1, 2]], np.float32)
    got = esgraph.compile(esgraph.onnx.load(model))(x)
    with np.errstate(divide="ignore"):  # log(0) is the -inf expected
        want = np.log(np.exp(x.astype(np.float64)).sum(1, keepdims=True)).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_range_beyond_exact_doubles_is_refused():
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("a", 2**53 + 1), ("l", 2**53 + 4), ("d", 1))]
    graph = helper.make_graph([helper.make_node("Range", ["a", "l", "d"], ["y"])], "r", [],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [3])], inits)
    with pytest.raises(esgraph.onnx.ImportFailed, match="exactly"):
        esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


def test_a_constant_cast_to_bf16_is_computed_at_run_time():
    init = numpy_helper.from_array(np.array([1.5, -2.25], np.float32), "c")
    graph = helper.make_graph([helper.make_node("Cast", ["c"], ["b"], to=TensorProto.BFLOAT16),
                               helper.make_node("Cast", ["b"], ["y"], to=TensorProto.FLOAT)], "bf",
                              [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [init])
    got = esgraph.compile(esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))).run([])
    np.testing.assert_array_equal(got[0], np.array([1.5, -2.25], np.float32))  # exact in bf16


def test_average_pool_counting_padding_with_ceil_mode_is_refused():
    model = _single("AveragePool", [("x", TensorProto.FLOAT, [1, 1, 5, 5])], (TensorProto.FLOAT, [1, 1, 3, 3]),
                    kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)
    with pytest.raises(esgraph.onnx.ImportFailed, match="ceil_mode"):
        esgraph.onnx.load(model)


@pytest.mark.parametrize("equation, shapes", [
    ("...ii->...i", [(2, 3, 4, 4)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("...ij,...jk", [(2, 3, 4), (4, 5)]),
    ("ii", [(4, 4)]), ("iij->j", [(3, 3, 2)]), ("i,j->ij", [(3,), (4,)]), ("b...i,b...i->b...", [(2, 3, 4), (2, 3, 4)]),
])
def test_einsum_matches_numpy(equation, shapes):
    names = [f"x{i}" for i in range(len(shapes))]
    graph = helper.make_graph([helper.make_node("Einsum", names, ["y"], equation=equation)], "einsum",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in zip(names, shapes)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    rng = np.random.default_rng(len(equation))
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    got = esgraph.compile(esgraph.onnx.load(model)).run(xs)[0]
    np.testing.assert_allclose(got, np.einsum(equation, *xs), rtol=1e-5, atol=1e-5)


def test_loop_with_a_trip_count_given_at_run_time_becomes_a_while():
    # y = x; repeat M times: y = y * 2 + 1 (the trip count is an input, so nothing unrolls)
    body = helper.make_graph(
        [helper.make_node("Mul", ["y_in", "two"], ["t"]), helper.make_node("Add", ["t", "one"], ["y_out"]),
         helper.make_node("Identity", ["c_in"], ["c_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_in", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("y_out", TensorProto.FLOAT, [3])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["m", "", "x"], ["y"], body=body)], "loop",
        [helper.make_tensor_value_info("m", TensorProto.INT64, []), helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.array(2, np.float32), "two"), numpy_helper.from_array(np.array(1, np.float32), "one")])
    model = esgraph.compile(esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])))
    x = np.array([0, 1, -1], np.float32)
    for m in (0, 1, 4):
        want = x.copy()
        for _ in range(m):
            want = want * 2 + 1
        np.testing.assert_array_equal(model.run([np.array(m, np.int64), x])[0], want)



@pytest.mark.parametrize("op, onnx_type, dtype", [("MaxPool", TensorProto.INT8, np.int8),
                                                  ("AveragePool", TensorProto.FLOAT16, np.float16)])
def test_3d_pooling_of_integer_and_half_tensors(op, onnx_type, dtype):
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], kernel_shape=[2, 2, 2], pads=[1, 1, 1, 0, 0, 0],
                                                strides=[2, 2, 2])], "pool3d",
                              [helper.make_tensor_value_info("x", onnx_type, [1, 1, 3, 3, 3])],
                              [helper.make_tensor_value_info("y", onnx_type, None)])
    x = (np.arange(27) - 13).reshape(1, 1, 3, 3, 3).astype(dtype)
    got = esgraph.compile(esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])))(x)
    want = np.zeros((1, 1, 2, 2, 2), dtype)
    for d, h, w in np.ndindex(2, 2, 2):  # windows start at 2*i - 1; the padding is not counted
        box = x[0, 0, max(2 * d - 1, 0):2 * d + 1, max(2 * h - 1, 0):2 * h + 1, max(2 * w - 1, 0):2 * w + 1]
        want[0, 0, d, h, w] = box.max() if op == "MaxPool" else box.astype(np.float64).mean()
    np.testing.assert_array_equal(got, want)


def test_scan_with_reversed_input_and_output_axis_matches_numpy():
    # state s += x_t (x read backwards along axis 1); each step outputs s * 2, stacked on axis 1
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Mul", ["s_out", "two"], ["y_t"])], "body",
        [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.array(2, np.float32), "two")])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1, scan_input_axes=[1],
                          scan_input_directions=[1], scan_output_axes=[1])], "scan",
        [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    model = esgraph.compile(esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])))
    s0, x = np.array([1, -1], np.float32), np.arange(8, dtype=np.float32).reshape(2, 4)
    state, outs = s0.copy(), []
    for t in reversed(range(4)):
        state = state + x[:, t]
        outs.append(state * 2)
    got_s, got_y = model.run([s0, x])
    np.testing.assert_array_equal(got_s, state)
    np.testing.assert_array_equal(got_y, np.stack(outs, axis=1))


def test_max_pool_indices_never_point_into_padding_and_nan_wins():
    graph = helper.make_graph([helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], strides=[2, 2],
                                                pads=[1, 1, 1, 1], dilations=[1, 1])], "pool",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    model = esgraph.compile(esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])))
    y, i = model.run([np.full((1, 1, 3, 3), -np.inf, np.float32)])
    assert (i >= 0).all() and (y == -np.inf).all()
    np.testing.assert_array_equal(i.ravel(), [0, 1, 3, 4])  # as PyTorch: the first real element of each window
    x = np.zeros((1, 1, 3, 3), np.float32)
    x[0, 0, 2, 2] = np.nan
    y, _ = model.run([x])
    assert np.isnan(y[0, 0, 1, 1]) and not np.isnan(y[0, 0, 0, 0])


def test_loop_beyond_the_unroll_limit_runs_as_a_while():
    body = helper.make_graph(
        [helper.make_node("Add", ["y_in", "one"], ["y_out"]), helper.make_node("Identity", ["c_in"], ["c_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_in", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("y_out", TensorProto.FLOAT, [1])])
    graph = helper.make_graph([helper.make_node("Loop", ["m", "", "x"], ["y"], body=body)], "long",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
                              [numpy_helper.from_array(np.array(5000, np.int64), "m"),
                               numpy_helper.from_array(np.array(1, np.float32), "one")])
    graph_in = esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    assert "while" in graph_in.to_text()
    np.testing.assert_array_equal(esgraph.compile(graph_in)(np.zeros(1, np.float32)), [5000.0])


def test_bf16_initializers_stay_bf16():
    init = helper.make_tensor("c", TensorProto.BFLOAT16, [3], [1.5, -2.0, 4.0])
    graph = helper.make_graph([helper.make_node("Add", ["x", "c"], ["y"])], "bf16",
                              [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [3])], [init])
    model = esgraph.compile(esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])))
    x_bits = np.array([0x3F80, 0x4000, 0xC000], np.uint16)  # 1, 2, -2
    y_bits = model(x_bits)
    np.testing.assert_array_equal((y_bits.astype(np.uint32) << 16).view(np.float32), [2.5, 0.0, 2.0])


def test_einsum_refuses_upper_case_letters():
    graph = helper.make_graph([helper.make_node("Einsum", ["a", "b"], ["y"], equation="Ab,bc")], "e",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(esgraph.onnx.ImportFailed, match="upper-case"):
        esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


def test_supported_ops_lists_the_converters():
    ops_ = esgraph.onnx.supported_ops()
    assert ops_ == sorted(ops_)
    assert {"Conv", "Gemm", "LSTM", "Resize", "TopK", "ScatterND", "Loop", "Einsum"} <= set(ops_)
    assert len(ops_) >= 120


def test_input_shapes_naming_an_unknown_input_fail():
    model = _single("Relu", [("x", TensorProto.FLOAT, [2])], (TensorProto.FLOAT, [2]))
    with pytest.raises(esgraph.onnx.ImportFailed, match="no input named z"):
        esgraph.onnx.load(model, input_shapes={"z": [3]})



@pytest.mark.parametrize("content", [b"", b"\x00garbage\xff" * 8, b"\x08", b"\xff\xfe this is not a protobuf \x00\x01\x02"],
                         ids=["empty", "garbage", "truncated", "text"])
def test_what_is_not_an_onnx_model_is_a_format_error(tmp_path, content):
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(esgraph.FormatError, match="bad.onnx` is not an ONNX model"):
        esgraph.onnx.load(path)
    with pytest.raises(esgraph.FormatError, match=f"the {len(content)} bytes is not an ONNX model"):
        esgraph.onnx.load(content)
    with pytest.raises(esgraph.FormatError, match="with outputs"):
        esgraph.onnx.load(onnx.ModelProto())


# ---------------------------------------------------------------------------------------------
# External data: read from the model's folder only
def _with_external_data(model, folder, location="weights.bin"):
    """The model saved in `folder` with every initializer in one external file; returns its path."""
    folder.mkdir(exist_ok=True)
    path = folder / "m.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=location,
                    size_threshold=0)
    return path


def _relocate(path, location):
    """The saved model with every external location rewritten (its data left where it was)."""
    m = onnx.load(str(path), load_external_data=False)
    for t in m.graph.initializer:
        for entry in t.external_data:
            if entry.key == "location":
                entry.value = location
    path.write_bytes(m.SerializeToString())


def test_external_data_in_the_models_folder_loads(mlp, tmp_path):
    model, reference = mlp
    path = _with_external_data(model, tmp_path / "model")
    x = rand(2, 4)
    close(run(path, x)[0], reference(x))
    # Bytes or a ModelProto name no folder: their external data needs one given.
    external = onnx.load(str(path), load_external_data=False)
    with pytest.raises(esgraph.FormatError, match="reads external data only from a folder passed as base_dir"):
        esgraph.onnx.load(external)
    close(esgraph.compile(esgraph.onnx.load(external, base_dir=tmp_path / "model"))(x), reference(x))
    assert onnx.external_data_helper.uses_external_data(external.graph.initializer[0])  # the caller's proto untouched


@pytest.mark.parametrize("location", ["../outside.bin", "/etc/passwd", "sub/../../outside.bin", "zero"])
def test_external_data_outside_the_models_folder_is_refused(mlp, tmp_path, location):
    model, _ = mlp
    path = _with_external_data(model, tmp_path / "model")
    (tmp_path / "outside.bin").write_bytes(b"\0" * 4096)
    (tmp_path / "model" / "zero").symlink_to("/dev/zero")  # a link inside that leads out
    _relocate(path, location)
    with pytest.raises(esgraph.FormatError, match="outside the model's folder"):
        esgraph.onnx.load(path)


def test_external_data_past_the_end_of_its_file_is_refused(mlp, tmp_path):
    model, _ = mlp
    path = _with_external_data(model, tmp_path / "model")
    (tmp_path / "model" / "weights.bin").write_bytes(b"\0" * 8)  # shorter than the tensors say
    with pytest.raises(esgraph.FormatError, match="run past the 8-byte file"):
        esgraph.onnx.load(path)


# ---------------------------------------------------------------------------------------------
# What exporters decompose, recognized


@pytest.mark.parametrize("square", ["Pow", "Mul"])
def test_an_exported_layer_norm_compiles_to_one_layer_norm(square):
    """PyTorch's ONNX export writes LayerNorm as ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add;
    compiled, the normalization is one layer_norm kernel, its scale and shift one fused group."""
    x = rand(2, 5, 16)
    gamma, beta = rand(16, seed=1), rand(16, seed=2)
    squared = (helper.make_node("Pow", ["d", "two"], ["sq"]) if square == "Pow"
               else helper.make_node("Mul", ["d", "d"], ["sq"]))
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1], keepdims=1),
        helper.make_node("Sub", ["x", "mean"], ["d"]),
        squared,
        helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1], keepdims=1),
        helper.make_node("Add", ["var", "eps"], ["var_eps"]),
        helper.make_node("Sqrt", ["var_eps"], ["std"]),
        helper.make_node("Div", ["d", "std"], ["normed"]),
        helper.make_node("Mul", ["normed", "gamma"], ["scaled"]),
        helper.make_node("Add", ["scaled", "beta"], ["y"]),
    ]
    consts = [init("two", np.float32(2.0)), init("eps", np.float32(1e-5)), init("gamma", gamma), init("beta", beta)]
    model = esgraph.compile(esgraph.onnx.load(make(nodes, [vi("x", shape=[2, 5, 16])], [vi("y")], consts)))
    assert "layer_norm" in model.to_dot() and model.stats()["launches"] == 2
    mean = x.mean(-1, keepdims=True)
    expected = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * gamma + beta
    close(model(x), expected)


def test_exported_silu_and_gelu_compile_to_esgraph_ops():
    """Sigmoid/Mul (SiLU) and Div/Erf/Add/Mul/Mul (GELU, as PyTorch exports nn.GELU) become one
    silu and one gelu; the graph runs as one fused kernel."""
    x = rand(3, 7)
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["s"]),
        helper.make_node("Mul", ["x", "s"], ["silu"]),
        helper.make_node("Div", ["silu", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["p"]),
        helper.make_node("Mul", ["silu", "p"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["y"]),
    ]
    consts = [init("sqrt2", np.float32(1.4142135)), init("one", np.float32(1.0)), init("half", np.float32(0.5))]
    model = esgraph.compile(esgraph.onnx.load(make(nodes, [vi("x", shape=[3, 7])], [vi("y")], consts)))
    dot = model.to_dot()
    assert "silu" in dot and "gelu" in dot and "erf" not in dot and "sigmoid" not in dot
    assert model.stats()["launches"] == 1
    silu = x.astype(np.float64) / (1 + np.exp(-x.astype(np.float64)))
    erf = np.vectorize(math.erf)
    close(model(x), (0.5 * silu * (1 + erf(silu / np.sqrt(2)))).astype(np.float32))


def test_a_norm_over_other_axes_than_the_trailing_ones_is_left_as_written():
    x = rand(4, 6)
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[0], keepdims=1),
        helper.make_node("Sub", ["x", "mean"], ["d"]),
        helper.make_node("Mul", ["d", "d"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["var"], axes=[0], keepdims=1),
        helper.make_node("Add", ["var", "eps"], ["var_eps"]),
        helper.make_node("Sqrt", ["var_eps"], ["std"]),
        helper.make_node("Div", ["d", "std"], ["y"]),
    ]
    model = esgraph.compile(esgraph.onnx.load(make(nodes, [vi("x", shape=[4, 6])], [vi("y")], [init("eps", np.float32(1e-5))])))
    assert "layer_norm" not in model.to_dot()
    mean = x.mean(0, keepdims=True)
    close(model(x), (x - mean) / np.sqrt(((x - mean) ** 2).mean(0, keepdims=True) + 1e-5))


@pytest.mark.parametrize("shape, axis, inverse, onesided, length", [
    ((2, 16, 1), 1, 0, 0, None), ((2, 16, 2), 1, 1, 0, None), ((3, 10, 1), 1, 0, 1, None),
    ((2, 12, 2), 1, 0, 0, 16), ((2, 12, 2), 1, 0, 0, 8), ((4, 6, 5, 2), 2, 0, 0, None), ((4, 6, 5, 2), 1, 1, 0, None),
])
def test_dft_matches_numpys_fft(shape, axis, inverse, onesided, length):
    """DFT (opset 17) against numpy.fft: real and complex signals, forward and inverse, one-sided,
    cut or zero-padded to dft_length, along an inner axis."""
    x = rand(*shape, seed=3)
    inputs = ["x"] + (["n"] if length else [])
    inits = [init("n", np.array(length, np.int64))] if length else []
    node = helper.make_node("DFT", inputs, ["y"], axis=axis, inverse=inverse, onesided=onesided)
    model = make([node], [vi("x", F32, list(shape))], [vi("y")], inits, opset=17)
    signal = x[..., 0] + (1j * x[..., 1] if shape[-1] == 2 else 0)
    n = length or shape[axis]
    want = (np.fft.ifft if inverse else np.fft.fft)(signal, n=n, axis=axis)
    if onesided:
        want = np.take(want, np.arange(n // 2 + 1), axis=axis)
    close(run(model, x)[0], np.stack([want.real, want.imag], -1).astype(np.float32), rtol=1e-4, atol=1e-4)


def test_max_unpool_puts_each_value_back_where_max_pool_found_it():
    torch = pytest.importorskip("torch")
    x = torch.from_numpy(rand(2, 3, 6, 8, seed=4))
    pooled, indices = torch.nn.functional.max_pool2d(x, 2, stride=2, return_indices=True)
    # PyTorch's indices count within each (image, channel) plane; ONNX's over the whole tensor.
    flat = indices + (torch.arange(6).reshape(2, 3, 1, 1) * 48)
    node = helper.make_node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
    model = make([node], [vi("x", F32, [2, 3, 3, 4]), vi("i", helper.TensorProto.INT64, [2, 3, 3, 4])], [vi("y")], opset=11)
    want = torch.nn.functional.max_unpool2d(pooled, indices, 2, stride=2)
    close(run(model, pooled.numpy(), flat.numpy())[0], want.numpy())


@pytest.mark.parametrize("channels, window, onesided", [(1, True, 1), (2, True, 0), (1, False, 0)])
def test_stft_matches_numpy_frame_by_frame(channels, window, onesided):
    """STFT (opset 17) against numpy.fft over each frame: real and complex signals, with a
    window or a frame_length, one-sided or whole."""
    x = rand(2, 50, channels, seed=5)
    win = np.hanning(12).astype(np.float32)
    inputs = ["x", "step"] + (["w"] if window else ["", "length"])
    inits = [init("step", np.array(5, np.int64))] + ([init("w", win)] if window else [init("length", np.array(12, np.int64))])
    node = helper.make_node("STFT", inputs, ["y"], onesided=onesided)
    model = make([node], [vi("x", F32, [2, 50, channels])], [vi("y")], inits, opset=17)
    signal = x[..., 0] + (1j * x[..., 1] if channels == 2 else 0)
    frames = np.stack([signal[:, i * 5:i * 5 + 12] * (win if window else 1) for i in range(1 + (50 - 12) // 5)], 1)
    want = np.fft.fft(frames, axis=-1)[..., :7 if onesided else 12]
    close(run(model, x)[0], np.stack([want.real, want.imag], -1).astype(np.float32), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# Quantized products and convolutions, against numpy's integer arithmetic


def test_qlinear_conv_with_per_channel_filter_scales_matches_numpy():
    rng = np.random.default_rng(11)
    x = rng.integers(0, 256, (1, 2, 5, 5)).astype(np.uint8)
    w = rng.integers(-128, 128, (3, 2, 3, 3)).astype(np.int8)
    x_scale, x_zp = np.float32(0.02), np.uint8(128)
    w_scale, w_zp = np.array([0.01, 0.03, 0.002], np.float32), np.zeros(3, np.int8)
    y_scale, y_zp = np.float32(0.05), np.uint8(100)
    bias = np.array([7, -300, 45], np.int32)
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], pads=[1, 1, 1, 1])
    model = make([node], [vi("x", TensorProto.UINT8, [1, 2, 5, 5])], [vi("y", TensorProto.UINT8, None)],
                 [init("xs", x_scale), init("xz", x_zp), init("w", w), init("ws", w_scale), init("wz", w_zp),
                  init("ys", y_scale), init("yz", y_zp), init("b", bias)])
    got = esgraph.compile(esgraph.onnx.load(model))(x)
    # The reference: an int64 convolution of the zero-point-free values, requantized in f32.
    xp = np.pad(x.astype(np.int64) - int(x_zp), [(0, 0), (0, 0), (1, 1), (1, 1)])
    acc = np.zeros((1, 3, 5, 5), np.int64)
    for o in range(3):
        for i in range(5):
            for j in range(5):
                acc[0, o, i, j] = (xp[0, :, i:i + 3, j:j + 3] * w[o].astype(np.int64)).sum() + bias[o]
    multiplier = (x_scale * w_scale / y_scale).astype(np.float32).reshape(3, 1, 1)
    want = np.clip(np.round(acc.astype(np.float32) * multiplier) + float(y_zp), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(got, want)


def test_conv_integer_sums_exactly():
    rng = np.random.default_rng(12)
    x = rng.integers(0, 256, (2, 3, 6, 6)).astype(np.uint8)
    w = rng.integers(0, 256, (4, 3, 3, 3)).astype(np.uint8)
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], strides=[2, 2])
    model = make([node], [vi("x", TensorProto.UINT8, [2, 3, 6, 6])], [vi("y", TensorProto.INT32, None)],
                 [init("w", w), init("xz", np.uint8(3)), init("wz", np.uint8(250))])
    got = esgraph.compile(esgraph.onnx.load(model))(x)
    xs, ws = x.astype(np.int64) - 3, w.astype(np.int64) - 250
    want = np.zeros((2, 4, 2, 2), np.int64)
    for i in range(2):
        for j in range(2):
            patch = xs[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3]
            want[:, :, i, j] = np.einsum("nchw,ochw->no", patch, ws)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)
