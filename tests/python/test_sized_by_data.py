"""Ops whose output sizes the data decides (nonzero, unique, non_max_suppression), compiled and
run, checked against numpy and torchvision: alone, between other ops (the stages a model runs
in), across many sizes, from ONNX, and on bad input."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import esgraph
import esgraph.onnx
from esgraph import ops

RNG = np.random.default_rng(20261202)


def compiled(build, *inputs, **options):
    """A model of the graph `build(builder, *input tensors)` makes over inputs of these arrays' dtypes and shapes."""
    with esgraph.GraphBuilder("sized") as b:
        xs = [b.input(f"x{i}", _dtype(a), list(a.shape)) for i, a in enumerate(inputs)]
        outs = build(b, *xs)
    return esgraph.compile(b.build(outs if isinstance(outs, list) else [outs]), **options)


_FROM_NUMPY = {t.numpy: t for t in esgraph.DType.__members__.values() if t != esgraph.bf16}


def _dtype(a):
    return _FROM_NUMPY[a.dtype]


def run(model, *inputs):
    out = model(*inputs)
    return list(out) if isinstance(out, tuple) else [out]


# ---- nonzero ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.uint64, np.bool_])
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), (0, 3), (1,)])
def test_nonzero_matches_numpy(dtype, shape):
    x = (RNG.integers(-2, 3, size=shape) * (RNG.random(shape) < 0.5)).astype(dtype)
    model = compiled(lambda b, x: ops.nonzero(x), x)
    got = run(model, x)[0]
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.array(np.nonzero(x)).reshape(len(shape), -1))


def test_nonzero_of_floats_counts_nan_and_not_negative_zero():
    x = np.array([0.0, -0.0, np.nan, 1e-45, -np.inf], np.float32)
    got = run(compiled(lambda b, x: ops.nonzero(x), x), x)[0]
    np.testing.assert_array_equal(got, [[2, 3, 4]])


def test_nonzero_of_a_scalar_is_one_row_as_numpy_gives():
    for v in (0.0, 3.0):
        x = np.array(v, np.float32)
        got = run(compiled(lambda b, x: ops.nonzero(x), x), x)[0]
        np.testing.assert_array_equal(got, np.zeros((1, int(v != 0)), np.int64))


# ---- unique ----------------------------------------------------------------------------------
def numpy_unique(x, axis, sorted_):
    """numpy.unique's four results; unsorted: the distinct slices in the order each first occurs."""
    y, index, inverse, counts = np.unique(x, axis=axis, return_index=True, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    if not sorted_:
        order = np.argsort(index, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        y, index, counts, inverse = np.take(y, order, axis=axis), index[order], counts[order], rank[inverse]
    return [y, index, inverse, counts]


@pytest.mark.parametrize("sorted_", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.uint64, np.uint8])
@pytest.mark.parametrize("shape, axis", [((20,), 0), ((6, 3), 0), ((3, 8), 1), ((4, 6, 2), 1), ((4, 3, 5), -1)])
def test_unique_matches_numpy(sorted_, dtype, shape, axis):
    x = RNG.integers(0, 3, size=shape).astype(dtype)
    if dtype == np.uint64:
        x = x * np.uint64(1 << 62)  # values past int64's range: ordered as unsigned
    model = compiled(lambda b, x: ops.unique(x, axis=axis, sorted=sorted_), x)
    got = run(model, x)
    want = numpy_unique(x, axis, sorted_)
    for g, w, name in zip(got, want, ["y", "indices", "inverse_indices", "counts"]):
        assert g.dtype == (x.dtype if name == "y" else np.int64), name
        np.testing.assert_array_equal(g, w, err_msg=name)


def test_unique_treats_negative_zero_as_zero():
    x = np.array([0.0, -0.0, 1.0, 0.0], np.float32)
    got = run(compiled(lambda b, x: ops.unique(x), x), x)
    np.testing.assert_array_equal(got[3], [3, 1])
    np.testing.assert_array_equal(got[2], [0, 0, 1, 0])


# ---- non_max_suppression ---------------------------------------------------------------------
def torchvision_nms(boxes, scores, max_boxes, iou, score_threshold, center):
    """The (batch, class, box) triples, per image and class, from torchvision's nms."""
    torch = pytest.importorskip("torch")
    tv_ops = pytest.importorskip("torchvision.ops")
    picked = []
    for b in range(scores.shape[0]):
        bx = boxes[b].astype(np.float64)
        if center:
            xc, yc, w, h = bx.T
            corners = np.stack([xc - w / 2, yc - h / 2, xc + w / 2, yc + h / 2], 1)
        else:  # (y1, x1, y2, x2), any two opposite corners
            y = np.sort(bx[:, [0, 2]], 1)
            x = np.sort(bx[:, [1, 3]], 1)
            corners = np.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], 1)
        for c in range(scores.shape[1]):
            s = scores[b, c]
            candidates = np.flatnonzero(s > score_threshold)
            keep = tv_ops.nms(torch.tensor(corners[candidates], dtype=torch.float32),
                              torch.tensor(s[candidates]), iou).numpy()
            picked += [[b, c, int(candidates[k])] for k in keep[:max_boxes]]
    return np.array(picked, np.int64).reshape(-1, 3)


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("iou, score_threshold, max_boxes", [(0.5, -np.inf, 100), (0.3, 0.4, 5), (0.7, 0.0, 1), (0.0, 0.2, 10)])
def test_non_max_suppression_matches_torchvision(center, iou, score_threshold, max_boxes):
    batches, classes, count = 2, 3, 60
    corner = RNG.random((batches, count, 2)) * 10
    size = RNG.random((batches, count, 2)) * 3 + 0.1
    if center:
        boxes = np.concatenate([corner, size], -1)
    else:  # some boxes given by their other two corners
        flip = RNG.random((batches, count, 1)) < 0.3
        boxes = np.where(flip, np.concatenate([corner + size, corner], -1), np.concatenate([corner, corner + size], -1))
    boxes = boxes.astype(np.float32)
    scores = RNG.random((batches, classes, count)).astype(np.float32)
    model = compiled(lambda b, bx, sc: ops.non_max_suppression(bx, sc, max_boxes, iou_threshold=iou, score_threshold=score_threshold,
                                                               center_point_box=center), boxes, scores)
    got = run(model, boxes, scores)[0]
    np.testing.assert_array_equal(got, torchvision_nms(boxes, scores, max_boxes, iou, score_threshold, center))


