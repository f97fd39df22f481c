"""Reductions and normalizations (softmax, layer and RMS norm, arg-max/min) on seeded random data
against numpy.

See numerics.py for the comparison rules."""
import numpy as np
import pytest

import esgraph
from esgraph import ops

from numerics import build, run, check, rng_for, normal, small_ints, f32, f64, i32, i64, REDUCE, softmax_reference, layer_norm_reference


AXES = [[], [0], [1, 3], [-1], [-3, -1], [2, 0], [0, 1, 2, 3]]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("name", REDUCE)
def test_reduce_float(name, axes, keepdims):
    rng = rng_for(name, axes, keepdims)
    x = rng.uniform(0.5, 1.5, (2, 3, 4, 5)).astype(f32) if name == "reduce_prod" else normal(rng, (2, 3, 4, 5))
    axis = tuple(axes) if axes else None
    got = run(lambda t: getattr(ops, name)(t, axes=axes, keepdims=keepdims), x)
    check(got, REDUCE[name](x.astype(f64), axis=axis, keepdims=keepdims).astype(f32))


@pytest.mark.parametrize("dtype", [i32, i64])
@pytest.mark.parametrize("name", ["reduce_sum", "reduce_max", "reduce_min", "reduce_prod"])
def test_reduce_int(name, dtype):
    x = small_ints(rng_for(name, dtype), (3, 4, 2), dtype, -2, 3)  # a product of 24 stays in i32
    for axes in ([], [1], [-1, 0]):
        axis = tuple(axes) if axes else None
        got = run(lambda t: getattr(ops, name)(t, axes=axes), x)
        check(got, REDUCE[name](x, axis=axis).astype(dtype))


@pytest.mark.parametrize("name, identity", [("reduce_sum", 0.0), ("reduce_prod", 1.0)])
def test_reduce_over_an_empty_axis(name, identity):
    x = np.zeros((2, 0, 3), f32)
    check(run(lambda t: getattr(ops, name)(t, axes=[1]), x), np.full((2, 3), identity, f32))
    check(run(lambda t: getattr(ops, name)(t, axes=[1], keepdims=True), x), np.full((2, 1, 3), identity, f32))


@pytest.mark.parametrize("name", ["reduce_max", "reduce_min"])
def test_extremes_over_trailing_axes_on_the_cpu_kernel(name):
    """The CPU's row kernel: a whole tensor as one long row split over the threads (a dynamic
    quantization's range), rows of a matrix, a NaN anywhere making its row NaN as numpy's, and
    an empty axis refused as the reference refuses it."""
    rng = rng_for(name, "rows")
    ref = getattr(np, name.replace("reduce_", ""))
    x = normal(rng, (3, 100000))
    graph, _ = build(lambda t: getattr(ops, name)(t), x)
    model = esgraph.compile(graph, threads=2)
    assert model.stats()["reference_kernels"] == 0
    check(model.run([x])[0], np.asarray(ref(x), f32))
    x[2, 77777] = np.nan
    got = run(lambda t: getattr(ops, name)(t), x, threads=2)
    assert np.isnan(got)
    rows = run(lambda t: getattr(ops, name)(t, axes=[1]), x, threads=2)
    assert np.isnan(rows[2]) and (rows[:2] == ref(x[:2], axis=1)).all()
    with pytest.raises(esgraph.ShapeError, match="max/min of an empty axis"):
        run(lambda t: getattr(ops, name)(t, axes=[1]), np.zeros((2, 0), f32))


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reduce(name, axis, keepdims):
    x = small_ints(rng_for(name, axis, keepdims), (3, 4, 5), f32, 0, 4)  # ties: the first one wins
    ref = getattr(np, name)(x, axis=axis, keepdims=keepdims).astype(i64)
    check(run(lambda t: getattr(ops, name)(t, axis=axis, keepdims=keepdims), x), ref)


def test_arg_reduce_int_input():
    x = small_ints(rng_for(), (4, 6), i32, -3, 3)
    check(run(lambda t: ops.argmax(t, axis=1), x), np.argmax(x, axis=1).astype(i64))
    check(run(lambda t: ops.argmin(t, axis=0), x), np.argmin(x, axis=0).astype(i64))


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
def test_softmax_and_log_softmax(axis):
    x = normal(rng_for(axis), (3, 4, 5), scale=4.0)
    z = x.astype(f64)
    check(run(lambda t: ops.softmax(t, axis=axis), x), softmax_reference(z, axis).astype(f32))
    check(run(lambda t: ops.log_softmax(t, axis=axis), x), np.log(softmax_reference(z, axis)).astype(f32))


def test_softmax_default_axis_is_last():
    x = normal(rng_for(), (3, 4))
    check(run(ops.softmax, x), softmax_reference(x.astype(f64), -1).astype(f32))
    check(run(ops.log_softmax, x), np.log(softmax_reference(x.astype(f64), -1)).astype(f32))


