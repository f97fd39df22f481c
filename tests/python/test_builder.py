"""GraphBuilder: the `with` context, constants, symbolic dimensions, scopes, tensor names and the
calling conventions of the generated op bindings (keyword-only options, enums, dtypes)."""
import numpy as np
import pytest

import esgraph
from esgraph import ops


# ---- the with-context and constants ------------------------------------------------------------
def test_with_returns_the_builder_and_builds_after_the_block():
    with esgraph.GraphBuilder("ctx") as b:
        assert isinstance(b, esgraph.GraphBuilder)
        x = b.input("x", esgraph.f32, [2])
        y = ops.exp(x)
    graph = b.build([y])
    assert isinstance(graph, esgraph.Graph)
    assert str(graph).startswith("graph ctx(%x: f32[2])")


@pytest.mark.parametrize("array, dtype", [
    (np.zeros((2, 3), np.float32), "f32"), (np.zeros(4, np.float16), "f16"),
    (np.zeros((1, 1), np.float64), "f64"), (np.arange(6, dtype=np.int8).reshape(3, 2), "i8"),
    (np.zeros(2, np.int16), "i16"), (np.zeros((), np.int32), "i32"), (np.arange(3), "i64"),
    (np.zeros(5, np.uint8), "u8"), (np.array([True, False]), "bool"), (np.zeros((0, 3), np.float32), "f32"),
])
def test_constant_from_numpy_keeps_shape_and_dtype(b, array, dtype):
    c = esgraph.constant(array)
    assert c.shape == array.shape
    assert c.dtype.name == dtype


@pytest.mark.parametrize("value, dtype", [
    (0.5, "f32"), ([1.5, 2.5], "f32"), (np.float64(0.5), "f32"),  # Python's floats (np.float64 is one)
    (np.float16(0.5), "f16"), (np.float32(0.5), "f32"), (np.int8(3), "i8"), (np.uint8(3), "u8"),
])
def test_a_numpy_scalar_keeps_its_dtype_and_a_python_float_is_f32(b, value, dtype):
    assert b.constant(value).dtype.name == dtype


def test_constant_with_an_explicit_dtype(b):
    c = esgraph.constant([[1, 2, 3]], esgraph.f16)
    assert c.shape == (1, 3) and c.dtype == esgraph.f16
    assert b.constant(np.ones(2), dtype="i32").dtype == esgraph.i32


def test_constant_copies_non_contiguous_arrays(b):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2].T
    assert esgraph.constant(a).shape == (3, 4)


def test_constant_refuses_what_has_no_esgraph_dtype(b):
    with pytest.raises(TypeError, match="complex128 has no esgraph dtype"):
        esgraph.constant(np.array([1 + 2j]))
    with pytest.raises(TypeError, match="numpy has no bf16"):
        esgraph.constant(np.ones(2), "bf16")


def test_constant_needs_a_builder_outside_any_with_block():
    with pytest.raises(ValueError, match="no builder: call this inside `with esgraph.GraphBuilder"):
        esgraph.constant(np.ones(3))
    with pytest.raises(ValueError, match="no builder"):
        ops.fill([2, 2])
    with pytest.raises(ValueError, match="no builder"):
        ops.range(4)


def test_the_innermost_with_builder_receives_constants():
    with esgraph.GraphBuilder("outer") as outer:
        x = outer.input("x", esgraph.f32, [3])
        with esgraph.GraphBuilder("inner") as inner:
            c = esgraph.constant(np.ones(3, np.float32))
            with pytest.raises(esgraph.LifetimeError):
                x + c
            assert (inner.input("y", esgraph.f32, [3]) + c).shape == (3,)
        # Back in the outer block, constants go to the outer builder again.
        assert (x + esgraph.constant(np.ones(3, np.float32))).shape == (3,)
    with pytest.raises(ValueError, match="no builder"):
        esgraph.constant(np.ones(3))


def test_leaving_the_with_block_by_an_exception_pops_the_builder():
    with pytest.raises(KeyError):
        with esgraph.GraphBuilder():
            raise KeyError("inside")
    with pytest.raises(ValueError, match="no builder"):
        esgraph.constant(1.0)


def test_a_scalar_operand_uses_the_tensor_builder_not_the_with_builder(b):
    other = esgraph.GraphBuilder("other")
    y = other.input("y", esgraph.f32, [2])
    out = y + 1.0  # the constant goes to `other`, the tensor's builder
    assert out.shape == (2,)
    assert "constant" in str(other.build([out]))