def test_non_max_suppression_keeps_the_lower_index_of_equal_scores_and_survives_nan():
    boxes = np.tile(np.array([0, 0, 1, 1], np.float32), (1, 4, 1))
    scores = np.array([[[0.5, 0.9, 0.9, np.nan]]], np.float32)
    model = compiled(lambda b, bx, sc: ops.non_max_suppression(bx, sc, 4, iou_threshold=0.5), boxes, scores)
    np.testing.assert_array_equal(run(model, boxes, scores)[0], [[0, 0, 1]])
    nan_boxes = np.full((1, 4, 4), np.nan, np.float32)
    assert run(model, nan_boxes, scores)[0].shape == (3, 3)  # NaN boxes overlap nothing


# ---- shape operands that are tensors ---------------------------------------------------------
def shape_operand_model():
    with esgraph.GraphBuilder("shapes") as b:
        x = b.input("x", esgraph.f32, [6])
        s = b.input("s", esgraph.i64, [2])
        t = b.input("t", esgraph.i64, [2])
        y = ops.reshape_to(x, s + 0)  # a computed shape
        e = ops.expand_to(x, t)
    return esgraph.compile(b.build([ops.relu(y), e]))


def test_reshape_to_and_expand_to_read_their_shapes_at_run_time():
    model = shape_operand_model()
    x = np.arange(6, dtype=np.float32) - 2
    for s, t in [([2, 3], [4, 6]), ([3, -1], [1, 6]), ([0, 1, 6][:2], [2, 6])]:
        y, e = model(x, np.array(s, np.int64), np.array(t, np.int64))
        want = x.reshape([6 if v == 0 else v for v in s])  # 0 keeps x's size there
        np.testing.assert_array_equal(y, np.maximum(want, 0))
        np.testing.assert_array_equal(e, np.broadcast_to(x, t))
    assert model.stats()["sized_ops"] == 2


@pytest.mark.parametrize("s, t, message", [
    ([4, -1], [1, 6], r"reshape.*cannot reshape \[6\]"),
    ([-1, -1], [1, 6], "more than one -1"),
    ([2, -5], [1, 6], "shape"),
    ([2, 3], [6, 4], r"cannot expand \[6\] to \[6,4\]"),
])
def test_bad_shape_values_fail_the_run_naming_the_op_and_the_model_runs_on(s, t, message):
    model = shape_operand_model()
    x = np.ones(6, np.float32)
    with pytest.raises((esgraph.ShapeError, esgraph.AttributeValueError), match=message):
        model(x, np.array(s, np.int64), np.array(t, np.int64))
    y, e = model(x, np.array([2, 3], np.int64), np.array([2, 6], np.int64))
    assert y.shape == (2, 3) and e.shape == (2, 6)


