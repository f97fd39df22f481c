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


@pytest.mark.parametrize("value", [0.0, -0.0, 1.5])
def test_a_zero_pad_before_a_convolution_is_the_convolutions_own(value):
    """TF's ZeroPadding2D (and tf2onnx's Pad before a Conv): zeros around the height and width
    become the convolution's padding, and no pad runs; another value (or -0, whose products could
    flip an all-zero window's sign) stays a pad."""
    x, w = rand(2, 3, 9, 8), rand(4, 3, 3, 3, seed=1)
    nodes = [helper.make_node("Pad", ["x", "pads", "value"], ["p"]),
             helper.make_node("Conv", ["p", "w"], ["y"], strides=[2, 2], pads=[1, 0, 0, 1])]
    pads = np.array([0, 0, 1, 2, 0, 0, 0, 3], np.int64)
    consts = [init("pads", pads), init("value", np.float32(value)), init("w", w)]
    model = esgraph.compile(esgraph.onnx.load(make(nodes, [vi("x", shape=[2, 3, 9, 8])], [vi("y")], consts)))
    assert ("reference_ops" in model.stats() and any(r["op"] == "pad" for r in model.stats()["reference_ops"])) == (value != 0.0 or np.signbit(value))
    padded = np.pad(x, [(0, 0), (0, 0), (1, 0), (2, 3)], constant_values=value)
    padded = np.pad(padded, [(0, 0), (0, 0), (1, 0), (0, 1)])
    expected = np.zeros((2, 4, (padded.shape[2] - 3) // 2 + 1, (padded.shape[3] - 3) // 2 + 1))
    for i in range(expected.shape[2]):
        for j in range(expected.shape[3]):
            window = padded[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3].astype(np.float64)
            expected[:, :, i, j] = np.einsum("nchw,ochw->no", window, w)
    np.testing.assert_allclose(model(x), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_rows_against_numpy(mode):
    """The pad kernel copies rows whole: every mode, every axis padded, against numpy."""
    x = rand(2, 3, 4, 5)
    pads = [0, 1, 2, 3, 1, 2, 1, 2] if mode != "reflect" else [0, 1, 2, 3, 1, 2, 1, 4]
    nodes = [helper.make_node("Pad", ["x", "pads", "value"], ["y"], mode=mode)]
    consts = [init("pads", np.array(pads, np.int64)), init("value", np.float32(7.0))]
    model = esgraph.compile(esgraph.onnx.load(make(nodes, [vi("x", shape=[2, 3, 4, 5])], [vi("y")], consts)))
    width = list(zip(pads[:4], pads[4:]))
    expected = np.pad(x, width, mode=mode, **({"constant_values": 7.0} if mode == "constant" else {}))
    np.testing.assert_array_equal(model(x), expected)