# ---- symbolic dimensions -----------------------------------------------------------------------
def test_symbolic_dims_come_back_as_strings(b):
    x = b.input("x", esgraph.f32, ["batch", 128, "seq"])
    assert x.shape == ("batch", 128, "seq")
    assert x.ndim == 3
    assert repr(x) == "<esgraph.Tensor x: f32[batch,128,seq]>"


def test_a_string_is_not_a_shape(b):
    """A string is a sequence of its characters: "batch" was read as five dimensions."""
    for shape in ("batch", b"batch"):
        with pytest.raises(TypeError, match=r"a shape is a list of dimensions, not a string \((b?)'batch'\): write \[\1'batch'\]"):
            b.input("s", esgraph.f32, shape)


def test_the_same_symbol_name_is_the_same_dimension(b):
    x = b.input("x", esgraph.f32, ["batch", 4])
    y = b.input("y", esgraph.f32, ["batch", 1])
    assert (x + y).shape == ("batch", 4)
    assert ops.concat([x, y], 1).shape == ("batch", 5)
    assert ops.reduce_sum(x, axes=[1]).shape == ("batch",)
    assert ops.matmul(x, x, transpose_b=True).shape == ("batch", "batch")


def test_symbolic_dims_through_ops(b):
    x = b.input("x", esgraph.f32, ["batch", 3])
    assert ops.reshape(x, [-1]).shape == ("batch*3",)
    assert ops.concat([x, b.input("z", esgraph.f32, ["n", 3])], 0).shape == ("(batch+n)", 3)


def test_module_docstring_example():
    with esgraph.GraphBuilder("mlp") as b:
        x = b.input("x", esgraph.f32, ["batch", 784])
        w = np.random.default_rng(0).random((784, 10)).astype(np.float32)
        y = ops.softmax(x @ w + 1.0)
        assert y.shape == ("batch", 10)
        assert y.dtype == esgraph.f32
    assert "softmax" in str(b.build([y]))


@pytest.mark.parametrize("dim", [2.5, None, b"n"])
def test_a_dimension_is_an_int_or_a_name(b, dim):
    with pytest.raises(TypeError, match="a dimension is an int or a symbol name"):
        b.input("x", esgraph.f32, [dim])


def test_a_negative_dimension_is_refused_even_when_symbols_exist(b):
    b.input("x", esgraph.f32, ["batch"])
    with pytest.raises(ValueError):
        b.input("y", esgraph.f32, [-1, 2])


def test_a_negative_dimension_without_symbols_is_refused(b):
    with pytest.raises(esgraph.ShapeError, match="dimension -1 is negative"):
        b.input("y", esgraph.f32, [-1, 2])


# ---- scopes, annotations, control deps, names --------------------------------------------------
def test_name_scopes_nest_and_prefix_node_names(b):
    x = b.input("x", esgraph.f32, [2])
    with b.name_scope("encoder"):
        with b.name_scope("layer1"):
            h = ops.relu(x)
        g = ops.exp(h)
    out = ops.log(g)
    assert h.name.startswith("encoder/layer1/relu_")
    assert g.name.startswith("encoder/exp_")
    assert out.name.startswith("log_")
    text = str(b.build([out]))
    assert "%encoder/layer1/relu_0 = relu(%x)" in text
    assert "%encoder/exp_1 = exp(%encoder/layer1/relu_0)" in text
    assert "%log_2 = log(%encoder/exp_1)" in text


def test_annotations_apply_inside_their_block(b):
    x = b.input("x", esgraph.f32, [2])
    with b.annotate("stream", "copy"):
        with b.annotate("device", "npu:1"):
            y = ops.exp(x)
        z = ops.sin(y)
    w = ops.cos(z)
    text = str(b.build([w]))
    lines = {line.split(" = ")[0].strip(): line for line in text.splitlines() if " = " in line}
    assert '@stream="copy"' in lines["%exp_0"] and '@device="npu:1"' in lines["%exp_0"]
    assert '@stream="copy"' in lines["%sin_1"] and "@device" not in lines["%sin_1"]
    assert "@" not in lines["%cos_2"]


def test_control_deps_appear_as_after(b):
    x = b.input("x", esgraph.f32, [2])
    first = ops.exp(x)
    second = ops.sin(x)
    with b.control_deps([first, second]):
        y = ops.log(x)
    with b.control_deps(first):  # a single tensor works too
        z = ops.cos(x)
    free = ops.tanh(x)
    text = str(b.build([y, z, free]))
    assert "%log_2 = log(%x) after(exp_0, sin_1)" in text
    assert "%cos_3 = cos(%x) after(exp_0)" in text
    assert "%tanh_4 = tanh(%x) : f32[2]" in text


