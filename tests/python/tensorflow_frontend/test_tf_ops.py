"""Each TF op the importer maps, against TensorFlow on the same inputs: layouts, paddings and
dtypes included. The graphs are frozen by TensorFlow itself (tf_models.Frozen)."""
import numpy as np
import pytest

import esgraph

from tf_models import Frozen, assert_matches_tensorflow, rand, spec, tf

# Convolutions and pools: NHWC, every padding, strides and dilations


@pytest.mark.parametrize("padding", ["SAME", "VALID", [[0, 0], [1, 2], [0, 3], [0, 0]]])
@pytest.mark.parametrize("strides,dilations", [(1, 1), (2, 1), (1, 2), ((2, 3), 1)])
def test_conv2d(padding, strides, dilations):
    w = rand(3, 4, 6, 8, seed=1)
    frozen = Frozen(lambda x: tf.nn.conv2d(x, w, strides=strides, padding=padding, dilations=dilations), spec(2, 11, 13, 6))
    assert_matches_tensorflow(frozen, rand(2, 11, 13, 6))


def test_grouped_conv2d():
    """ConvNeXt's and ResNeXt's: the filter reads a third of the channels."""
    w = rand(3, 3, 4, 12, seed=1)
    frozen = Frozen(lambda x: tf.nn.conv2d(x, w, 1, "SAME"), spec(1, 9, 9, 12))
    assert_matches_tensorflow(frozen, rand(1, 9, 9, 12))


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("multiplier,strides", [(1, 1), (2, 2), (3, 1)])
def test_depthwise_conv2d(padding, multiplier, strides):
    w = rand(3, 3, 5, multiplier, seed=2)
    frozen = Frozen(lambda x: tf.nn.depthwise_conv2d(x, w, [1, strides, strides, 1], padding), spec(2, 10, 9, 5))
    assert_matches_tensorflow(frozen, rand(2, 10, 9, 5))


@pytest.mark.parametrize("pool", [tf.nn.max_pool2d, tf.nn.avg_pool2d])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("ksize,strides", [(2, 2), (3, 2), (3, 1), ((2, 3), (1, 2))])
def test_pools(pool, padding, ksize, strides):
    """SAME averages divide by the elements inside the input, as TF's do."""
    frozen = Frozen(lambda x: pool(x, ksize, strides, padding), spec(2, 9, 10, 3))
    assert_matches_tensorflow(frozen, rand(2, 9, 10, 3))


@pytest.mark.parametrize("version", [1, 3])
def test_fused_batch_norm_in_inference(version):
    scale, offset, mean, var = rand(6, seed=1), rand(6, seed=2), rand(6, seed=3), np.abs(rand(6, seed=4)) + 0.1
    op = tf.raw_ops.FusedBatchNorm if version == 1 else tf.raw_ops.FusedBatchNormV3

    def fn(x):
        return tf.nn.relu6(op(x=x, scale=scale, offset=offset, mean=mean, variance=var, epsilon=1e-3, is_training=False)[0])
    frozen = Frozen(fn, spec(2, 5, 5, 6))
    assert b"FusedBatchNorm" in frozen.data
    assert_matches_tensorflow(frozen, rand(2, 5, 5, 6) * 3)


def test_bias_add_and_per_channel_arithmetic_stay_channels_first():
    """BiasAdd, a [C] multiplier and a [1, 1, 1, C] shift after a convolution: computed on its
    NCHW result, with one transpose back at the output."""
    w, b, s, t = rand(3, 3, 4, 8, seed=1), rand(8, seed=2), rand(8, seed=3), rand(1, 1, 1, 8, seed=4)

    def fn(x):
        y = tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "SAME"), b)
        return tf.nn.relu(y * s + t) - tf.sigmoid(y)
    frozen = Frozen(fn, spec(2, 6, 6, 4))
    assert_matches_tensorflow(frozen, rand(2, 6, 6, 4))
    assert transposes(frozen) == 2  # the input's and the output's


def transposes(frozen):
    """The transpose ops of the imported graph (its dot text labels each node with its op)."""
    return esgraph.tensorflow.load(frozen.data).to_dot().count('label="transpose\\n')


def test_a_cnn_pays_two_transposes():
    """Convolutions, a pad, a pool, a channel concatenation and a spatial mean: NHWC costs the
    input's transpose and nothing else (the mean's [N, C] is TF's order already)."""
    w1, w2, w3 = rand(3, 3, 3, 8, seed=1), rand(1, 1, 8, 8, seed=2), rand(3, 3, 8, 8, seed=3)

    def fn(x):
        y = tf.nn.relu(tf.nn.conv2d(tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]]), w1, 2, "VALID"))
        y = tf.nn.max_pool2d(y, 3, 2, "SAME")
        y = tf.concat([tf.nn.conv2d(y, w2, 1, "SAME"), tf.nn.conv2d(y, w3, 1, "SAME")], axis=-1)
        return tf.reduce_mean(y, axis=[1, 2])
    frozen = Frozen(fn, spec(1, 32, 32, 3))
    assert_matches_tensorflow(frozen, rand(1, 32, 32, 3))
    assert transposes(frozen) == 1