@pytest.mark.parametrize("x_shape, mask_shape", [((2, 4, 5), (5,)), ((2, 4, 5), (4, 1)), ((2, 4, 5), (2, 1, 5)),
                                                ((3, 2, 4, 40), (3, 1, 1, 40)), ((3, 2, 4, 40), (1, 2, 4, 1)), ((2, 7), ())],
                         ids=str)
def test_softmax_with_scale_and_mask(x_shape, mask_shape):
    """The fast kernel's masked rows (a mask per element, per row, per batch of rows: attention's
    padding mask [N, 1, 1, S]) against numpy."""
    rng = rng_for(x_shape, mask_shape)
    x = normal(rng, x_shape)
    mask = np.where(rng.random(mask_shape) < 0.3, -1e4, 0).astype(f32)
    g = build(lambda t, m: ops.softmax(t, mask=m, scale=0.5, axis=-1), x, mask)[0]
    model = esgraph.compile(g)
    logits = f32(0.5) * x + mask  # in f32, as the kernel forms them (adding -1e4 rounds x's low bits away)
    check(model(x, mask), softmax_reference(logits.astype(f64), -1).astype(f32))
    assert model.stats()["fast_kernels"] == 1


def test_softmax_of_large_values_is_stable():
    x = np.array([[1000, 1001, 1002], [-1000, -1000, -1000]], f32)
    check(run(ops.softmax, x), softmax_reference(x.astype(f64), -1).astype(f32))
    check(run(ops.log_softmax, x), np.log(softmax_reference(x.astype(f64), -1)).astype(f32))


def _rms_norm(x, axis, scale=None, eps=1e-6):
    axes = tuple(range(axis % x.ndim, x.ndim))
    return x / np.sqrt((x * x).mean(axes, keepdims=True) + eps) * (1 if scale is None else scale)


@pytest.mark.parametrize("with_scale, with_bias", [(False, False), (True, False), (True, True), (False, True)])
@pytest.mark.parametrize("axis", [-1, 1, -2, 2])
def test_layer_norm(axis, with_scale, with_bias):
    rng = rng_for(axis, with_scale, with_bias)
    x = normal(rng, (2, 3, 8)) + 3.0
    trailing = x.shape[axis % 3:]
    extra = {}
    if with_scale:
        extra["scale"] = normal(rng, trailing)
    if with_bias:
        extra["bias"] = normal(rng, trailing)
    names = list(extra)
    got = run(lambda t, *p: ops.layer_norm(t, axis=axis, **dict(zip(names, p))), x, *extra.values())
    check(got, layer_norm_reference(x.astype(f64), axis, extra.get("scale"), extra.get("bias")).astype(f32))


@pytest.mark.parametrize("n", [7, 512, 513, 100003])
def test_row_kernels_over_long_rows_and_offset_data(n):
    # The f32 row kernels sum in f32 lanes within blocks: long rows and a mean far from zero
    # with a small spread (the case a one-pass variance loses) still match float64 numpy.
    rng = rng_for(n)
    x = (rng.standard_normal((3, n)) * 0.01 + 1000.0).astype(f32)
    check(run(ops.layer_norm, x), layer_norm_reference(x.astype(f64), -1).astype(f32))
    outlier = rng.standard_normal((2, n)).astype(f32)  # an outlier first: the statistics must not center on it
    outlier[:, 0] = 100.0
    check(run(ops.layer_norm, outlier), layer_norm_reference(outlier.astype(f64), -1).astype(f32))
    huge = np.array([[3e19, 1, 1, 1]], f32)  # squares beyond f32's range
    check(run(ops.rms_norm, huge), _rms_norm(huge.astype(f64), -1).astype(f32))
    y = (rng.standard_normal((3, n)) * 4).astype(f32)
    check(run(ops.softmax, y), softmax_reference(y.astype(f64), -1).astype(f32))
    check(run(lambda t: ops.softmax(t, scale=-0.5), y), softmax_reference(-0.5 * y.astype(f64), -1).astype(f32))


def test_layer_norm_epsilon():
    x = np.array([[1, 1.1, 0.9, 1.0]], f32)
    check(run(lambda t: ops.layer_norm(t, epsilon=0.5), x), layer_norm_reference(x.astype(f64), -1, eps=0.5).astype(f32))


@pytest.mark.parametrize("with_scale", [False, True])
@pytest.mark.parametrize("axis", [-1, -2, 1])
def test_rms_norm(axis, with_scale):
    rng = rng_for(axis, with_scale)
    x = normal(rng, (2, 3, 8))
    scale = normal(rng, x.shape[axis % 3:]) if with_scale else None
    if with_scale:
        got = run(lambda t, s: ops.rms_norm(t, axis=axis, scale=s), x, scale)
    else:
        got = run(lambda t: ops.rms_norm(t, axis=axis), x)
    check(got, _rms_norm(x.astype(f64), axis, scale).astype(f32))


def test_rms_norm_epsilon():
    x = np.array([[0.01, -0.02, 0.03]], f32)
    check(run(lambda t: ops.rms_norm(t, epsilon=1e-3), x), _rms_norm(x.astype(f64), -1, eps=1e-3).astype(f32))
