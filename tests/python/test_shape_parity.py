"""Inferred shapes against numpy, on random shapes from a seeded generator.

numpy is the independent reference: each test runs the numpy counterpart of the op on zero
arrays of the same shapes and compares the resulting shape (or that both refuse the shapes).
Shapes include size-1 and size-0 dimensions wherever numpy accepts them.
"""
import numpy as np
import pytest

import esgraph
from esgraph import ops

N = 40  # random cases per test


def fmt(shape):
    return "[" + ",".join(map(str, shape)) + "]"


def cases(seed, make, n=N):
    """`n` parameter sets from `make(rng)`, which returns (id, *params)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        case_id, *params = make(rng)
        out.append(pytest.param(*params, id=f"{i}:{case_id}"))
    return out


def rand_shape(rng, lo_rank=0, hi_rank=4, sizes=(0, 1, 1, 2, 3, 4, 5)):
    return tuple(int(rng.choice(sizes)) for _ in range(rng.integers(lo_rank, hi_rank + 1)))


def zeros(shape):
    return np.zeros(shape, dtype=np.float32)


# ---- broadcasting ------------------------------------------------------------------------------
def broadcast_pair(rng, compatible=True):
    """Two shapes that numpy broadcasts (or, with compatible=False, that often do not)."""
    out = rand_shape(rng, 1, 4)
    a, b = [], []
    for d in out:
        choice = rng.integers(0, 4)
        da, db = d, d
        if choice == 1:
            da = 1
        elif choice == 2:
            db = 1
        elif not compatible:
            db = int(rng.integers(0, 6))
        a.append(da)
        b.append(db)
    # Drop leading axes of one side so that ranks differ (down to rank 0).
    drop = int(rng.integers(0, len(out) + 1))
    if rng.integers(0, 2):
        a = a[drop:]
    else:
        b = b[drop:]
    return tuple(a), tuple(b)


BINARY_NUMERIC = ["add", "sub", "mul", "div", "maximum", "minimum"]
BINARY_FLOAT = ["pow"]
COMPARISONS = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
LOGICAL = ["logical_and", "logical_or"]


def _broadcast_case(rng):
    a, b = broadcast_pair(rng)
    return f"{fmt(a)}+{fmt(b)}", a, b


@pytest.mark.parametrize("a_shape, b_shape", cases(1, _broadcast_case))
@pytest.mark.parametrize("op_name", BINARY_NUMERIC + BINARY_FLOAT + COMPARISONS + LOGICAL)
def test_broadcasting_binary_ops(b, op_name, a_shape, b_shape):
    dtype = "bool" if op_name in LOGICAL else "f32"
    x = b.input("x", dtype, list(a_shape))
    y = b.input("y", dtype, list(b_shape))
    out = getattr(ops, op_name)(x, y)
    assert out.shape == np.broadcast(zeros(a_shape), zeros(b_shape)).shape
    expected_dtype = "bool" if op_name in COMPARISONS + LOGICAL else dtype
    assert out.dtype.name == expected_dtype


def _maybe_incompatible(rng):
    a, b = broadcast_pair(rng, compatible=False)
    return f"{fmt(a)}+{fmt(b)}", a, b


@pytest.mark.parametrize("a_shape, b_shape", cases(2, _maybe_incompatible, n=60))
def test_broadcast_accepts_exactly_what_numpy_accepts(b, a_shape, b_shape):
    x = b.input("x", "i32", list(a_shape))
    y = b.input("y", "i32", list(b_shape))
    try:
        expected = np.broadcast(zeros(a_shape), zeros(b_shape)).shape
    except ValueError:
        with pytest.raises(esgraph.ShapeError):
            x * y
    else:
        assert (x * y).shape == expected


def _where_case(rng):
    a, b = broadcast_pair(rng)
    out = np.broadcast(zeros(a), zeros(b)).shape
    # A condition that broadcasts with both: each axis of the result or 1, some leading ones dropped.
    c = tuple(d if rng.integers(0, 2) else 1 for d in out)[int(rng.integers(0, len(out) + 1)):]
    return f"{fmt(c)}?{fmt(a)}:{fmt(b)}", c, a, b


@pytest.mark.parametrize("c_shape, a_shape, b_shape", cases(3, _where_case))
def test_where_broadcasts_all_three(b, c_shape, a_shape, b_shape):
    out = ops.where(b.input("c", "bool", list(c_shape)), b.input("a", "i64", list(a_shape)),
                    b.input("b", "i64", list(b_shape)))
    assert out.shape == np.where(np.zeros(c_shape, bool), zeros(a_shape), zeros(b_shape)).shape
    assert out.dtype == esgraph.i64


# ---- reductions --------------------------------------------------------------------------------
def _reduce_case(rng):
    shape = rand_shape(rng, 1, 4)
    rank = len(shape)
    count = int(rng.integers(0, rank + 1))
    axes = [int(a) for a in rng.choice(rank, size=count, replace=False)]
    axes = [a - rank if rng.integers(0, 2) else a for a in axes]  # some negative
    keepdims = bool(rng.integers(0, 2))
    return f"{fmt(shape)}-axes{fmt(axes)}-keep{int(keepdims)}", shape, axes, keepdims


REDUCTIONS = ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"]


@pytest.mark.parametrize("shape, axes, keepdims", cases(4, _reduce_case))
@pytest.mark.parametrize("op_name", REDUCTIONS)
def test_reductions(b, op_name, shape, axes, keepdims):
    x = b.input("x", "f32", list(shape))
    out = getattr(ops, op_name)(x, axes=axes, keepdims=keepdims)
    # An empty `axes` reduces every axis, as numpy's axis=None.
    expected = np.sum(zeros(shape), axis=tuple(axes) if axes else None, keepdims=keepdims)
    assert out.shape == np.shape(expected)
    assert out.dtype == esgraph.f32


@pytest.mark.parametrize("axes", [[1, -2], [0, 0], [2, -1, 0]], ids=str)
def test_reductions_refuse_repeated_axes_as_numpy_does(b, axes):
    x = b.input("x", "f32", [2, 3, 4])
    with pytest.raises(ValueError):
        np.sum(zeros((2, 3, 4)), axis=tuple(axes))
    with pytest.raises(esgraph.AttributeValueError, match="twice"):
        ops.reduce_sum(x, axes=axes)


def _arg_reduce_case(rng):
    shape = rand_shape(rng, 1, 4, sizes=(1, 2, 3, 4))  # numpy refuses argmax over an empty axis
    axis = int(rng.integers(-len(shape), len(shape)))
    keepdims = bool(rng.integers(0, 2))
    return f"{fmt(shape)}-axis{axis}-keep{int(keepdims)}", shape, axis, keepdims


@pytest.mark.parametrize("shape, axis, keepdims", cases(5, _arg_reduce_case, n=20))
@pytest.mark.parametrize("op_name", ["argmax", "argmin"])
def test_arg_reductions(b, op_name, shape, axis, keepdims):
    out = getattr(ops, op_name)(b.input("x", "f32", list(shape)), axis=axis, keepdims=keepdims)
    assert out.shape == getattr(np, op_name)(zeros(shape), axis=axis, keepdims=keepdims).shape
    assert out.dtype == esgraph.i64


# ---- matmul ------------------------------------------------------------------------------------
def _matmul_case(rng):
    batch_a, batch_b = broadcast_pair(rng)
    batch_a, batch_b = batch_a[-2:], batch_b[-2:]  # trailing axes still broadcast; ranks <= 4
    m, k, n = (int(v) for v in rng.choice([0, 1, 2, 3, 5], size=3))
    ta, tb = bool(rng.integers(0, 2)), bool(rng.integers(0, 2))
    a = batch_a + ((k, m) if ta else (m, k))
    b_ = batch_b + ((n, k) if tb else (k, n))
    return f"{fmt(a)}{'T' if ta else ''}@{fmt(b_)}{'T' if tb else ''}", a, b_, ta, tb


@pytest.mark.parametrize("a_shape, b_shape, ta, tb", cases(6, _matmul_case))
def test_matmul_batch_broadcast_and_transposes(b, a_shape, b_shape, ta, tb):
    a = b.input("a", "f32", list(a_shape))
    w = b.input("w", "f32", list(b_shape))
    out = ops.matmul(a, w, transpose_a=ta, transpose_b=tb)
    ra = np.swapaxes(zeros(a_shape), -1, -2) if ta else zeros(a_shape)
    rb = np.swapaxes(zeros(b_shape), -1, -2) if tb else zeros(b_shape)
    assert out.shape == np.matmul(ra, rb).shape
    if not ta and not tb:
        assert (a @ w).shape == out.shape


def test_matmul_contracted_mismatch_is_a_shape_error(b):
    with pytest.raises(esgraph.ShapeError, match=r"contracted dimensions differ: 4 \(a\) vs 5 \(b\)"):
        ops.matmul(b.input("a", "f32", [3, 4]), b.input("w", "f32", [5, 6]))


# ---- reshape, transpose ------------------------------------------------------------------------
def _prime_factors(n):
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


def _reshape_case(rng):
    shape = rand_shape(rng, 1, 4, sizes=(1, 2, 3, 4, 6))
    factors = [f for d in shape for f in _prime_factors(d)] + [1] * int(rng.integers(0, 2))
    rng.shuffle(factors)
    groups = int(rng.integers(1, max(2, len(factors)) + 1))
    target = [1] * groups
    for f in factors:
        target[int(rng.integers(0, groups))] *= f
    spec = list(target)
    for i in range(min(len(shape), len(spec))):  # 0 copies the input's size at the same index
        if spec[i] == shape[i] and rng.integers(0, 2):
            spec[i] = 0
    minus = int(rng.integers(0, len(spec)))
    if spec[minus] != 0:
        spec[minus] = -1
    return f"{fmt(shape)}->{fmt(spec)}", shape, spec


@pytest.mark.parametrize("shape, spec", cases(7, _reshape_case))
def test_reshape_with_minus_one_and_zero(b, shape, spec):
    out = ops.reshape(b.input("x", "f32", list(shape)), spec)
    numpy_spec = [shape[i] if s == 0 else s for i, s in enumerate(spec)]
    assert out.shape == np.reshape(zeros(shape), numpy_spec).shape


@pytest.mark.parametrize("shape, spec", [
    ((0, 3), [-1, 3]), ((2, 0, 4), [0, 0, 4]), ((2, 0, 4), [0, 0, -1]), ((0,), [0, 5]),
    ((4, 0), [2, 2, -1]), ((4, 0), [0, -1]), ((3, 0), [0, 0]), ((0, 5), [-1, 0]),
])
def test_reshape_of_empty_tensors_as_numpy(b, shape, spec):
    """With zero elements, -1 is only defined where the other sizes do not multiply to 0."""
    x = b.input("x", "f32", list(shape))
    numpy_spec = [shape[i] if s == 0 and i < len(shape) else s for i, s in enumerate(spec)]
    try:
        expected = np.reshape(zeros(shape), numpy_spec).shape
    except ValueError:
        with pytest.raises(esgraph.ShapeError):
            ops.reshape(x, spec)
    else:
        assert ops.reshape(x, spec).shape == expected


def _transpose_case(rng):
    shape = rand_shape(rng, 0, 5)
    if rng.integers(0, 4) == 0:
        return f"{fmt(shape)}-reversed", shape, []
    perm = [int(p) for p in rng.permutation(len(shape))]
    return f"{fmt(shape)}-perm{fmt(perm)}", shape, perm


@pytest.mark.parametrize("shape, perm", cases(8, _transpose_case))
def test_transpose(b, shape, perm):
    out = ops.transpose(b.input("x", "f32", list(shape)), perm=perm)
    assert out.shape == np.transpose(zeros(shape), perm or None).shape


# ---- concat, split -----------------------------------------------------------------------------
def _concat_case(rng):
    shape = rand_shape(rng, 1, 4)
    axis = int(rng.integers(-len(shape), len(shape)))
    parts = []
    for _ in range(int(rng.integers(1, 5))):
        s = list(shape)
        s[axis] = int(rng.integers(0, 4))
        parts.append(tuple(s))
    return f"{'+'.join(map(fmt, parts))}-axis{axis}", parts, axis


@pytest.mark.parametrize("parts, axis", cases(9, _concat_case))
def test_concat(b, parts, axis):
    xs = [b.input(f"x{i}", "i32", list(s)) for i, s in enumerate(parts)]
    out = ops.concat(xs, axis)
    assert out.shape == np.concatenate([zeros(s) for s in parts], axis=axis).shape
    assert out.dtype == esgraph.i32


def _split_case(rng):
    shape = rand_shape(rng, 1, 4, sizes=(0, 1, 2, 3, 5, 7))
    axis = int(rng.integers(-len(shape), len(shape)))
    n = shape[axis]
    cuts = sorted(int(c) for c in rng.integers(0, n + 1, size=int(rng.integers(0, 4))))
    sizes = [hi - lo for lo, hi in zip([0] + cuts, cuts + [n])]
    return f"{fmt(shape)}-sizes{fmt(sizes)}-axis{axis}", shape, sizes, axis


@pytest.mark.parametrize("shape, sizes, axis", cases(10, _split_case))
def test_split(b, shape, sizes, axis):
    pieces = ops.split(b.input("x", "f32", list(shape)), sizes, axis=axis)
    expected = np.split(zeros(shape), np.cumsum(sizes)[:-1], axis=axis)
    assert [p.shape for p in pieces] == [e.shape for e in expected]


# ---- slice -------------------------------------------------------------------------------------
BIG = 2**63 - 1


def _slice_case(rng):
    shape = rand_shape(rng, 1, 3, sizes=(0, 1, 2, 3, 5, 8, 8, 8))
    rank = len(shape)
    axes = [int(a) for a in rng.choice(rank, size=int(rng.integers(1, rank + 1)), replace=False)]
    starts, ends, steps = [], [], []
    for a in axes:
        d = shape[a]
        step = int(rng.choice([-3, -2, -1, 1, 1, 2, 3]))
        in_range = d > 0 and rng.integers(0, 4) > 0  # mostly a valid index, sometimes beyond the ends
        start = int(rng.integers(-d, d) if in_range else rng.integers(-d - 2, d + 3))
        kind = rng.integers(0, 6)
        if kind < 2:  # "to the end" in the step's direction, as INT64_MAX / INT64_MIN
            end = BIG if step > 0 else -BIG - 1
        elif kind == 2:  # the opposite sentinel: an empty slice
            end = -BIG - 1 if step > 0 else BIG
        elif kind < 5:  # a few steps on from the start, maybe past the end
            end = start + step * int(rng.integers(0, d + 2))
        else:
            end = int(rng.integers(-d - 2, d + 3))
        starts.append(start)
        ends.append(end)
        steps.append(step)
    # Sometimes give axes negatively, sometimes leave them out (the first len(starts) axes).
    if axes == list(range(len(axes))) and rng.integers(0, 2):
        spelled = []
    else:
        spelled = [a - rank if rng.integers(0, 2) else a for a in axes]
    key = [slice(None)] * rank
    for a, s, e, st in zip(axes, starts, ends, steps):
        key[a] = slice(s, e, st)
    expected = zeros(shape)[tuple(key)].shape
    return (f"{fmt(shape)}-{fmt(starts)}:{fmt(ends)}:{fmt(steps)}-axes{fmt(spelled)}",
            shape, starts, ends, spelled, steps, expected)


@pytest.mark.parametrize("shape, starts, ends, axes, steps, expected", cases(11, _slice_case, n=80))
def test_slice_like_python_slicing(b, shape, starts, ends, axes, steps, expected):
    out = ops.slice(b.input("x", "f32", list(shape)), starts, ends, axes=axes, steps=steps)
    assert out.shape == expected


# ---- gather, expand ----------------------------------------------------------------------------
def _gather_case(rng):
    shape = rand_shape(rng, 1, 3)
    axis = int(rng.integers(-len(shape), len(shape)))
    if shape[axis] == 0:  # numpy refuses to take from an empty axis; other axes may be empty
        shape = shape[:axis % len(shape)] + (2,) + shape[axis % len(shape) + 1:]
    indices = rand_shape(rng, 0, 3)
    return f"{fmt(shape)}-idx{fmt(indices)}-axis{axis}", shape, indices, axis


@pytest.mark.parametrize("shape, indices, axis", cases(12, _gather_case))
@pytest.mark.parametrize("index_dtype", ["i32", "i64"])
def test_gather_like_take(b, shape, indices, axis, index_dtype):
    out = ops.gather(b.input("x", "f32", list(shape)), b.input("i", index_dtype, list(indices)), axis=axis)
    assert out.shape == np.take(zeros(shape), np.zeros(indices, dtype=np.int64), axis=axis).shape


def _expand_case(rng):
    a, b_ = broadcast_pair(rng)
    target = np.broadcast(zeros(a), zeros(b_)).shape
    extra = rand_shape(rng, 0, 1, sizes=(1, 2, 3))
    return f"{fmt(a)}->{fmt(extra + target)}", a, extra + target


@pytest.mark.parametrize("shape, target", cases(13, _expand_case))
def test_expand_like_broadcast_to(b, shape, target):
    out = ops.expand(b.input("x", "f32", list(shape)), list(target))
    assert out.shape == np.broadcast_to(zeros(shape), target).shape


def _expand_maybe_invalid(rng):
    shape = rand_shape(rng, 0, 3, sizes=(0, 1, 2, 3))
    target = rand_shape(rng, 0, 4, sizes=(0, 1, 2, 3))
    return f"{fmt(shape)}->{fmt(target)}", shape, target


@pytest.mark.parametrize("shape, target", cases(14, _expand_maybe_invalid))
def test_expand_refuses_what_broadcast_to_refuses(b, shape, target):
    x = b.input("x", "f32", list(shape))
    try:
        expected = np.broadcast_to(zeros(shape), target).shape
    except ValueError:
        with pytest.raises(esgraph.ShapeError):
            ops.expand(x, list(target))
    else:
        assert ops.expand(x, list(target)).shape == expected


# ---- squeeze, unsqueeze, pad -------------------------------------------------------------------
def _squeeze_case(rng):
    shape = rand_shape(rng, 0, 5, sizes=(0, 1, 1, 1, 2, 3))
    ones = [i for i, d in enumerate(shape) if d == 1]
    chosen = [int(a) for a in rng.choice(ones, size=int(rng.integers(0, len(ones) + 1)), replace=False)] if ones else []
    axes = [a - len(shape) if rng.integers(0, 2) else a for a in chosen]
    return f"{fmt(shape)}-axes{fmt(axes)}", shape, axes


@pytest.mark.parametrize("shape, axes", cases(15, _squeeze_case))
def test_squeeze(b, shape, axes):
    out = ops.squeeze(b.input("x", "f32", list(shape)), axes=axes)
    assert out.shape == np.squeeze(zeros(shape), axis=tuple(axes) if axes else None).shape


def _unsqueeze_case(rng):
    shape = rand_shape(rng, 0, 3)
    out_rank = len(shape) + int(rng.integers(1, 4))
    chosen = [int(a) for a in rng.choice(out_rank, size=out_rank - len(shape), replace=False)]
    axes = [a - out_rank if rng.integers(0, 2) else a for a in chosen]
    return f"{fmt(shape)}-axes{fmt(axes)}", shape, axes


@pytest.mark.parametrize("shape, axes", cases(16, _unsqueeze_case))
def test_unsqueeze_like_expand_dims(b, shape, axes):
    out = ops.unsqueeze(b.input("x", "f32", list(shape)), axes)
    assert out.shape == np.expand_dims(zeros(shape), tuple(axes)).shape


def _pad_case(rng):
    shape = rand_shape(rng, 1, 4)
    before = [int(v) for v in rng.integers(0, 4, size=len(shape))]
    after = [int(v) for v in rng.integers(0, 4, size=len(shape))]
    return f"{fmt(shape)}-pads{fmt(before + after)}", shape, before, after


@pytest.mark.parametrize("shape, before, after", cases(17, _pad_case))
def test_constant_pad(b, shape, before, after):
    out = ops.pad(b.input("x", "f32", list(shape)), before + after, value=1.5)
    assert out.shape == np.pad(zeros(shape), list(zip(before, after)), constant_values=1.5).shape


@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_reflect_and_edge_pad(b, mode):
    shape, before, after = (4, 1, 3), [3, 0, 1], [2, 0, 2]
    out = ops.pad(b.input("x", "f32", list(shape)), before + after, mode=mode)
    assert out.shape == np.pad(zeros(shape), list(zip(before, after)), mode=mode).shape
