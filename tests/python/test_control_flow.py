"""ops.if_ and ops.while_ with Python callables as bodies."""
import numpy as np
import pytest

import esgraph
from esgraph import ops


class BodyError(Exception):
    """An exception only the tests raise, to check that it comes back unchanged."""


@pytest.fixture
def p(b):
    return b.input("p", esgraph.bool_, [])


@pytest.fixture
def x(b):
    return b.input("x", esgraph.f32, [2, 3])


# ---- if_ ---------------------------------------------------------------------------------------
def test_if_with_lambdas_capturing_outer_tensors(b, p, x):
    out = ops.if_(p, lambda: ops.exp(x), lambda: -x)
    assert isinstance(out, esgraph.Tensor)  # one result: the tensor itself; several: a list
    assert out.shape == (2, 3) and out.dtype == esgraph.f32
    text = str(b.build([out]))
    assert "if(%p) captures(%x)" in text
    assert "then_branch(" in text and "else_branch(" in text


def test_if_branches_may_return_tuples_or_lists(b, p, x):
    w = b.input("w", esgraph.f32, [3, 4])
    outs = ops.if_(p, lambda: (x, x @ w), lambda: [x * 2, ops.fill([2, 4])])
    assert [(o.shape, o.dtype.name) for o in outs] == [((2, 3), "f32"), ((2, 4), "f32")]


def test_if_sizes_that_differ_become_symbolic(p, x):
    out = ops.if_(p, lambda: ops.reshape(x, [3, 2]), lambda: ops.reshape(x, [6, 1]))
    assert out.shape == ("if(3|6)", "if(2|1)")


def test_if_branches_must_agree_in_dtype_rank_and_count(p, x):
    with pytest.raises(esgraph.ShapeError, match="f32\\[2,3\\] in then_branch but f16\\[2,3\\] in else_branch"):
        ops.if_(p, lambda: x, lambda: ops.cast(x, "f16"))
    with pytest.raises(esgraph.ShapeError, match="dtypes and ranks must agree"):
        ops.if_(p, lambda: x, lambda: ops.reshape(x, [6]))
    with pytest.raises(esgraph.ShapeError, match="the branches return 1 and 2 tensors"):
        ops.if_(p, lambda: x, lambda: (x, x))


def test_if_condition_must_be_bool(x):
    with pytest.raises(esgraph.DTypeError, match="input `cond` must be bool, got f32"):
        ops.if_(x, lambda: x, lambda: x)


def test_if_with_a_python_bool_condition(x):
    out = ops.if_(True, lambda: x, lambda: x + 1)
    assert out.shape == (2, 3)


def test_nested_if_captures_through_every_level(b, p, x):
    out = ops.if_(p, lambda: ops.if_(p, lambda: ops.exp(x), lambda: x), lambda: x)
    assert out.shape == (2, 3)
    graph = b.build([out])
    graph.verify()
    assert str(graph).count("if(") == 2


def test_if_branches_returning_python_ints_are_not_bool(p):
    out = ops.if_(p, lambda: 1, lambda: 2)
    assert out.dtype != esgraph.bool_


# ---- while_ ------------------------------------------------------------------------------------
def test_while_bodies_get_the_loop_values_as_positional_args(b, x):
    n = b.input("n", esgraph.i64, [])
    seen = {}

    def cond(i, v):
        seen["cond"] = (i.shape, i.dtype.name, v.shape, v.dtype.name)
        return i < n

    def body(i, v):
        seen["body"] = (i.shape, i.dtype.name, v.shape, v.dtype.name)
        return i + 1, v * 2

    outs = ops.while_([b.constant(np.int64(0)), x], cond, body)
    expected = ((), "i64", (2, 3), "f32")
    assert seen == {"cond": expected, "body": expected}
    assert [(o.shape, o.dtype.name) for o in outs] == [((), "i64"), ((2, 3), "f32")]
    graph = b.build(outs)
    graph.verify()
    text = str(graph)
    assert "while(" in text and "cond(" in text and "body(" in text


@pytest.mark.parametrize("body", [
    lambda v: v + 1,            # a single tensor
    lambda v: (v + 1,),         # a tuple
    lambda v: [v + 1],          # a list
], ids=["single", "tuple", "list"])
def test_while_body_may_return_a_tuple_list_or_single_tensor(x, body):
    out = ops.while_([x], lambda v: ops.reduce_sum(v) < 10.0, body)
    assert isinstance(out, esgraph.Tensor) and out.shape == (2, 3) and out.dtype == esgraph.f32