def test_fill_to_makes_a_tensor_of_a_computed_shape():
    with esgraph.GraphBuilder("fill") as b:
        sizes = b.input("sizes", esgraph.i64, [2])
        y = ops.fill_to(sizes * 2, value=1.5, dtype=esgraph.f64)
    model = esgraph.compile(b.build([y]))
    got = model(np.array([1, 3], np.int64))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, np.full((2, 6), 1.5))
    with pytest.raises(esgraph.AttributeValueError, match="fill"):
        model(np.array([1, -3], np.int64))
    assert model(np.array([0, 2], np.int64)).shape == (0, 4)


def test_a_shape_operand_must_have_a_static_length():
    with esgraph.GraphBuilder("bad") as b:
        x = b.input("x", esgraph.f32, [6])
        with pytest.raises(esgraph.ShapeError, match="static length"):
            ops.reshape_to(x, b.input("s", esgraph.i64, ["r"]))
        with pytest.raises(esgraph.ShapeError, match="lower rank"):
            ops.expand_to(b.input("m", esgraph.f32, [2, 3]), b.input("t", esgraph.i64, [1]))


# ---- slice, pad, top_k and range with their operands as tensors ---------------------------------
@pytest.mark.parametrize("starts, ends, axes, steps, index_type", [
    ([1, 0], [3, 5], None, None, np.int64), ([-1], [-100], [1], [-2], np.int64), ([0, 4], [9, 1], [2, 1], [3, -1], np.int32),
    ([2], [2], [0], None, np.int32)])
def test_slice_to_matches_numpy(starts, ends, axes, steps, index_type):
    x = np.arange(3 * 5 * 4, dtype=np.float32).reshape(3, 5, 4)
    it = esgraph.i32 if index_type is np.int32 else esgraph.i64
    with esgraph.GraphBuilder("slice") as b:
        xi = b.input("x", esgraph.f32, list(x.shape))
        operands = [b.input(n, it, [len(starts)]) for n in ("starts", "ends")]
        optional = {n: b.input(n, it, [len(starts)]) for n, v in (("axes", axes), ("steps", steps)) if v is not None}
        model = esgraph.compile(b.build([ops.slice_to(xi, *operands, **optional) + 1.0]))
    index = [slice(None)] * 3
    for k, axis in enumerate(axes if axes is not None else range(len(starts))):
        index[axis] = slice(starts[k], ends[k], steps[k] if steps else 1)
    args = [x] + [np.array(v, index_type) for v in (starts, ends, axes, steps) if v is not None]
    np.testing.assert_array_equal(model(*args), x[tuple(index)] + 1.0)


def test_slice_to_checks_its_values_as_slice_does():
    with esgraph.GraphBuilder("slice") as b:
        xi = b.input("x", esgraph.f32, [4])
        model = esgraph.compile(b.build([ops.slice_to(xi, b.input("s", esgraph.i64, [1]), b.input("e", esgraph.i64, [1]),
                                                      steps=b.input("t", esgraph.i64, [1]))]))
    x, one = np.arange(4, dtype=np.float32), np.array([1], np.int64)
    with pytest.raises(esgraph.AttributeValueError, match=r"slice.*step"):
        model(x, one, one * 3, one * 0)
    np.testing.assert_array_equal(model(x, one, one * 3, one), x[1:3])
    with esgraph.GraphBuilder("bad") as b:
        xi = b.input("x", esgraph.f32, [4])
        with pytest.raises(esgraph.ShapeError, match=r"`ends` holds 2 values, not the 1 wanted"):
            ops.slice_to(xi, b.input("s", esgraph.i64, [1]), b.input("e", esgraph.i64, [2]))


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_to_matches_numpy(mode):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with esgraph.GraphBuilder("pad") as b:
        model = esgraph.compile(b.build([ops.pad_to(b.input("x", esgraph.f32, [3, 4]), b.input("p", esgraph.i64, [4]),
                                                    mode=mode, value=-2.0)]))
    for pads in ([1, 0, 2, 3], [0, 2, 0, 1], [0, 0, 0, 0]):
        width = [(pads[0], pads[2]), (pads[1], pads[3])]
        want = np.pad(x, width, mode={"edge": "edge", "reflect": "reflect"}.get(mode, "constant"),
                      **({"constant_values": -2.0} if mode == "constant" else {}))
        np.testing.assert_array_equal(model(x, np.array(pads, np.int64)), want)
    with pytest.raises(esgraph.AttributeValueError, match="pad"):
        model(x, np.array([0, -1, 0, 0], np.int64))


