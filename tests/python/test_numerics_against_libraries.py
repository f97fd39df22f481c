"""Ops whose reference is another library: top_k and scatter against numpy, det against
numpy.linalg.det, grid_sample against torch, roi_align against torchvision.

See numerics.py for the comparison rules."""
import numpy as np
import pytest

import esgraph
from esgraph import ops

from numerics import build, run, check, rng_for, normal, f32, i32, i64


@pytest.mark.parametrize("axis, largest", [(-1, True), (0, False), (1, True)])
@pytest.mark.parametrize("dtype", [f32, i32])
def test_top_k_matches_a_stable_numpy_sort(axis, largest, dtype):
    rng = rng_for("top_k", axis, largest, dtype)
    x = rng.integers(-5, 6, (4, 7, 3)).astype(dtype)  # many ties: their order is checked too
    k = 3
    order = np.argsort(-x if largest else x, axis=axis, kind="stable")
    want_idx = np.take(order, np.arange(k), axis=axis)
    values, indices = run(lambda t: ops.top_k(t, k, axis=axis, largest=largest), x)
    check(indices, want_idx.astype(i64))
    check(values, np.take_along_axis(x, want_idx, axis=axis))


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements_matches_numpy(reduction):
    rng = rng_for("scatter_elements", reduction)
    data = rng.integers(-3, 4, (3, 5)).astype(i64)
    # distinct targets per row for `none` (ONNX leaves repeated writes unordered); any for the others
    idx = np.stack([rng.permutation(5)[:4] for _ in range(3)]) if reduction == "none" else rng.integers(-5, 5, (3, 4))
    upd = rng.integers(-3, 4, (3, 4)).astype(i64)
    want = data.copy()
    rows = np.repeat(np.arange(3)[:, None], 4, axis=1)
    cols = np.where(idx < 0, idx + 5, idx)
    if reduction == "none":
        want[rows, cols] = upd
    else:
        {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[reduction].at(want, (rows, cols), upd)
    got = run(lambda d, i, u: ops.scatter_elements(d, i, u, axis=1, reduction=reduction), data, idx.astype(i64), upd)
    check(got, want)


def test_scatter_nd_matches_numpy():
    rng = rng_for("scatter_nd")
    data = normal(rng, (4, 3, 2))
    idx = np.array([[3, 1], [0, 2], [1, 0]], dtype=i64)
    upd = normal(rng, (3, 2))
    want = data.copy()
    want[idx[:, 0], idx[:, 1]] = upd
    check(run(lambda d, i, u: ops.scatter_nd(d, i, u), data, idx, upd), want)


@pytest.mark.parametrize("reduction", ["max", "min"])
def test_scatter_nd_max_and_min_match_numpy_nan_included(reduction):
    rng = rng_for("scatter_nd", reduction)
    data = normal(rng, (4, 3))
    data[2, 1] = np.nan
    idx = np.array([[3], [0], [3], [2]], dtype=i64)  # row 3 twice
    upd = normal(rng, (4, 3))
    upd[1, 0] = np.nan
    want = data.copy()
    (np.maximum if reduction == "max" else np.minimum).at(want, idx[:, 0], upd)
    check(run(lambda d, i, u: ops.scatter_nd(d, i, u, reduction=reduction), data, idx, upd), want)


# ---- det against numpy.linalg.det --------------------------------------------------------------
@pytest.mark.parametrize("dtype", [f32, np.float64])
@pytest.mark.parametrize("shape", [(4, 4), (3, 2, 5, 5), (2, 1, 1), (2, 0, 0)])
def test_det_matches_numpy(shape, dtype):
    x = normal(rng_for("det", shape, dtype), shape).astype(dtype)
    got = run(lambda t: ops.det(t), x)
    assert got.shape == shape[:-2] and got.dtype == dtype
    np.testing.assert_allclose(got, np.linalg.det(x.astype(np.float64)).astype(dtype), rtol=1e-5, atol=1e-6)


def test_det_of_singular_and_permuted_matrices_is_exact():
    x = np.array([[[1, 2, 3], [2, 4, 6], [0, 1, 5]],   # two rows proportional
                  [[0, 0, 1], [0, 1, 0], [1, 0, 0]],   # one swap: -1
                  [[0, 0, 0], [1, 2, 3], [4, 5, 6]]], f32)
    check(run(lambda t: ops.det(t), x), np.array([0, -1, 0], f32))
    # a symbolic batch: one plan for every batch
    graph, _ = build(lambda t: ops.det(t), x, symbolic={0: [(0, "n")]})
    model = esgraph.compile(graph)
    check(model(x[:2]), np.array([0, -1], f32))


def test_det_refuses_what_is_not_square_matrices():
    with pytest.raises(esgraph.ShapeError, match="not square"):
        run(lambda t: ops.det(t), np.zeros((2, 3), f32))
    with pytest.raises(esgraph.ShapeError, match="rank >= 2"):
        run(lambda t: ops.det(t), np.zeros((3,), f32))
    with pytest.raises(esgraph.DTypeError):
        run(lambda t: ops.det(t), np.zeros((2, 2), np.int32))


# ---- grid_sample against torch's grid_sample -----------------------------------------------------
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_matches_torch(mode, padding_mode, align_corners):
    torch = pytest.importorskip("torch")
    rng = rng_for("grid_sample", mode, padding_mode, align_corners)
    x = normal(rng, (2, 3, 5, 7))
    grid = rng.uniform(-1.6, 1.6, (2, 4, 6, 2)).astype(f32)  # past the edges too, where padding decides
    grid[0, 0, :4] = [[-1, -1], [1, 1], [0, 0], [-1, 1]]   # the corners and the centre exactly
    got = run(lambda a, g: ops.grid_sample(a, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners), x, grid)
    want = torch.nn.functional.grid_sample(torch.from_numpy(x).double(), torch.from_numpy(grid).double(), mode=mode,
                                           padding_mode=padding_mode, align_corners=align_corners).float().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---- roi_align against torchvision's roi_align -----------------------------------------------------
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_roi_align_matches_torchvision(aligned, sampling_ratio):
    torch = pytest.importorskip("torch")
    tv_ops = pytest.importorskip("torchvision.ops")
    rng = rng_for("roi_align", aligned, sampling_ratio)
    x = normal(rng, (2, 3, 12, 10))
    corners = rng.uniform(-2, 22, (5, 4)).astype(f32)
    rois = np.concatenate([np.minimum(corners[:, :2], corners[:, 2:]), np.maximum(corners[:, :2], corners[:, 2:])], 1)
    batch = np.array([0, 1, 1, 0, 1], np.int64)
    mode = "half_pixel" if aligned else "output_half_pixel"
    got = run(lambda a, r, i: ops.roi_align(a, r, i, output_height=3, output_width=4, sampling_ratio=sampling_ratio,
                                            spatial_scale=0.5, coordinate_transformation_mode=mode), x, rois, batch)
    boxes = torch.from_numpy(np.concatenate([batch[:, None].astype(f32), rois], 1)).double()
    want = tv_ops.roi_align(torch.from_numpy(x).double(), boxes, (3, 4), spatial_scale=0.5, sampling_ratio=sampling_ratio,
                            aligned=aligned).float().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_roi_align_max_takes_the_largest_sample():
    # Samples on pixel centres read one pixel each: the largest of a bin's is the largest pixel.
    x = (np.arange(16, dtype=f32) + 1).reshape(1, 1, 4, 4)
    rois, batch = np.array([[0, 0, 4, 4]], f32), np.zeros(1, np.int64)
    got = run(lambda a, r, i: ops.roi_align(a, r, i, mode="max", output_height=2, output_width=2, sampling_ratio=1,
                                            coordinate_transformation_mode="output_half_pixel"), x, rois, batch)
    check(got, np.array([[[[6, 8], [14, 16]]]], f32))
    two = run(lambda a, r, i: ops.roi_align(a, r, i, mode="max", output_height=1, output_width=1, sampling_ratio=2,
                                            coordinate_transformation_mode="output_half_pixel"), x, rois, batch)
    check(two, np.array([[[[16]]]], f32))  # samples at pixels (1, 1), (1, 3), (3, 1), (3, 3)


def test_roi_align_of_a_region_of_negative_extent_takes_no_samples():
    """A region whose corners are swapped has a negative extent (half_pixel does not widen it to
    one pixel): no samples, so every bin is 0, its average of nothing. The sample count was
    converted to an integer unchecked: -1e30 rows was undefined behaviour. (torchvision refuses
    such a box: "cannot create std::vector larger than max_size()".)"""
    x = normal(rng_for("roi_negative"), (1, 2, 6, 6))
    rois, batch = np.array([[0, 4, 3, 1], [0, 0, 1, -1e30]], f32), np.zeros(2, np.int64)
    got = run(lambda a, r, i: ops.roi_align(a, r, i, output_height=2, output_width=2, coordinate_transformation_mode="half_pixel"),
              x, rois, batch)
    check(got, np.zeros((2, 2, 2, 2), f32))


def test_roi_align_refuses_a_batch_index_out_of_range():
    x, rois = np.zeros((1, 1, 4, 4), f32), np.array([[0, 0, 2, 2]], f32)
    graph, _ = build(lambda a, r, i: ops.roi_align(a, r, i), x, rois, np.zeros(1, np.int64))
    model = esgraph.compile(graph)
    with pytest.raises(esgraph.InvalidArgumentError, match="batch index 1 of region 0 is out of range for 1 images"):
        model(x, rois, np.array([1], np.int64))
    check(model(x + 1, rois, np.array([0], np.int64)), np.ones((1, 1, 1, 1), f32))
    with pytest.raises(esgraph.ShapeError, match=r"rois must be \[R, 4\]"):
        run(lambda a, r, i: ops.roi_align(a, r, i), x, np.zeros((1, 3), f32), np.zeros(1, np.int64))


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_at_positions_that_are_not_finite_reads_0(mode, padding_mode):
    x = np.arange(1, 10, dtype=f32).reshape(1, 1, 3, 3)
    grid = np.array([[[[np.nan, 0], [np.inf, 0], [-np.inf, np.nan], [1e30, -1e30]]]], f32)
    got = run(lambda a, g: ops.grid_sample(a, g, mode=mode, padding_mode=padding_mode), x, grid)
    assert got.shape == (1, 1, 1, 4) and np.isfinite(got).all()
    check(got[0, 0, 0, :3], np.zeros(3, f32))


def test_grid_sample_refuses_bad_shapes():
    x = np.zeros((1, 2, 3, 3), f32)
    with pytest.raises(esgraph.ShapeError, match=r"grid must be \[N, Ho, Wo, 2\]"):
        run(lambda a, g: ops.grid_sample(a, g), x, np.zeros((1, 2, 2, 3), f32))
    with pytest.raises(esgraph.ShapeError, match="differ in N"):
        run(lambda a, g: ops.grid_sample(a, g), x, np.zeros((2, 2, 2, 2), f32))
    with pytest.raises(esgraph.ShapeError, match=r"x must be \[N, C, H, W\]"):
        run(lambda a, g: ops.grid_sample(a, g), np.zeros((2, 3, 3), f32), np.zeros((2, 2, 2, 2), f32))
    with pytest.raises(esgraph.AttributeValueError):
        run(lambda a, g: ops.grid_sample(a, g, mode="trilinear"), x, np.zeros((1, 2, 2, 2), f32))


def test_scatter_and_top_k_refuse_bad_input():
    x = np.zeros((2, 3), f32)
    with pytest.raises(esgraph.AttributeValueError, match="larger than the axis"):
        run(lambda t: ops.top_k(t, 4), x)
    with pytest.raises(esgraph.ShapeError, match="shape of `indices`"):
        run(lambda d, i, u: ops.scatter_elements(d, i, u), x, np.zeros((2, 3), i64), np.zeros((2, 2), f32))
    with pytest.raises(esgraph.InvalidArgumentError, match="out of range"):
        run(lambda d, i, u: ops.scatter_elements(d, i, u), x, np.full((2, 3), 7, i64), np.zeros((2, 3), f32))


def test_top_k_ranks_nan_above_every_number():
    x = np.array([1, np.nan, 5, 3, np.nan, 9, 2], f32)
    values, indices = run(lambda t: ops.top_k(t, 3), x)
    check(indices, np.array([1, 4, 5], i64))
    values, indices = run(lambda t: ops.top_k(t, 2, largest=False), x)
    check(indices, np.array([0, 6], i64))


def test_scatter_nd_with_empty_index_tuples_replaces_everything():
    data, upd = np.array([1, 2], f32), np.array([[5, 6]], f32)
    check(run(lambda d, i, u: ops.scatter_nd(d, i, u), data, np.zeros((1, 0), i64), upd), np.array([5, 6], f32))


def test_scatter_elements_refuses_indices_larger_than_data():
    with pytest.raises(esgraph.ShapeError, match="larger than `data`"):
        run(lambda d, i, u: ops.scatter_elements(d, i, u), np.zeros((1, 1), f32), np.zeros((1, 4), i64), np.zeros((1, 4), f32))
