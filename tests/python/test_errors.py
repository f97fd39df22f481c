"""Errors raised where an expression is written, tensor lifetimes, and the builder's sticky
first error."""
import gc
import re

import numpy as np
import pytest

import esgraph
from esgraph import ops


def test_a_broadcast_mismatch_names_the_op_the_rule_and_both_shapes(b):
    a = b.input("a", esgraph.f32, [2, 3])
    c = b.input("c", esgraph.f32, [4])
    with pytest.raises(esgraph.ShapeError) as info:
        a + c
    message = str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, esgraph.Error)
    assert message.startswith("add: ")
    assert "rule `broadcast`" in message
    assert "[2,3]" in message and "[4]" in message
    assert "a: f32[2,3], b: f32[4]" in message


def test_the_same_error_through_ops_add(b):
    a = b.input("a", esgraph.f32, [2, 3])
    with pytest.raises(esgraph.ShapeError, match=r"add: cannot broadcast \[2,3\] with \[4\]"):
        ops.add(a, np.zeros(4, np.float32))


@pytest.mark.parametrize("call", [
    lambda x: ops.softmax(x, axis=2),
    lambda x: ops.softmax(x, axis=-3),
    lambda x: ops.reduce_sum(x, axes=[5]),
    lambda x: ops.argmax(x, axis=-3),
    lambda x: ops.concat([x, x], 2),
    lambda x: ops.split(x, [1, 1], axis=7),
    lambda x: ops.gather(x, ops.range(2), axis=2),
], ids=["softmax", "softmax-neg", "reduce_sum", "argmax", "concat", "split", "gather"])
def test_an_axis_out_of_range_is_an_attribute_value_error(b, call):
    x = b.input("x", esgraph.f32, [2, 3])
    with pytest.raises(esgraph.AttributeValueError, match="out of range for rank 2 \\(valid: -2 .. 1\\)") as info:
        call(x)
    assert isinstance(info.value, ValueError)


def test_attribute_ranges(b):
    x = b.input("x", esgraph.f32, [1, 1, 4, 4])
    w = b.input("w", esgraph.f32, [1, 1, 3, 3])
    with pytest.raises(esgraph.AttributeValueError, match="attribute `groups` is 0, outside \\[1, inf\\]"):
        ops.conv2d(x, w, groups=0)
    with pytest.raises(esgraph.AttributeValueError):
        ops.leaky_relu(x, alpha=-1.0)
    with pytest.raises(esgraph.AttributeValueError, match="`steps` cannot contain 0"):
        ops.slice(x, [0], [1], steps=[0])


def test_mismatched_dtypes_are_a_dtype_error(b):
    f = b.input("f", esgraph.f32, [2])
    i = b.input("i", esgraph.i32, [2])
    with pytest.raises(esgraph.DTypeError, match="must share one dtype, got f32 and i32") as info:
        f + i
    assert isinstance(info.value, TypeError)
    with pytest.raises(esgraph.DTypeError, match="T accepts only f32, f16, bf16, f64"):
        ops.exp(i)
    with pytest.raises(esgraph.DTypeError, match="must be bool, got f32"):
        ops.logical_not(f)
    with pytest.raises(esgraph.DTypeError):
        ops.gather(f, np.zeros(1, np.float32))


def test_names_are_text_c_strings_hold(b):
    """A name with a lone surrogate (no UTF-8 form) or a NUL (where the C API's strings end) is
    refused by name, not cut short or met with pybind11's overload list."""
    with pytest.raises(esgraph.InvalidArgumentError, match=re.escape(r"the input name 'a\ud800' is not valid text")):
        b.input("a\ud800", esgraph.f32, [2])
    with pytest.raises(esgraph.InvalidArgumentError, match=re.escape(r"the input name 'a\0b' holds a NUL character")):
        b.input("a\x00b", esgraph.f32, [2])
    x = b.input("x", esgraph.f32, [2])
    with pytest.raises(esgraph.InvalidArgumentError, match="holds a NUL character"):
        x.name = "y\x00"
    with pytest.raises(esgraph.InvalidArgumentError, match="lone surrogate"):
        with b.name_scope("\udc80"):
            pass