@pytest.mark.parametrize("largest", [True, False])
def test_top_k_to_matches_torch(largest):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(5).permutation(40).astype(np.float32).reshape(5, 8)
    with esgraph.GraphBuilder("topk") as b:
        xi, k = b.input("x", esgraph.f32, [5, 8]), b.input("k", esgraph.i64, [])
        model = esgraph.compile(b.build(list(ops.top_k_to(xi, ops.reduce_sum(ops.reshape(k, [1])), axis=0, largest=largest))))
    for kk in (0, 2, 5):
        values, indices = model(x, np.int64(kk))
        want = torch.topk(torch.from_numpy(x), kk, dim=0, largest=largest)
        np.testing.assert_array_equal(values, want.values.numpy())
        np.testing.assert_array_equal(indices, want.indices.numpy())
    with pytest.raises(esgraph.AttributeValueError, match=r"top_k.*\bk\b"):
        model(x, np.int64(6))
    with esgraph.GraphBuilder("bad") as b:
        with pytest.raises(esgraph.ShapeError, match=r"`k` must hold one value"):
            ops.top_k_to(b.input("x", esgraph.f32, [4]), b.input("k", esgraph.i64, [2]))


def test_range_to_matches_numpy_arange():
    with esgraph.GraphBuilder("range") as b:
        start, limit, step = (b.input(n, esgraph.f64, s) for n, s in (("a", []), ("b", [1]), ("c", [])))
        model = esgraph.compile(b.build([ops.range_to(start, limit, step, dtype=esgraph.f32)]))
    for a, z, c in ((0, 5, 1), (1, 2, 0.25), (5, -3, -2.5), (2, 2, 1)):
        got = model(np.float64(a), np.array([z], np.float64), np.float64(c))
        np.testing.assert_allclose(got, np.arange(a, z, c, dtype=np.float32))
    with pytest.raises(esgraph.AttributeValueError, match="range"):
        model(np.float64(0), np.array([1], np.float64), np.float64(0))


def test_integer_ranges_count_exactly_beyond_two_to_the_53():
    """range_to of integers, and integer_range, count in int64 (range_to counted in doubles:
    (2^53+1, 2^53+4, 1) gave [2^53, 2^53, 2^53+2, 2^53+4], and (2^62, 2^62+3, 1) nothing)."""
    with esgraph.GraphBuilder("range") as b:
        start, limit, step = (b.input(n, esgraph.i64, []) for n in "azs")
        model = esgraph.compile(b.build([ops.range_to(start, limit, step, dtype=esgraph.i64)]))
    for a, z, c in ((2**53 + 1, 2**53 + 4, 1), (2**62, 2**62 + 3, 1), (2**63 - 1, -2**63, -2**62), (-5, 7, 4)):
        got = model(np.int64(a), np.int64(z), np.int64(c))
        np.testing.assert_array_equal(got, np.arange(a, z, c, dtype=np.int64)), (a, z, c)
        with esgraph.GraphBuilder("fixed") as b:
            fixed = esgraph.compile(b.build([ops.integer_range(z, start=a, step=c)]))()
        np.testing.assert_array_equal(fixed, np.arange(a, z, c, dtype=np.int64))
    # A range its dtype cannot hold, and a zero step, are refused by name, at run time too.
    with esgraph.GraphBuilder("narrow") as b:
        with pytest.raises(esgraph.AttributeValueError, match="reaches 300, which u8 cannot hold"):
            ops.integer_range(301, start=0, step=100, dtype=esgraph.u8)
        with pytest.raises(esgraph.AttributeValueError, match="`step` must be non-zero"):
            ops.integer_range(3, step=0)
    with pytest.raises(esgraph.AttributeValueError, match="`step` must be non-zero"):
        model(np.int64(0), np.int64(3), np.int64(0))


