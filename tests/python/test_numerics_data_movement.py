"""Data movement (reshape, transpose, concat, split, slice, gather, pad, expand, ...) on seeded
random data against numpy.

See numerics.py for the comparison rules."""
import numpy as np
import pytest

import esgraph
from esgraph import ops

from numerics import run, check, rng_for, normal, small_ints, f32, f64, i32, i64


@pytest.mark.parametrize("spec, want", [([0, -1], (2, 12)), ([-1, 4], (6, 4)), ([0, 3, 2, 2], (2, 3, 2, 2)),
                                        ([4, 0, 2], (4, 3, 2)), ([24], (24,)), ([-1], (24,)),
                                        ([2, 0, -1], (2, 3, 4)), ([1, 24, 1], (1, 24, 1))], ids=str)
def test_reshape(spec, want):
    x = normal(rng_for(spec), (2, 3, 4))
    check(run(lambda t: ops.reshape(t, spec), x), x.reshape(want))


def test_reshape_to_and_from_rank_0():
    x = np.array([[2.5]], f32)
    check(run(lambda t: ops.reshape(t, []), x), x.reshape(()))
    check(run(lambda t: ops.reshape(t, [1, 1, 1]), x.reshape(())), x.reshape(1, 1, 1))


@pytest.mark.parametrize("perm", [[], [1, 0, 2], [2, 0, 1], [0, 1, 2], [-1, 0, 1]], ids=str)
@pytest.mark.parametrize("dtype", [f32, i64, np.bool_, np.int8])
def test_transpose(perm, dtype):
    x = small_ints(rng_for(perm, dtype), (2, 3, 4), dtype, 0, 100 if dtype != np.bool_ else 2)
    check(run(lambda t: ops.transpose(t, perm=perm), x), np.transpose(x, [p % 3 for p in perm] or None))


@pytest.mark.parametrize("axis, shapes", [(0, [(1, 3), (2, 3), (0, 3)]), (1, [(2, 1), (2, 4), (2, 2)]),
                                          (-1, [(2, 3, 1), (2, 3, 2)]), (1, [(2, 2, 3), (2, 1, 3), (2, 0, 3)]),
                                          (0, [(4,)])], ids=str)
def test_concat(axis, shapes):
    rng = rng_for(axis, shapes)
    xs = [normal(rng, s) for s in shapes]
    check(run(lambda *ts: ops.concat(list(ts), axis), *xs), np.concatenate(xs, axis=axis))


@pytest.mark.parametrize("axis, sizes", [(0, [2, 3]), (1, [1, 2, 0, 1]), (-1, [5]), (-2, [3, 0, 1]), (2, [2, 2, 1])],
                         ids=str)
def test_split(axis, sizes):
    shape = [2, 3, 4]
    shape[axis] = sum(sizes)
    x = normal(rng_for(axis, sizes), shape)
    got = run(lambda t: ops.split(t, sizes, axis=axis), x)
    want = np.split(x, np.cumsum(sizes)[:-1], axis=axis)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        check(g, w)


SLICES = [  # starts, ends, axes, steps
    ([1], [4], [1], [2]),
    ([-1], [-6], [], [-1]),
    ([0, 1], [2, 5], [], []),
    ([4, -1], [0, 0], [0, 1], [-2, -3]),
    ([10], [-10], [1], [-1]),          # clamped both ways
    ([-100], [100], [-1], [3]),
    ([2], [2], [0], []),               # empty
    ([3], [1], [0], [1]),              # empty: start after end
    ([1, 0], [3, 6], [-1, 0], [1, 2]),
    ([-2], [-100], [0], [-1]),         # to the very beginning with a negative step
]


@pytest.mark.parametrize("starts, ends, axes, steps", SLICES, ids=str)
def test_slice(starts, ends, axes, steps):
    x = normal(rng_for(starts, ends, axes, steps), (5, 6, 3))
    index = [slice(None)] * x.ndim
    for i, (s, e) in enumerate(zip(starts, ends)):
        index[axes[i] if axes else i] = slice(s, e, steps[i] if steps else 1)
    check(run(lambda t: ops.slice(t, starts, ends, axes=axes, steps=steps), x), x[tuple(index)])


@pytest.mark.parametrize("index_dtype", [i32, i64])
@pytest.mark.parametrize("axis, index_shape", [(0, (3,)), (1, (2, 2)), (-1, ()), (2, (4,)), (-3, (1, 2, 1)),
                                               (1, (0,))], ids=str)
def test_gather(axis, index_shape, index_dtype):
    rng = rng_for(axis, index_shape, index_dtype)
    x = normal(rng, (3, 4, 5))
    n = x.shape[axis]
    indices = rng.integers(-n, n, index_shape).astype(index_dtype)  # negative indices count from the end
    check(run(lambda t, i: ops.gather(t, i, axis=axis), x, indices), np.take(x, indices, axis=axis))


