"""TF.js graph models written by TF.js's own converter (tfjs_fixtures/, made by
make_tfjs_fixtures.py in an environment of the converter's own), against TensorFlow running the
SavedModel they were converted from. Quantized weights are compared to a tolerance derived from
their quantization step."""
import json
import os
import shutil

import numpy as np
import pytest

import esgraph
from tf_models import rand, serving_reference

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tfjs_fixtures")


def _relative_step(variant):
    """The largest quantization error of any weight, relative to that weight's largest magnitude:
    half a step of the affine codes, half a float16 ulp (2^-11 of the value)."""
    if variant == "float32":
        return 0.0
    if variant == "float16":
        return 2.0 ** -11
    manifest = json.load(open(os.path.join(FIXTURES, variant, "model.json")))["weightsManifest"]
    worst = 0.0
    for w in (w for group in manifest for w in group["weights"] if "quantization" in w):  # not the int32 axes
        q = w["quantization"]
        top = max(abs(q["min"]), abs(q["min"] + q["scale"] * (255 if q["dtype"] == "uint8" else 65535)))
        worst = max(worst, q["scale"] / 2 / top)
    return worst


@pytest.mark.parametrize("variant", ["float32", "uint8", "uint16", "float16"])
def test_tfjs_graph_model_matches_the_saved_model(variant):
    graph = esgraph.tensorflow.load(os.path.join(FIXTURES, variant, "model.json"))
    model = esgraph.compile(graph)
    assert model.input_names == ["image"] and model.output_names == ["logits"]
    image = rand(3, 16, 16, 3)
    got = model(image)
    (want,) = serving_reference(os.path.join(FIXTURES, "saved_model"), image=image)
    # Four layers of weights (convolution, depthwise, batch norm, dense), each perturbing its
    # result by at most its relative step, with a margin of two: 8 steps of the output's scale.
    tolerance = max(1e-4, 8 * _relative_step(variant)) * float(np.max(np.abs(want)))
    np.testing.assert_allclose(got, want, rtol=0, atol=tolerance)
    if variant != "float32":  # the quantized weights change the result, within the bound
        assert np.max(np.abs(got - want)) > 0


def test_tfjs_ops_the_converter_fuses():
    topology = json.load(open(os.path.join(FIXTURES, "float32", "model.json")))["modelTopology"]
    ops = {n["op"] for n in topology["node"]}
    assert {"_FusedConv2D", "FusedDepthwiseConv2dNative", "_FusedMatMul"} <= ops


def test_what_the_converter_folds_into_a_bias_add():
    """tfjs_fixtures/residual: a _FusedConv2D whose BiasAdd adds the other branch of a residual
    (a whole tensor), one whose BiasAdd adds a scalar, a depthwise convolution with no bias."""
    folder = os.path.join(FIXTURES, "residual")
    topology = json.load(open(os.path.join(folder, "float32", "model.json")))["modelTopology"]
    fused = [n for n in topology["node"] if n["op"] in ("_FusedConv2D", "FusedDepthwiseConv2dNative")]
    assert len(fused) == 3
    image = rand(2, 16, 16, 3, seed=5)
    got = esgraph.compile(esgraph.tensorflow.load(os.path.join(folder, "float32", "model.json")))(image)
    (want,) = serving_reference(os.path.join(folder, "saved_model"), image=image)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * float(np.max(np.abs(want))))


def test_broken_tfjs_models_are_named(tmp_path):
    broken = tmp_path / "m"
    shutil.copytree(os.path.join(FIXTURES, "uint8"), broken)
    shard = broken / "group1-shard1of1.bin"
    data = shard.read_bytes()
    shard.write_bytes(data[:-10])
    with pytest.raises(esgraph.FormatError, match="weights manifest: ValueError: weight '.*' needs bytes"):
        esgraph.tensorflow.load(str(broken / "model.json"))
    shard.write_bytes(data + b"\x00")
    with pytest.raises(esgraph.FormatError, match="a group's weights take"):
        esgraph.tensorflow.load(str(broken / "model.json"))
    shard.write_bytes(data)
    model = json.loads((broken / "model.json").read_text())
    model["weightsManifest"][0]["paths"] = ["../../etc/passwd"]
    (broken / "model.json").write_text(json.dumps(model))
    with pytest.raises(esgraph.FormatError, match="outside the model's folder"):
        esgraph.tensorflow.load(str(broken / "model.json"))
    (broken / "model.json").write_text('{"format": "layers-model", "modelTopology": {}}')
    with pytest.raises(esgraph.FormatError, match="TF.js Layers model"):
        esgraph.tensorflow.load(str(broken / "model.json"))
    (broken / "model.json").write_text("[1, 2")
    with pytest.raises(esgraph.FormatError, match="is not a TF.js model"):
        esgraph.tensorflow.load(str(broken / "model.json"))


def test_quantized_integer_weights_round_as_tfjs_does():
    """TF.js rounds an integer weight's dequantized value (Math.round, half up); a cast would truncate."""
    from esgraph.tensorflow._tfjs import _dequantized
    codes = np.array([0, 1, 2, 3], np.uint8)
    got = _dequantized(codes, {"name": "w", "dtype": "int32"}, {"dtype": "uint8", "scale": 0.9999, "min": 0.0})
    np.testing.assert_array_equal(got, [0, 1, 2, 3])  # 0, 0.9999, 1.9998, 2.9997 rounded; truncated: 0, 0, 1, 2