def test_float_attributes_beyond_two_to_the_53_are_refused_for_integer_results():
    """range, fill and pad take doubles: an integer result past 2^53 would not be what was written
    (fill_to and pad_to run as fill and pad, so they refuse such values at run time)."""
    with esgraph.GraphBuilder("inexact") as b:
        with pytest.raises(esgraph.AttributeValueError, match="beyond the integers a double holds exactly.*integer_range"):
            ops.range(2**62 + 3, start=2**62, dtype=esgraph.i64)
        with pytest.raises(esgraph.AttributeValueError, match="`value` = .* beyond the integers a double holds exactly"):
            ops.fill([2], value=2**62 + 1, dtype=esgraph.i64)
        with pytest.raises(esgraph.AttributeValueError, match="`value` = .* beyond the integers a double holds exactly"):
            ops.pad(b.input("x", esgraph.i64, [2]), pads=[1, 0], value=2**62 + 1)
        # 2^53 + 1 arrives as the double 2^53: from 2^53 on, nothing tells what was written.
        for value in (2**53 + 1, 2**53, -2**53):
            with pytest.raises(esgraph.AttributeValueError, match="below 2\\^53; 2\\^53 \\+ 1 would arrive as 2\\^53"):
                ops.fill([2], value=value, dtype=esgraph.i64)
        # the value as the whole number the double holds (it printed 9007199254740992.000000)
        with pytest.raises(esgraph.AttributeValueError, match="`value` = 9007199254740992 is beyond"):
            ops.fill([2], value=2**53 + 1, dtype=esgraph.i64)
        with pytest.raises(esgraph.AttributeValueError, match="`limit` = .* beyond the integers a double holds exactly"):
            ops.range(2**53 + 1, start=2**53 - 1, dtype=esgraph.i64)
        ops.range(2**62 + 3, start=2**62, dtype=esgraph.f64)  # a float result is what doubles give
        ops.fill([2], value=2**53 - 1, dtype=esgraph.i64)


def test_top_k_to_takes_k_as_one_element_tensor_too():
    with esgraph.GraphBuilder("k1") as b:
        g = b.build([ops.top_k_to(b.input("x", esgraph.f32, [6]), b.input("k", esgraph.i32, [1]))[0]])
    x = np.array([3, 1, 4, 1, 5, 9], np.float32)
    np.testing.assert_array_equal(esgraph.compile(g)(x, np.array([3], np.int32)), [9, 5, 4])


# ---- between other ops: the stages of a run -------------------------------------------------
def rows_over(b, x):
    """The rows of x whose largest element passes 0.5, softmaxed, and their indices."""
    keep = ops.squeeze(ops.nonzero(ops.reduce_max(x, axes=[1]) > 0.5), axes=[0])
    return [ops.softmax(ops.gather(x, keep) * 2.0, axis=-1), keep]


def numpy_rows_over(x):
    keep = np.flatnonzero(x.max(1) > 0.5)
    z = x[keep] * 2
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True), keep


def test_ops_before_and_after_a_sized_op_run_in_stages():
    with esgraph.GraphBuilder("rows") as b:
        x = b.input("x", esgraph.f32, ["n", 8])
        outs = rows_over(b, x)
    model = esgraph.compile(b.build(outs))
    for n in [1, 5, 40, 200, 3, 40]:
        x = RNG.random((n, 8)).astype(np.float32) * 0.6
        got, keep = model(x)
        want, want_keep = numpy_rows_over(x)
        np.testing.assert_array_equal(keep, want_keep)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    stats = model.stats()
    assert stats["stages"] == 2 and stats["sized_ops"] == 1
    # Stage 0 and stage 1 each plan per power-of-two class of their sizes, never per size.
    assert stats["plans"] <= 10
    assert [t["op"] for t in stats["stage_list"][0]["then_run"]] == ["nonzero"]


def test_a_count_of_zero_flows_through_what_follows():
    with esgraph.GraphBuilder("none") as b:
        x = b.input("x", esgraph.f32, [4, 8])
        outs = rows_over(b, x)
    got, keep = esgraph.compile(b.build(outs))(np.zeros((4, 8), np.float32))
    assert got.shape == (0, 8) and keep.shape == (0,)


def test_outputs_of_sizes_the_data_decides_cannot_be_given_or_profiled(tmp_path):
    x = np.ones(4, np.float32)
    model = compiled(lambda b, x: ops.nonzero(x), x)
    with pytest.raises(esgraph.InvalidArgumentError, match="depend on the data"):
        model.run([x], out=[np.empty((1, 4), np.int64)])
    with pytest.raises(esgraph.InvalidArgumentError, match="depend on the data"):
        model.profile(x, path=str(tmp_path / "trace.json"))