@pytest.mark.parametrize("value", [10**400, 1e300, np.array([1.0, 1e300]), -(10**39)], ids=["int", "float", "array", "negative"])
def test_a_constant_that_becomes_infinite_in_its_dtype_is_refused(b, value):
    x = b.input("x", esgraph.f32, [2])
    with pytest.raises(esgraph.DTypeError, match="does not fit in f32: it would become infinite"):
        x + value


@pytest.mark.parametrize("dtype, value, message", [
    ("i32", np.array([2**40 + 5]), r"1099511627781 does not fit in i32 \(range -2147483648 .. 2147483647\)"),
    ("i8", np.array([300, 1]), r"300 does not fit in i8 \(range -128 .. 127\)"),
    ("i8", np.array([-129]), r"-129 does not fit in i8"),
    ("i64", np.array([2**63], np.uint64), r"9223372036854775808 does not fit in i64"),
    ("i32", np.int64(2**40 + 7), r"1099511627783 does not fit in i32"),
    ("u8", np.array([-1]), r"-1 does not fit in u8 \(range 0 .. 255\)"),
], ids=["i32", "i8-high", "i8-low", "u64-into-i64", "numpy-scalar", "negative-into-u8"])
def test_a_numpy_integer_that_does_not_fit_its_dtype_is_refused(b, dtype, value, message):
    """numpy's integers wrapped silently (2**40 + 5 into i32 was 5), where a Python int is
    refused; every value within the range is taken as it is."""
    x = b.input("x", getattr(esgraph, dtype), [1])
    with pytest.raises(esgraph.DTypeError, match=message):
        x + value
    info = np.iinfo(getattr(esgraph, dtype).numpy)
    x + np.array([info.min, info.max], dtype=np.int64)


def test_infinity_itself_and_the_largest_values_are_constants_like_any(b):
    x = b.input("x", esgraph.f32, [2])
    h = b.input("h", esgraph.f16, [2])
    x + float("inf"), x + 3.4028235e38, x + np.array([np.inf, -np.inf]), h + 65504.0
    with pytest.raises(esgraph.DTypeError, match="70000.0 does not fit in f16"):
        h + 70000.0


@pytest.mark.parametrize("call, message", [
    (lambda x: ops.softmax(x, axis="1"), "ops.softmax: `axis` takes an int, got a str"),
    (lambda x: ops.softmax(x, axis=1.0), "ops.softmax: `axis` takes an int, got a float"),
    (lambda x: ops.softmax(x, axis=2**63), "ops.softmax: `axis` takes an int, got an int beyond the 64-bit range"),
    (lambda x: ops.reduce_sum(x, axes="01"), "ops.reduce_sum: `axes` takes a list of ints, got a str"),
    (lambda x: ops.reshape(x, ["a", 2]), "ops.reshape: `shape` takes a list of ints, got a list whose item 0 is a str"),
    (lambda x: ops.reshape(x, [2, 2**64]), "ops.reshape: `shape` takes a list of ints, got a list whose item 1 is an int beyond the 64-bit range"),
    (lambda x: ops.concat([x], "0"), "ops.concat: `axis` takes an int, got a str"),
    (lambda x: ops.concat(x, 0), "ops.concat: `xs` takes a list of tensors, got a Tensor"),
    (lambda x: ops.leaky_relu(x, alpha="big"), "ops.leaky_relu: `alpha` takes a float, got a str"),
    (lambda x: ops.if_(x, 1, 2), "ops.if_: `then_branch` takes a function, got an int"),
], ids=["axis-str", "axis-float", "axis-huge", "axes-str", "shape-strs", "shape-huge", "concat-axis-str", "concat-one",
        "float-str", "if-not-callable"])
def test_a_wrong_python_type_for_an_attribute_names_the_op_and_the_argument(b, call, message):
    x = b.input("x", esgraph.f32, [2, 3])
    with pytest.raises(TypeError) as info:
        call(x)
    assert str(info.value).startswith(message + "; the signature is ops."), str(info.value)
    assert "incompatible function arguments" not in str(info.value)
    assert b.build([x]).node_count == 0  # refused before reaching the graph