# Elementwise, with TF's broadcasting

_UNARY = ["relu", "relu6", "elu", "selu", "sigmoid", "tanh", "softplus", "softsign", "exp", "abs", "negative",
          "floor", "ceil", "round", "sign", "erf", "erfc", "sin", "cos", "square", "leaky_relu"]


@pytest.mark.parametrize("name", _UNARY)
def test_unary(name):
    fn = {"relu": tf.nn.relu, "relu6": tf.nn.relu6, "elu": tf.nn.elu, "selu": tf.nn.selu, "leaky_relu": tf.nn.leaky_relu,
          "softplus": tf.math.softplus, "softsign": tf.math.softsign}.get(name) or getattr(tf.math, name)
    x = rand(3, 7) * 4
    x[0, :3] = [0.5, -2.5, 1.5]  # rounds half to even
    assert_matches_tensorflow(Frozen(fn, spec(3, 7)), x)


@pytest.mark.parametrize("name", ["sqrt", "rsqrt", "log", "reciprocal"])
def test_unary_of_positive_values(name):
    assert_matches_tensorflow(Frozen(getattr(tf.math, name), spec(4, 5)), np.abs(rand(4, 5)) + 0.1)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "maximum", "minimum", "pow",
                                  "squared_difference"])
@pytest.mark.parametrize("b_shape", [(5,), (3, 1), (1,), ()])
def test_binary_broadcasts(name, b_shape):
    b = np.abs(rand(*b_shape, seed=1)) + 0.5 if b_shape else np.float32(1.5)
    frozen = Frozen(lambda x: getattr(tf.math, name)(x, b), spec(2, 3, 5))
    assert_matches_tensorflow(frozen, np.abs(rand(2, 3, 5)) + 0.1)


@pytest.mark.parametrize("name", ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"])
def test_comparisons_and_select(name):
    def fn(x, y):
        return tf.where(getattr(tf.math, name)(x, y), x, y * 2.0)
    x, y = rand(4, 6), rand(4, 6, seed=1)
    y[0] = x[0]
    assert_matches_tensorflow(Frozen(fn, spec(4, 6), spec(4, 6)), x, y)


def test_add_n_cast_and_int_arithmetic():
    def fn(x, i):
        return tf.math.add_n([x, x * 2.0, tf.cast(i, tf.float32)]), i * 3 + 1
    assert_matches_tensorflow(Frozen(fn, spec(2, 3), spec(2, 3, dtype="int32")), rand(2, 3),
                              np.arange(6, dtype=np.int32).reshape(2, 3))


# Shapes, slices and gathers

@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [[1, 2], [3], [0], -1, [0, 3]])
@pytest.mark.parametrize("reduce", ["reduce_mean", "reduce_sum", "reduce_max", "reduce_min"])
def test_reductions_of_a_convolution(reduce, axis, keepdims):
    """Over the NCHW value a convolution leaves: the axes and the result's order are TF's."""
    w = rand(1, 1, 3, 4, seed=1)
    frozen = Frozen(lambda x: getattr(tf.math, reduce)(tf.nn.conv2d(x, w, 1, "SAME"), axis=axis, keepdims=keepdims),
                    spec(2, 3, 5, 3))
    assert_matches_tensorflow(frozen, rand(2, 3, 5, 3))


def test_argmax_argmin_and_softmax():
    def fn(x):
        return tf.argmax(x, axis=1), tf.argmin(x, axis=0, output_type=tf.int32), tf.nn.softmax(x), tf.nn.log_softmax(x)
    assert_matches_tensorflow(Frozen(fn, spec(4, 7)), rand(4, 7))


@pytest.mark.parametrize("index", [
    (slice(1, 3), slice(None), 2),
    (Ellipsis, slice(None, None, -1)),
    (slice(None, None, 2), tf.newaxis, slice(1, None), -1),
    (-1, Ellipsis, slice(-3, None)),
    (slice(3, 0, -2), 0, tf.newaxis),
])
def test_strided_slice(index):
    assert_matches_tensorflow(Frozen(lambda x: x[index], spec(4, 5, 6)), rand(4, 5, 6))


def test_reshape_transpose_squeeze_expand_dims():
    def fn(x):
        y = tf.reshape(x, [2, -1, 3])
        y = tf.transpose(y, [2, 0, 1])
        return tf.squeeze(tf.expand_dims(y, 1), axis=1), tf.reshape(x, [-1])
    assert_matches_tensorflow(Frozen(fn, spec(2, 4, 3)), rand(2, 4, 3))


def test_flatten_after_a_convolution_reads_tf_order():
    """A Reshape reads the order of axes: the NCHW value goes back to NHWC first."""
    w = rand(3, 3, 2, 5, seed=1)
    frozen = Frozen(lambda x: tf.reshape(tf.nn.conv2d(x, w, 1, "VALID"), [-1, 4 * 4 * 5]), spec(3, 6, 6, 2))
    assert_matches_tensorflow(frozen, rand(3, 6, 6, 2))