def test_a_sized_op_inside_a_body_is_refused_at_compile():
    with esgraph.GraphBuilder("body") as b:
        x = b.input("x", esgraph.f32, [4])
        i = b.input("i", esgraph.i64, [])
        outs = ops.while_([i], lambda j: j < 3, lambda j: [j + ops.reduce_sum(ops.nonzero(x))])
    with pytest.raises(esgraph.UnsupportedError, match="inside a body"):
        esgraph.compile(b.build(outs))


def test_sizes_a_sized_op_is_given_are_checked_before_its_kernel_reads_them():
    # Two symbols the rule takes for equal: a run where they differ is refused, not read past.
    with esgraph.GraphBuilder("nms") as b:
        boxes = b.input("boxes", esgraph.f32, [1, "N", 4])
        scores = b.input("scores", esgraph.f32, [1, 1, "M"])
        kept = ops.non_max_suppression(boxes, scores, 10)
    model = esgraph.compile(b.build([kept]))
    with pytest.raises(esgraph.ShapeError, match="non_max_suppression"):
        model(np.zeros((1, 2, 4), np.float32), np.zeros((1, 1, 1000), np.float32))
    got = model(np.array([[[0, 0, 1, 1], [5, 5, 6, 6]]], np.float32), np.array([[[0.5, 0.6]]], np.float32))
    np.testing.assert_array_equal(got, [[0, 0, 1], [0, 0, 0]])  # the model runs on


def test_shape_rules_refuse_what_they_cannot_take():
    with esgraph.GraphBuilder("bad") as b:
        with pytest.raises(esgraph.ShapeError, match="scalar"):
            ops.unique(b.input("s", esgraph.f32, []))
        with pytest.raises(esgraph.ShapeError, match="disagree"):
            ops.non_max_suppression(b.input("b", esgraph.f32, [1, 3, 4]), b.input("sc", esgraph.f32, [2, 1, 3]), 1)
        with pytest.raises(esgraph.AttributeValueError):
            ops.non_max_suppression(b.input("b2", esgraph.f32, [1, 3, 4]), b.input("sc2", esgraph.f32, [1, 1, 3]), -1)


# ---- ONNX --------------------------------------------------------------------------------------
def onnx_model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_onnx_compress_with_a_computed_condition_runs_without_reading_values_at_import():
    # Rows of X whose sum is positive: the condition is computed, so the count is the run's.
    model = onnx_model(
        [helper.make_node("ReduceSum", ["X", "axes"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["cond"]),
         helper.make_node("Compress", ["X", "cond"], ["kept"], axis=0),
         helper.make_node("Relu", ["kept"], ["Y"])],
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 3])],
        [helper.make_tensor("axes", TensorProto.INT64, [1], [1]), helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
    graph = esgraph.onnx.load(model)
    assert isinstance(graph, esgraph.Graph)  # no value waited for: nonzero inside
    compiled_model = esgraph.compile(graph)
    for n in [3, 10, 1]:
        x = RNG.standard_normal((n, 3)).astype(np.float32)
        np.testing.assert_allclose(compiled_model(x), np.maximum(x[x.sum(1) > 0], 0), rtol=1e-6)


def test_onnx_nonzero_unique_and_nms_import_and_export_round_trip():
    with esgraph.GraphBuilder("all_three") as b:
        x = b.input("x", esgraph.f32, [12])
        boxes = b.input("boxes", esgraph.f32, [1, 5, 4])
        scores = b.input("scores", esgraph.f32, [1, 2, 5])
        outs = [ops.nonzero(x)] + list(ops.unique(x, sorted=False)) + [
            ops.non_max_suppression(boxes, scores, 2, iou_threshold=0.4, score_threshold=0.1, center_point_box=True)]
    graph = b.build(outs)
    exported = esgraph.onnx.to_model(graph)
    onnx.checker.check_model(exported)
    assert [n.op_type for n in exported.graph.node] == ["NonZero", "Unique", "NonMaxSuppression"]
    feeds = [RNG.integers(0, 4, 12).astype(np.float32), (RNG.random((1, 5, 4)) * 4).astype(np.float32),
             RNG.random((1, 2, 5)).astype(np.float32)]
    direct = esgraph.compile(graph)(*feeds)
    again = esgraph.compile(esgraph.onnx.load(exported))(*feeds)
    for d, a in zip(direct, again):
        np.testing.assert_array_equal(d, a)
    np.testing.assert_array_equal(direct[0], np.array(np.nonzero(feeds[0])))