def test_while_captures_outer_tensors(b, x):
    limit = b.input("limit", esgraph.f32, [])
    step = b.input("step", esgraph.f32, [3])
    out = ops.while_([x], lambda v: ops.reduce_max(v) < limit, lambda v: v + step)
    text = str(b.build([out]))
    assert "captures(" in text


def test_while_body_must_keep_dtypes_shapes_and_count(b, x):
    i0 = b.constant(np.int64(0))
    with pytest.raises(esgraph.ShapeError, match="`body` returns 1 tensors for 2 loop-carried values"):
        ops.while_([i0, x], lambda i, v: i < 3, lambda i, v: i + 1)
    with pytest.raises(esgraph.ShapeError, match="enters as i64\\[\\] but `body` returns i32\\[\\]"):
        ops.while_([i0], lambda i: i < 3, lambda i: ops.cast(i, "i32"))
    with pytest.raises(esgraph.ShapeError, match="enters as f32\\[2,3\\] but `body` returns f32\\[4,3\\]"):
        ops.while_([x], lambda v: ops.reduce_sum(v) < 1.0, lambda v: ops.concat([v, v], 0))
    with pytest.raises(esgraph.ShapeError, match="the result of `cond` must be a bool scalar, got i64\\[\\]"):
        ops.while_([i0], lambda i: i + 1, lambda i: i)


def test_while_init_is_a_list(x):
    with pytest.raises(TypeError, match="`init` takes a list of tensors, got a Tensor"):
        ops.while_(x, lambda v: ops.reduce_sum(v) < 1.0, lambda v: v)
    with pytest.raises(esgraph.InvalidArgumentError):
        ops.while_([], lambda: True, lambda: [])


def test_while_body_returning_a_python_float_for_a_float_value(b):
    n = b.input("n", esgraph.i64, [])
    s = b.input("s", esgraph.f32, [])
    outs = ops.while_([n, s], lambda i, v: i < 10, lambda i, v: (i + 1, 0.5))
    assert outs[1].dtype == esgraph.f32


# ---- exceptions in bodies ----------------------------------------------------------------------
def _raiser(exc):
    def body(*args):
        raise exc
    return body


@pytest.mark.parametrize("where", ["then", "else"])
def test_exception_in_an_if_branch_propagates_unchanged(b, p, x, where):
    exc = BodyError("boom")
    branches = {"then": (_raiser(exc), lambda: x), "else": (lambda: x, _raiser(exc))}[where]
    with pytest.raises(BodyError) as info:
        ops.if_(p, *branches)
    assert info.value is exc
    assert b.build([x]).node_count == 0  # neither branch left anything, the one that finished included


@pytest.mark.parametrize("where", ["cond", "body"])
def test_exception_in_a_while_body_propagates_unchanged(b, x, where):
    exc = BodyError("boom")
    fns = {"cond": (_raiser(exc), lambda v: v), "body": (lambda v: ops.reduce_sum(v) < 1.0, _raiser(exc))}[where]
    with pytest.raises(BodyError) as info:
        ops.while_([x], *fns)
    assert info.value is exc


def test_builtin_exceptions_from_bodies_keep_their_type(p, x):
    with pytest.raises(ZeroDivisionError):
        ops.if_(p, lambda: 1 / 0, lambda: x)
    with pytest.raises(KeyboardInterrupt):
        ops.if_(p, _raiser(KeyboardInterrupt()), lambda: x)
    # A body with the wrong number of parameters fails as Python would call it.
    with pytest.raises(TypeError, match="positional argument"):
        ops.while_([x], lambda: True, lambda v: v)


def test_the_builder_stays_usable_after_a_body_raised(b, p, x):
    def half_built():
        ops.exp(x)  # made inside the body, discarded with it
        raise BodyError("stop")

    with pytest.raises(BodyError):
        ops.if_(p, half_built, lambda: x)
    y = ops.log(x)
    z = ops.if_(p, lambda: ops.sin(x), lambda: x)
    graph = b.build([y, z])
    graph.verify()
    text = str(graph)
    assert "exp" not in text
    assert "log(%x)" in text and "sin(" in text


def test_a_throwing_branch_discards_the_control_flow_nested_in_the_other(b, p, x):
    exc = BodyError("boom")
    nested = lambda: ops.if_(p, lambda: ops.exp(x), lambda: -x)  # noqa: E731
    with pytest.raises(BodyError):
        ops.if_(p, nested, _raiser(exc))
    assert b.build([x]).node_count == 0