def test_control_deps_take_only_tensors(b):
    with pytest.raises(TypeError, match="expected Tensors"):
        b.control_deps([1, 2])


def test_tensor_name_get_and_set(b):
    x = b.input("x", esgraph.f32, [2])
    assert x.name == "x"
    y = ops.exp(x)
    assert y.name == "exp_0"
    y.name = "activations"
    assert y.name == "activations"
    assert repr(y) == "<esgraph.Tensor activations: f32[2]>"
    assert "%activations = exp(%x)" in str(b.build([y]))


def test_an_empty_tensor_name_is_refused(b):
    x = b.input("x", esgraph.f32, [2])
    with pytest.raises(esgraph.InvalidArgumentError, match="the name is empty"):
        x.name = ""


# ---- calling conventions of the op bindings ----------------------------------------------------
@pytest.fixture
def x4(b):
    return b.input("x", esgraph.f32, [1, 2, 6, 6])


POSITIONAL_OPTIONALS = {
    "softmax axis": lambda x: ops.softmax(x, 1),
    "reduce_sum axes": lambda x: ops.reduce_sum(x, [1]),
    "matmul transpose_a": lambda x: ops.matmul(x, x, True),
    "layer_norm scale": lambda x: ops.layer_norm(x, np.ones(6, np.float32)),
    "conv2d bias": lambda x: ops.conv2d(x, np.ones((3, 2, 1, 1), np.float32), np.ones(3, np.float32)),
    "clip min": lambda x: ops.clip(x, 0.0),
    "pad mode": lambda x: ops.pad(x, [0] * 8, "edge"),
    "split axis": lambda x: ops.split(x, [3, 3], 2),
    "gelu approximate": lambda x: ops.gelu(x, "tanh"),
    "range start": lambda x: ops.range(5.0, 1.0),
    "fill value": lambda x: ops.fill([2], 1.0),
}


@pytest.mark.parametrize("call", POSITIONAL_OPTIONALS.values(), ids=POSITIONAL_OPTIONALS.keys())
def test_optional_arguments_are_keyword_only(x4, call):
    with pytest.raises(TypeError, match=r"positional argument.*keyword-only; the signature is ops\."):
        call(x4)


def test_the_same_optional_arguments_work_by_keyword(x4):
    assert ops.softmax(x4, axis=1).shape == (1, 2, 6, 6)
    assert ops.reduce_sum(x4, axes=[1]).shape == (1, 6, 6)
    assert ops.matmul(x4, x4, transpose_a=True).shape == (1, 2, 6, 6)
    assert ops.layer_norm(x4, scale=np.ones(6, np.float32)).shape == (1, 2, 6, 6)
    conv = ops.conv2d(x4, np.ones((3, 2, 1, 1), np.float32), bias=np.ones(3, np.float32))
    assert conv.shape == (1, 3, 6, 6)
    assert ops.clip(x4, min=0.0).shape == (1, 2, 6, 6)
    assert ops.pad(x4, [0, 0, 1, 1, 0, 0, 1, 1], mode="edge").shape == (1, 2, 8, 8)
    assert [p.shape for p in ops.split(x4, [3, 3], axis=2)] == [(1, 2, 3, 6)] * 2
    assert ops.range(5.0, start=1.0).shape == (4,)
    assert ops.fill([2], value=1.0).shape == (2,)


def test_required_attributes_positionally_or_by_keyword(b):
    x = b.input("x", esgraph.f32, [2, 6])
    assert ops.reshape(x, [3, 4]).shape == ops.reshape(x, shape=[3, 4]).shape == (3, 4)
    assert ops.concat([x, x], 0).shape == ops.concat(xs=[x, x], axis=0).shape == (4, 6)
    assert ops.slice(x, [1], [5], axes=[1]).shape == ops.slice(x, starts=[1], ends=[5], axes=[1]).shape == (2, 4)
    assert ops.cast(x, "i32").dtype == ops.cast(x, to="i32").dtype == esgraph.i32
    assert ops.range(3).shape == ops.range(limit=3).shape == (3,)


def test_a_missing_required_attribute_is_a_type_error(b):
    x = b.input("x", esgraph.f32, [2, 6])
    with pytest.raises(TypeError):
        ops.reshape(x)
    with pytest.raises(TypeError):
        ops.concat([x, x])