def test_transpose_to_nchw_of_a_convolution_is_free():
    w = rand(3, 3, 2, 5, seed=1)
    frozen = Frozen(lambda x: tf.transpose(tf.nn.conv2d(x, w, 1, "SAME"), [0, 3, 1, 2]), spec(1, 6, 6, 2))
    assert_matches_tensorflow(frozen, rand(1, 6, 6, 2))
    assert transposes(frozen) == 1


def test_concat_pack_unpack_split():
    def fn(x, y):
        parts = tf.split(x, 3, axis=1)
        a, b = tf.split(y, [1, -1], axis=0)
        stacked = tf.stack([x, x * 2.0], axis=1)
        return tf.concat([parts[2], parts[0]], axis=1), b, stacked, tf.unstack(stacked, axis=1)[1] + a[0]
    assert_matches_tensorflow(Frozen(fn, spec(2, 6), spec(3, 6)), rand(2, 6), rand(3, 6, seed=1))


def test_gather_slice_pad_fill_range():
    def fn(x):
        g = tf.gather(x, [2, 0, 2], axis=1)
        s = tf.slice(x, [1, 1], [-1, 2])
        p = tf.pad(x, [[1, 0], [2, 1]], constant_values=-1.0)
        r = tf.pad(x, [[1, 1], [1, 1]], mode="REFLECT")
        f = tf.fill([2, 3], 4.0) + tf.cast(tf.range(3), tf.float32)
        return g, s, p, r, f
    assert_matches_tensorflow(Frozen(fn, spec(3, 4)), rand(3, 4))


# Products

@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True)])
def test_matmul_and_batch_matmul(ta, tb):
    w = rand(5, 4, seed=1) if not tb else rand(4, 5, seed=1)

    def fn(x, y):
        a = tf.transpose(x) if ta else x
        return tf.matmul(a, w, transpose_a=ta, transpose_b=tb), tf.matmul(y, y, adjoint_b=True)
    assert_matches_tensorflow(Frozen(fn, spec(3, 5), spec(2, 3, 4)), rand(3, 5), rand(2, 3, 4, seed=2))


def test_dense_layers_with_keras():
    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(16, activation="gelu"),
                              keras.layers.LayerNormalization(), keras.layers.Dense(3, activation="softmax")])
    frozen = Frozen(lambda x: model(x, training=False), spec(4, 10))
    assert_matches_tensorflow(frozen, rand(4, 10))


@pytest.mark.parametrize("equation,shapes", [
    ("abc,cde->abde", [(2, 3, 4), (4, 5, 6)]),      # Keras's EinsumDense: a query projection
    ("aecd,abcd->acbe", [(2, 5, 3, 4), (2, 6, 3, 4)]),  # MultiHeadAttention's scores
    ("acbe,aecd->abcd", [(2, 3, 6, 5), (2, 5, 3, 4)]),  # and its weighted values
    ("abcd,cde->abe", [(2, 3, 4, 5), (4, 5, 6)]),     # its output projection
    ("ij,jk", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,ij->i", [(3, 4), (3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ijk,kl->il", [(2, 3, 4), (4, 5)]),              # j summed alone first
    ("ijk,jk->i", [(2, 3, 4), (3, 4)]),               # two inner letters, no column
    ("bijk,bjkl->bil", [(2, 3, 4, 5), (2, 4, 5, 6)]),  # two inner letters and a batch
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(4, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("Ab,bC->AC", [(2, 3), (3, 4)]),                  # TF allows capitals
])
def test_einsum(equation, shapes):
    operands = [rand(*s, seed=k) for k, s in enumerate(shapes)]
    frozen = Frozen(lambda *xs: tf.einsum(equation, *xs), *[spec(*s) for s in shapes])
    assert_matches_tensorflow(frozen, *operands)


@pytest.mark.parametrize("method", ["bilinear", "nearest"])
@pytest.mark.parametrize("corners,centers", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("size", [(9, 14), (3, 2), (7, 5)])
def test_resize(method, corners, centers, size):
    """TF's three coordinate rules, up and down, on an image and on a convolution's NCHW result."""
    resize = tf.compat.v1.image.resize_bilinear if method == "bilinear" else tf.compat.v1.image.resize_nearest_neighbor
    w = rand(1, 1, 3, 3, seed=1)

    def fn(x):
        a = resize(x, size, align_corners=corners, half_pixel_centers=centers)
        b = resize(tf.nn.conv2d(x, w, 1, "SAME"), size, align_corners=corners, half_pixel_centers=centers)
        return a, b
    assert_matches_tensorflow(Frozen(fn, spec(2, 5, 7, 3)), rand(2, 5, 7, 3))


def test_keras_upsampling_and_image_resize():
    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((6, 6, 2)), keras.layers.Conv2D(4, 3, padding="same"),
                              keras.layers.UpSampling2D(2), keras.layers.UpSampling2D(2, interpolation="bilinear")])
    frozen = Frozen(lambda x: (model(x, training=False), tf.image.resize(x, (10, 4))), spec(None, 6, 6, 2))
    assert_matches_tensorflow(frozen, rand(3, 6, 6, 2))
