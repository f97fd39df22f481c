"""Writes tfjs_fixtures/: a small convolutional model as a SavedModel and converted by TF.js's
own converter to graph models, float32 and quantized (uint8, uint16, float16). The converter
pins its own TensorFlow, JAX and Decision Forests, so it runs in an environment of its own, as
its README advises; the tests read what it wrote, and compare it with TensorFlow running the
SavedModel:

    python3 -m venv /tmp/tfjs && /tmp/tfjs/bin/pip install tensorflowjs==4.22.0
    /tmp/tfjs/bin/pip install --no-deps protobuf==6.31.1   # what its Decision Forests were generated with
    /tmp/tfjs/bin/python tests/python/tensorflow_frontend/make_tfjs_fixtures.py [small] [residual]

(tensorflowjs 4.22.0 resolves to TensorFlow 2.19, JAX 0.10.2 and Decision Forests 1.12.0.)
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import tensorflow as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tfjs_fixtures")


class Small(tf.Module):
    """Convolution + bias + Relu6, depthwise convolution + bias + PReLU, a batch norm, a global
    mean and a dense layer: what the converter fuses (_FusedConv2D, FusedDepthwiseConv2dNative,
    Prelu, _FusedMatMul)."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        f = lambda *s: tf.Variable(rng.standard_normal(s).astype(np.float32) * 0.5)  # noqa: E731
        self.w1, self.b1 = f(3, 3, 3, 8), f(8)
        self.dw, self.b2, self.alpha = f(3, 3, 8, 1), f(8), tf.Variable(np.linspace(0.05, 0.4, 8).astype(np.float32))
        self.scale, self.offset, self.mean = f(8), f(8), f(8)
        self.var = tf.Variable(np.abs(rng.standard_normal(8)).astype(np.float32) + 0.5)
        self.w3, self.b3 = f(8, 5), f(5)

    @tf.function(input_signature=[tf.TensorSpec([None, 16, 16, 3], tf.float32, name="image")])
    def serve(self, image):
        y = tf.nn.relu6(tf.nn.bias_add(tf.nn.conv2d(image, self.w1, 1, "SAME"), self.b1))
        y = tf.nn.bias_add(tf.nn.depthwise_conv2d(y, self.dw, [1, 2, 2, 1], "SAME"), self.b2)
        y = tf.nn.relu(y) + tf.negative(self.alpha) * tf.nn.relu(tf.negative(y))
        y = tf.compat.v1.nn.fused_batch_norm(y, self.scale, self.offset, self.mean, self.var, is_training=False)[0]
        y = tf.reduce_mean(y, axis=[1, 2])
        return {"logits": tf.nn.bias_add(tf.matmul(y, self.w3), self.b3)}


class Residual(tf.Module):
    """What TF.js's converter folds into a convolution's BiasAdd beyond a bias (Keras 3's ResNet50
    and MobileNetV3 have both): a whole tensor, the other branch of a residual, and a scalar,
    a hard sigmoid's + 3; and a depthwise convolution with no bias (fused_ops NoOp, Relu6)."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(1)
        f = lambda *s: tf.Variable(rng.standard_normal(s).astype(np.float32) * 0.5)  # noqa: E731
        self.w1, self.w2, self.w3, self.dw = f(3, 3, 3, 8), f(1, 1, 3, 8), f(1, 1, 8, 8), f(3, 3, 8, 1)

    @tf.function(input_signature=[tf.TensorSpec([None, 16, 16, 3], tf.float32, name="image")])
    def serve(self, image):
        y = tf.nn.relu(tf.nn.conv2d(image, self.w1, 1, "SAME") + tf.nn.conv2d(image, self.w2, 1, "SAME"))
        gate = tf.nn.relu6(tf.nn.conv2d(y, self.w3, 1, "SAME") + 3.0) / 6.0  # hard sigmoid, as MobileNetV3's
        d = tf.nn.relu6(tf.nn.depthwise_conv2d(y * gate, self.dw, [1, 1, 1, 1], "SAME"))
        return {"features": tf.reduce_mean(d, axis=[1, 2])}


def _convert(saved, out, flags=()):
    converter = os.path.join(os.path.dirname(sys.executable), "tensorflowjs_converter")
    subprocess.run([converter, "--input_format=tf_saved_model", "--output_format=tfjs_graph_model", *flags, saved, out],
                   check=True)


def _save(module, folder):
    shutil.rmtree(folder, ignore_errors=True)
    saved = os.path.join(folder, "saved_model")
    tf.saved_model.save(module, saved, signatures={"serving_default": module.serve})
    return saved


def small():
    """tfjs_fixtures/: Small, float32 and quantized."""
    for name in ("saved_model", "float32", "uint8", "uint16", "float16"):
        shutil.rmtree(os.path.join(OUT, name), ignore_errors=True)
    saved = os.path.join(OUT, "saved_model")
    module = Small()
    tf.saved_model.save(module, saved, signatures={"serving_default": module.serve})
    for name, flags in (("float32", []), ("uint8", ["--quantize_uint8", "*"]), ("uint16", ["--quantize_uint16", "*"]),
                        ("float16", ["--quantize_float16", "*"])):
        _convert(saved, os.path.join(OUT, name), flags)


def residual():
    """tfjs_fixtures/residual/: Residual, float32."""
    folder = os.path.join(OUT, "residual")
    _convert(_save(Residual(), folder), os.path.join(folder, "float32"))


def main():
    for name in sys.argv[1:] or ["small", "residual"]:
        {"small": small, "residual": residual}[name]()


if __name__ == "__main__":
    main()