@pytest.mark.parametrize("value", ["none", "tanh"])
def test_enum_attributes_by_string(b, value):
    assert ops.gelu(b.input("x", esgraph.f32, [3]), approximate=value).shape == (3,)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_modes_by_string(b, mode):
    assert ops.pad(b.input("x", esgraph.f32, [3]), [1, 1], mode=mode).shape == (5,)


def test_a_bad_enum_value_names_the_op_the_attribute_and_the_valid_values(b):
    x = b.input("x", esgraph.f32, [3])
    with pytest.raises(ValueError) as e:
        ops.gelu(x, approximate="fast")
    assert str(e.value) == "gelu: `approximate` is 'fast'; valid: 'none', 'tanh'"
    with pytest.raises(ValueError, match="pad: `mode` is 'wrap'; valid: 'constant', 'reflect', 'edge'"):
        ops.pad(x, [1, 1], mode="wrap")
    with pytest.raises(TypeError):
        ops.gelu(x, approximate=1)


DTYPE_SPELLINGS = [
    (esgraph.i32, "i32"), ("i32", "i32"), (np.int32, "i32"), (np.dtype("int32"), "i32"),
    (esgraph.DType.f16, "f16"), ("bf16", "bf16"), (np.float16, "f16"), (np.float64, "f64"),
    (esgraph.bool_, "bool"), ("bool", "bool"), (np.bool_, "bool"), (np.uint8, "u8"),
    (np.int8, "i8"), (np.int16, "i16"), (np.int64, "i64"),
]


@pytest.mark.parametrize("spelling, name", DTYPE_SPELLINGS, ids=[f"{s!r}" for s, _ in DTYPE_SPELLINGS])
def test_dtype_attributes_accept_dtype_strings_and_numpy(b, spelling, name):
    x = b.input("x", esgraph.f32, [2])
    assert ops.cast(x, spelling).dtype.name == name
    assert ops.fill([3], dtype=spelling).dtype.name == name
    assert b.input("y", spelling, [1]).dtype.name == name


def test_range_dtype_attribute(b):
    assert ops.range(4).dtype == esgraph.i64
    assert ops.range(4, dtype=np.float32).dtype == esgraph.f32
    assert ops.range(1.0, step=0.25, dtype=esgraph.f64).shape == (4,)


def test_bad_dtypes(b):
    x = b.input("x", esgraph.f32, [2])
    with pytest.raises(ValueError, match="unknown dtype 'int32'; dtypes: f32 f16 bf16"):
        ops.cast(x, "int32")
    with pytest.raises(TypeError, match="cannot use .* as a dtype"):
        ops.cast(x, object)
    with pytest.raises(TypeError, match="as a dtype"):
        ops.cast(x, np.complex64)  # numpy, but not an esgraph dtype


def test_dtype_enum():
    assert esgraph.f32 == esgraph.DType.f32
    assert esgraph.bool_ == esgraph.DType.bool
    assert [t.name for t in (esgraph.f32, esgraph.f16, esgraph.bf16, esgraph.f64, esgraph.i8, esgraph.i16,
                             esgraph.i32, esgraph.i64, esgraph.u8, esgraph.bool_, esgraph.u16, esgraph.u32,
                             esgraph.u64)] == [
        "f32", "f16", "bf16", "f64", "i8", "i16", "i32", "i64", "u8", "bool", "u16", "u32", "u64"]
    assert [int(t) for t in (esgraph.bool_, esgraph.u16, esgraph.u32, esgraph.u64)] == [10, 11, 12, 13]  # the C ABI's codes
    assert esgraph.u64.numpy == np.uint64 and esgraph.bf16.numpy == np.uint16  # bf16: bit patterns
    assert esgraph.f32 != esgraph.f64


def test_error_classes_derive_from_the_builtins_users_expect():
    assert issubclass(esgraph.ShapeError, esgraph.Error) and issubclass(esgraph.ShapeError, ValueError)
    assert issubclass(esgraph.DTypeError, esgraph.Error) and issubclass(esgraph.DTypeError, TypeError)
    assert issubclass(esgraph.AttributeValueError, ValueError)
    assert issubclass(esgraph.LifetimeError, esgraph.Error)
    assert issubclass(esgraph.FormatError, ValueError)
    assert issubclass(esgraph.GraphIOError, OSError)
    assert issubclass(esgraph.InvalidArgumentError, ValueError)
    assert esgraph.ShapeError.__module__ == "esgraph" and esgraph.ShapeError.__name__ == "ShapeError"
