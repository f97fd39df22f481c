"""What the ONNX importer's suites (test_onnx_*.py) share: models built with onnx.helper, and
running them imported, compiled and run, against numpy references computed independently of
esgraph."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

import esgraph
import esgraph.onnx

F32 = TensorProto.FLOAT
I64 = TensorProto.INT64


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


def mlp_model():
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