@pytest.mark.parametrize("call", [
    lambda x: ops.add(x), lambda x: ops.add(), lambda x: ops.where(x, x),
    lambda x: ops.gather(x), lambda x: ops.exp(),
], ids=["add-1", "add-0", "where-2", "gather-1", "exp-0"])
def test_a_missing_required_input_is_a_type_error(b, call):
    with pytest.raises(TypeError):
        call(b.input("x", esgraph.f32, [2]))


def test_none_for_a_required_input_is_a_type_error(b):
    with pytest.raises(TypeError, match="None is not a tensor"):
        ops.add(b.input("x", esgraph.f32, [2]), None)


# ---- lifetimes ---------------------------------------------------------------------------------
def test_mixing_tensors_of_two_builders_is_a_lifetime_error():
    one, two = esgraph.GraphBuilder("one"), esgraph.GraphBuilder("two")
    x = one.input("x", esgraph.f32, [2])
    y = two.input("y", esgraph.f32, [2])
    with pytest.raises(esgraph.LifetimeError, match="belongs to another builder"):
        x + y
    with pytest.raises(esgraph.LifetimeError):
        ops.concat([x, y], 0)
    with pytest.raises(esgraph.LifetimeError):
        ops.layer_norm(x, scale=y)
    with pytest.raises(esgraph.LifetimeError):
        one.build([y])


def test_a_tensor_used_after_build_is_a_lifetime_error(b):
    x = b.input("x", esgraph.f32, [2])
    y = ops.exp(x)
    assert x.valid and y.valid
    b.build([y])
    assert not y.valid and not x.valid
    assert repr(y) == "<esgraph.Tensor of a built graph>"
    with pytest.raises(esgraph.LifetimeError, match="can no longer be used"):
        ops.log(y)
    with pytest.raises(esgraph.LifetimeError):
        y + 1.0
    with pytest.raises(esgraph.LifetimeError):
        y.shape
    with pytest.raises(esgraph.LifetimeError):
        y.dtype
    with pytest.raises(esgraph.LifetimeError):
        y.name
    # The builder itself starts a fresh graph.
    z = b.input("z", esgraph.f32, [3])
    w = ops.exp(z)
    assert w.shape == (3,)
    assert str(b.build([w])).startswith("graph test(%z: f32[3]) {")


def test_a_stale_tensor_does_not_poison_the_next_graph(b):
    x = b.input("x", esgraph.f32, [2])
    b.build([x])
    with pytest.raises(esgraph.LifetimeError):
        ops.log(x)
    with pytest.raises(esgraph.LifetimeError):
        x.shape
    z = b.input("z", esgraph.f32, [3])
    assert b.build([ops.exp(z)]).node_count == 1


def test_renaming_a_stale_tensor_does_not_poison_the_next_graph(b):
    x = b.input("x", esgraph.f32, [2])
    b.build([x])
    with pytest.raises(esgraph.LifetimeError):
        x.name = "renamed"
    z = b.input("z", esgraph.f32, [3])
    b.build([z])


def test_a_tensor_keeps_its_builder_alive():
    def make():
        builder = esgraph.GraphBuilder("temporary")
        return builder.input("x", esgraph.f32, [4, 2])

    x = make()
    gc.collect()
    y = ops.relu(x * 2.0) @ np.ones((2, 3), np.float32)
    assert y.shape == (4, 3) and y.valid

    b = esgraph.GraphBuilder("deleted")
    u = b.input("u", esgraph.f32, [5])
    del b
    gc.collect()
    v = ops.exp(u) + 1.0
    assert v.shape == (5,) and v.dtype == esgraph.f32
    assert u.name == "u"


def test_a_graph_outlives_its_builder():
    b = esgraph.GraphBuilder("g")
    out = ops.exp(b.input("x", esgraph.f32, [2]))
    graph = b.build([out])
    del b, out
    gc.collect()
    assert "exp(%x)" in str(graph)


