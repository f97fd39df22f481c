"""Whole models TensorFlow makes: Keras 3 applications and tf-keras (Keras 2) models with random
weights, each frozen by TF's own convert_variables_to_constants_v2, optimized by grappler's
remapper, and saved as a SavedModel, against TensorFlow to 1e-4 of each output's largest
magnitude. Sized small (64 by 64, 75 where the model needs it) for the suite's time; their op
mix is the full models' (bench/tf_models.py runs them at 224 by 224)."""
import collections

import numpy as np
import pytest

import esgraph
from keras_apps import APPS, SMALLEST, make, save
from tf_models import Frozen, assert_matches_tensorflow, rand, serving_reference, spec, tf

keras = pytest.importorskip("keras")


def _make(name):
    if name.startswith("tf_keras."):
        pytest.importorskip("tf_keras")
    return make(name, SMALLEST.get(name, 64))


def _frozen(name, remapped):
    model = _make(name)
    size = model.input_shape[1]
    return Frozen(lambda x: model(x, training=False), spec(None, size, size, 3), remapped=remapped), size


@pytest.mark.parametrize("name", APPS)
def test_frozen_keras_model(name):
    """A dynamic batch: one graph, run at batch 2."""
    frozen, size = _frozen(name, remapped=False)
    assert_matches_tensorflow(frozen, rand(2, size, size, 3))


@pytest.mark.parametrize("name", APPS)
def test_remapped_keras_model(name):
    """Grappler's remapper fuses tf-keras's Conv2D + FusedBatchNormV3 + Relu/Relu6 into
    _FusedConv2D, and BiasAdd + activation into it and into _FusedMatMul."""
    frozen, size = _frozen(name, remapped=True)
    ops = collections.Counter(n.op for n in frozen.graph_def.node)
    if name.startswith("tf_keras"):
        assert ops["_FusedConv2D"] > 10, ops
    assert_matches_tensorflow(frozen, rand(1, size, size, 3))


@pytest.mark.parametrize("name", APPS)
def test_saved_keras_model(name, tmp_path):
    """Saved by Keras's export (tf.saved_model.save for tf-keras), read from the directory."""
    model = _make(name)
    size = model.input_shape[1]
    path = save(model, name, str(tmp_path))
    x = rand(2, size, size, 3)
    (want,) = serving_reference(path, x)
    got = esgraph.compile(esgraph.tensorflow.load(path))(x)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * float(np.max(np.abs(want))))


@pytest.mark.parametrize("fused_ops", [["BiasAdd"], ["BiasAdd", "Relu"], ["BiasAdd", "Relu6"], ["BiasAdd", "Elu"],
                                       ["BiasAdd", "LeakyRelu"], ["BiasAdd", "Add"], ["BiasAdd", "Add", "Relu"]])
def test_remapped_convolution_and_product(fused_ops):
    w, b, m, c = rand(3, 3, 4, 6, seed=1), rand(6, seed=2), rand(6 * 5 * 5, 7, seed=3), rand(7, seed=4)
    act = {"Relu": tf.nn.relu, "Relu6": tf.nn.relu6, "Elu": tf.nn.elu, "LeakyRelu": tf.nn.leaky_relu}

    def fn(x, r):
        y = tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "SAME"), b)
        if "Add" in fused_ops:
            y = y + r
        if fused_ops[-1] in act:
            y = act[fused_ops[-1]](y)
        z = tf.nn.bias_add(tf.matmul(tf.reshape(y, [-1, 6 * 5 * 5]), m), c)
        return y, act[fused_ops[-1]](z) if fused_ops[-1] in act else z
    frozen = Frozen(fn, spec(2, 5, 5, 4), spec(2, 5, 5, 6), remapped=True)
    ops = collections.Counter(n.op for n in frozen.graph_def.node)
    assert ops["_FusedConv2D"] == 1 and ops["_FusedMatMul"] == 1, ops
    assert_matches_tensorflow(frozen, rand(2, 5, 5, 4), rand(2, 5, 5, 6, seed=5))
