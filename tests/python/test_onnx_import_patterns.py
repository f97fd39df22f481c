"""What exporters decompose, recognized at import: a layer norm, SiLU and GELU as one op each; a
norm over other axes left as written.

See onnx_models.py for the helpers."""
import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

import esgraph  # noqa: E402
import esgraph.onnx  # noqa: E402

from onnx_models import vi, init, make, rand, close  # noqa: E402


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