# ---- a caught exception leaves nothing behind -----------------------------------------------------
def test_after_a_caught_error_the_builder_goes_on_as_if_the_call_was_not_made(b):
    a = b.input("a", esgraph.f32, [2, 3])
    with pytest.raises(esgraph.ShapeError, match=r"add: cannot broadcast \[2,3\] with \[4\]"):
        a + b.input("c", esgraph.f32, [4])
    with pytest.raises(esgraph.AttributeValueError):
        ops.softmax(a, axis=5)
    with pytest.raises(esgraph.DTypeError):
        a + b.input("i", esgraph.i32, [3])
    y = ops.exp(a)
    assert y.shape == (2, 3)
    graph = b.build([y])
    assert graph.node_count == 1  # the failed calls left no node behind


def test_the_readmes_broadcast_mistake_caught_then_fixed():
    with esgraph.GraphBuilder("readme") as b:
        x = b.input("x", esgraph.f32, [2, 4])
        with pytest.raises(esgraph.ShapeError):
            x + np.ones(3)
        y = x + np.ones(4)
    assert "add" in str(b.build([y]))


def test_a_failed_call_leaves_the_graph_unchanged(b):
    x = b.input("x", esgraph.f32, [2, 3])
    y = ops.exp(x)
    with pytest.raises(esgraph.AttributeValueError):
        ops.reduce_sum(x, axes=[7])
    with pytest.raises(esgraph.ShapeError):
        ops.split(x, [1, 5])
    z = ops.log(y)
    assert z.name == "log_1"  # the failed nodes took no ids


# ---- sizes --------------------------------------------------------------------------------------
def test_sizes_beyond_the_element_limit_are_shape_errors(b):
    with pytest.raises(esgraph.ShapeError, match=r"has more than 2\^48 elements"):
        b.input("x", esgraph.f32, [2**40, 2**40])
    with pytest.raises(esgraph.ShapeError, match=r"dimension 9223372036854775808 is larger than 2\^48"):
        b.input("y", esgraph.f32, [2**63])
    with pytest.raises(esgraph.ShapeError, match=r"is larger than 2\^48"):
        b.input("z", esgraph.f32, [2**70, 1])
    with pytest.raises(esgraph.ShapeError, match=r"fill: output 0: .* has more than 2\^48 elements"):
        with b:
            ops.fill([2**40, 2**40])
    x = b.input("x", esgraph.f32, [2**40])
    with pytest.raises(esgraph.AttributeValueError, match=r"more than 2\^48 elements"):
        ops.reshape(x, [2**40, 2**40, -1])
    assert b.build([x]).node_count == 0



def test_inputs_need_a_name_of_their_own(b):
    b.input("x", esgraph.f32, [2])
    with pytest.raises(esgraph.InvalidArgumentError, match="an input named `x` already"):
        b.input("x", esgraph.f32, [3])
    with pytest.raises(esgraph.InvalidArgumentError, match="needs a name"):
        b.input("", esgraph.f32, [3])


@pytest.mark.parametrize("call, message", [
    (lambda x: ops.softmax(np.zeros((200, 200), np.float32), -1), "ops.softmax: takes 1 positional argument, got 2; `axis`, `mask`, `scale` are keyword-only"),
    (lambda x: ops.leaky_relu(x, alpa=0.1), "ops.leaky_relu: no argument `alpa` (it takes `x`, `alpha`)"),
    (lambda x: ops.add(x, x, b=x), "ops.add: `b` given twice, by position and by keyword"),
    (lambda x: ops.reshape(x), "ops.reshape: missing `shape`"),
    (lambda x: ops.exp(), "ops.exp: missing `x`"),
], ids=["option-by-position", "unknown-keyword", "twice", "missing-attr", "missing-input"])
def test_a_call_that_fits_no_signature_names_what_is_wrong_and_the_signature(b, call, message):
    x = b.input("x", esgraph.f32, [2, 3])
    with pytest.raises(TypeError) as info:
        call(x)
    text = str(info.value)
    assert text.startswith(message), text
    assert "; the signature is ops." in text and len(text) < 400  # no array printed


def test_op_docstrings_start_with_the_signature():
    assert ops.leaky_relu.__doc__.startswith("leaky_relu(x, *, alpha=0.01) -> Tensor\n\n")
    assert ops.split.__doc__.startswith("split(x, sizes, *, axis=0) -> List[Tensor]")
    assert "Overloaded" not in ops.softmax.__doc__