@pytest.mark.parametrize("src, shape", [((3, 1), (2, 3, 4)), ((1,), (5,)), ((2, 1, 3), (2, 4, 3)), ((), (2, 2)),
                                        ((1, 3), (0, 3)), ((4,), (4,)), ((), ()),
                                        ((2, 2, 1, 3, 4), (2, 2, 3, 3, 4)),  # grouped-query attention's k and v
                                        ((3, 1, 1), (3, 2, 5)), ((1, 4, 1), (2, 4, 3))], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.bool_])
def test_expand(src, shape, dtype):
    x = normal(rng_for(src, shape), src)
    x = (x > 0) if dtype == np.bool_ else x.astype(dtype)
    check(run(lambda t: ops.expand(t, list(shape)), x), np.broadcast_to(x, shape))


@pytest.mark.parametrize("shape, axes", [((1, 3, 1, 2), []), ((1, 3, 1, 2), [0]), ((1, 3, 1, 2), [-2]),
                                         ((1, 3, 1, 2), [2, 0]), ((1, 1), [])], ids=str)
def test_squeeze(shape, axes):
    x = normal(rng_for(shape, axes), shape)
    check(run(lambda t: ops.squeeze(t, axes=axes), x), np.squeeze(x, axis=tuple(axes) if axes else None))


@pytest.mark.parametrize("axes, want", [([0], (1, 2, 3)), ([-1], (2, 3, 1)), ([0, -1], (1, 2, 3, 1)),
                                        ([1, 3], (2, 1, 3, 1)), ([2], (2, 3, 1))], ids=str)
def test_unsqueeze(axes, want):
    x = normal(rng_for(axes), (2, 3))
    check(run(lambda t: ops.unsqueeze(t, axes), x), x.reshape(want))


@pytest.mark.parametrize("pads", [[1, 2, 0, 1], [0, 0, 2, 2], [2, 1, 1, 3], [0, 0, 0, 0]], ids=str)
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad(mode, pads):
    x = normal(rng_for(mode, pads), (4, 5))
    width = [(pads[i], pads[2 + i]) for i in range(2)]
    want = np.pad(x, width, mode=mode, **({"constant_values": 1.5} if mode == "constant" else {}))
    check(run(lambda t: ops.pad(t, pads, mode=mode, value=1.5), x), want)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_int_rank_3(mode):
    x = small_ints(rng_for(mode), (3, 2, 4), i32, -9, 10)
    pads = [1, 0, 2, 2, 1, 3]
    width = [(pads[i], pads[3 + i]) for i in range(3)]
    want = np.pad(x, width, mode=mode, **({"constant_values": 7} if mode == "constant" else {}))
    check(run(lambda t: ops.pad(t, pads, mode=mode, value=7), x), want)


def test_pad_default_is_zeros():
    x = np.ones((2, 2), f32)
    check(run(lambda t: ops.pad(t, [1, 1, 1, 1]), x), np.pad(x, 1))


@pytest.mark.parametrize("shape, value, dtype", [([2, 3], 1.5, f32), ([4], -7, i64), ([2, 2], 3, i32),
                                                 ([3], 1, np.bool_), ([0, 2], 9, f32), ([], 2.25, f64)], ids=str)
def test_fill(shape, value, dtype):
    check(run(lambda: ops.fill(shape, value=value, dtype=np.dtype(dtype))), np.full(shape, value, dtype))


def test_fill_defaults():
    check(run(lambda: ops.fill([2, 1])), np.zeros((2, 1), f32))


@pytest.mark.parametrize("start, limit, step, dtype", [(0, 5, 1, i64), (1, 2, 0.25, f32), (5, -3, -2, i32),
                                                       (0.5, 3, 0.7, f64), (3, 3, 1, i64), (-2, 7, 3, i64),
                                                       (10, 0, -1.5, f32)], ids=str)
def test_range(start, limit, step, dtype):
    got = run(lambda: ops.range(limit, start=start, step=step, dtype=np.dtype(dtype)))
    check(got, np.arange(start, limit, step, dtype=f64).astype(dtype))


def test_range_defaults():
    check(run(lambda: ops.range(4)), np.arange(4, dtype=i64))


# ---- 2. control flow ------------------------------------------------------------------------


def test_a_concatenation_past_any_tensors_size_is_refused():
    """Sizes each within the 2^48-element limit whose sum leaves it (or int64) are refused by
    name; the sum overflowed int64 unchecked, and the graph came out with a made-up symbolic size."""
    with esgraph.GraphBuilder("big") as b:
        x = b.input("x", esgraph.f32, [2 ** 47])
        with pytest.raises(esgraph.ShapeError, match="would hold more than any tensor's size"):
            ops.concat([x] * 3, 0)
        with pytest.raises(esgraph.ShapeError, match="would hold more than any tensor's size"):
            ops.concat([x] * 65536, 0)
        assert tuple(ops.concat([x, x], 0).shape) == (2 ** 48,)
