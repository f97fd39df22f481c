"""Python operators on tensors: arithmetic, comparisons, logic, reflected forms and lifting of
Python scalars and numpy arrays into constants."""
import operator

import numpy as np
import pytest

import esgraph
from esgraph import ops


@pytest.fixture
def x(b):
    return b.input("x", esgraph.f32, [2, 3])


def op_of(graph_text, result_name):
    """The line of `graph_text` that defines `result_name` (e.g. '%sub_1 = sub(%constant_0, %x)')."""
    lines = [line.strip() for line in graph_text.splitlines() if line.strip().startswith(f"%{result_name} =")]
    assert len(lines) == 1, graph_text
    return lines[0]


ARITHMETIC = [
    (operator.add, "add"), (operator.sub, "sub"), (operator.mul, "mul"),
    (operator.truediv, "div"), (operator.pow, "pow"),
]
COMPARISONS = [
    (operator.lt, "less"), (operator.le, "less_equal"), (operator.gt, "greater"),
    (operator.ge, "greater_equal"), (operator.eq, "equal"), (operator.ne, "not_equal"),
]


@pytest.mark.parametrize("fn, op_name", ARITHMETIC, ids=[n for _, n in ARITHMETIC])
def test_arithmetic_operator_is_the_op(b, x, fn, op_name):
    out = fn(x, b.input("y", esgraph.f32, [3]))
    assert out.shape == (2, 3) and out.dtype == esgraph.f32
    name = out.name
    assert name.startswith(op_name + "_")
    assert op_of(str(b.build([out])), name) == f"%{name} = {op_name}(%x, %y) : f32[2,3]"


@pytest.mark.parametrize("fn, op_name", COMPARISONS, ids=[n for _, n in COMPARISONS])
def test_comparison_operators_give_bool(b, x, fn, op_name):
    out = fn(x, b.input("y", esgraph.f32, [1, 3]))
    assert out.shape == (2, 3)
    assert out.dtype == esgraph.bool_
    assert out.name.startswith(op_name + "_")


@pytest.mark.parametrize("fn, op_name", COMPARISONS, ids=[n for _, n in COMPARISONS])
def test_comparison_with_a_scalar(x, fn, op_name):
    out = fn(x, 0.5)
    assert out.dtype == esgraph.bool_ and out.shape == (2, 3)


def test_matmul_operator(b, x):
    w = b.input("w", esgraph.f32, [3, 5])
    out = x @ w
    assert out.shape == (2, 5) and out.dtype == esgraph.f32
    assert out.name.startswith("matmul_")


def test_unary_minus_is_neg(x):
    out = -x
    assert out.shape == (2, 3) and out.dtype == esgraph.f32
    assert out.name.startswith("neg_")


def test_logical_operators(b):
    p = b.input("p", "bool", [4])
    q = b.input("q", "bool", [2, 1])
    for out, name in [(p & q, "logical_and"), (p | q, "logical_or")]:
        assert out.shape == (2, 4) and out.dtype == esgraph.bool_
        assert out.name.startswith(name + "_")
    inv = ~p
    assert inv.shape == (4,) and inv.dtype == esgraph.bool_ and inv.name.startswith("logical_not_")


def test_logical_operators_need_bool(x):
    with pytest.raises(esgraph.DTypeError, match="must be bool, got f32"):
        ~x
    with pytest.raises(esgraph.DTypeError):
        x & x


def test_reflected_scalars_keep_the_operand_order(b, x):
    outs = {"sub": 1 - x, "div": 2 / x, "pow": 2 ** x, "add": 1 + x, "mul": 2 * x}
    for out in outs.values():
        assert out.shape == (2, 3) and out.dtype == esgraph.f32
    text = str(b.build(list(outs.values())))
    # The scalar becomes a constant that is the *first* operand of the reflected op.
    assert "= sub(%constant_0, %x)" in text
    assert "= div(%constant_2, %x)" in text
    assert "= pow(%constant_4, %x)" in text


def test_reflected_matmul_with_a_nested_list_on_the_left(b):
    w = b.input("w", esgraph.f32, [3, 4])
    out = [[1.0, 2.0, 3.0]] @ w
    assert out.shape == (1, 4)
    assert out.dtype == esgraph.f32


def test_reflected_logic_with_python_bools(b):
    p = b.input("p", "bool", [3])
    assert (True & p).dtype == esgraph.bool_
    assert (False | p).shape == (3,)


# ---- Python scalars adopt the tensor's dtype ----------------------------------------------------
@pytest.mark.parametrize("dtype", ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"])
def test_int_tensor_plus_int_stays_int(b, dtype):
    i = b.input("i", dtype, [3])
    for out in (i + 1, 1 + i, i * 2, i - 1, 3 - i, i / 2, True * i):
        assert out.dtype.name == dtype
        assert out.shape == (3,)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32", "f64"])
def test_float_tensor_with_python_numbers_keeps_its_dtype(b, dtype):
    f = b.input("f", dtype, [2])
    for out in (f + 1, f * 0.5, 1.5 - f, f ** 2, f / 3):
        assert out.dtype.name == dtype


@pytest.mark.parametrize("dtype", ["i32", "i64", "u8"])
def test_float_scalar_with_an_int_tensor_is_a_type_error(b, dtype):
    i = b.input("i", dtype, [3])
    with pytest.raises(TypeError, match="cannot combine the float 1.5 with a"):
        i + 1.5
    with pytest.raises(TypeError, match="cast the tensor first"):
        2.0 * i


def test_bool_scalar_with_a_bool_tensor(b):
    p = b.input("p", "bool", [3])
    assert (p == True).dtype == esgraph.bool_  # noqa: E712 (the operator is what is tested)


def _serialized(dtype, make_operand):
    """The serialized graph of `i + operand` for an input `i` of `dtype`."""
    with esgraph.GraphBuilder("g") as gb:
        i = gb.input("i", dtype, [3])
        y = i + make_operand(gb)
    return gb.build([y]).serialize()


@pytest.mark.parametrize("value", [5, -7, 2**31 + 3])
def test_int_scalar_is_the_same_constant_as_numpy_gives(value):
    scalar = _serialized("i64", lambda gb: value)
    assert scalar == _serialized("i64", lambda gb: gb.constant(np.array(value, np.int64)))
    assert scalar != _serialized("i64", lambda gb: gb.constant(np.array(value + 1, np.int64)))


def test_big_int_scalar_is_exact_with_an_i64_tensor():
    big = 2**53 + 1
    assert _serialized("i64", lambda gb: big) == _serialized("i64", lambda gb: gb.constant(np.array(big, np.int64)))


@pytest.mark.parametrize("dtype, value", [("i8", 1000), ("u8", -1), ("i32", 2**40)])
def test_int_scalar_out_of_the_dtype_range_is_refused(b, dtype, value):
    i = b.input("i", dtype, [3])
    with pytest.raises((OverflowError, ValueError, TypeError)):
        i + value


# ---- numpy arrays as constants ------------------------------------------------------------------
def test_float64_array_with_an_f32_tensor_gives_f32(x):
    out = x + np.ones(3)  # float64
    assert out.dtype == esgraph.f32
    assert out.shape == (2, 3)


def test_int_array_with_a_float_tensor_takes_the_float_dtype(x):
    assert (x * np.arange(3)).dtype == esgraph.f32


def test_int64_array_with_an_i32_tensor_gives_i32(b):
    i = b.input("i", "i32", [3])
    assert (i + np.array([1, 2, 3], dtype=np.int64)).dtype == esgraph.i32


def test_float_array_with_an_int_tensor_is_a_dtype_error(b):
    i = b.input("i", "i32", [3])
    with pytest.raises(esgraph.DTypeError, match="must share one dtype, got i32 and f64"):
        i + np.ones(3)


def test_array_shape_broadcasts(x):
    assert (x @ np.zeros((3, 7), np.float32)).shape == (2, 7)
    assert (x - np.zeros((4, 1, 1))).shape == (4, 2, 3)


def test_explicit_tensors_of_the_right_dtype_need_no_lifting(b):
    x = b.input("x", esgraph.f32, [3, 2])
    assert ops.gather(x, b.input("i", "i64", [4])).shape == (4, 2)
    assert ops.where(b.input("c", "bool", [2]), x, b.input("zero", "f32", [])).shape == (3, 2)


@pytest.mark.parametrize("indices", [np.array([0, 2]), [0, 2]], ids=["ndarray", "list"])
def test_gather_with_numpy_indices(b, indices):
    x = b.input("x", esgraph.f32, [3, 2])
    assert ops.gather(x, indices).shape == (2, 2)


def test_where_with_a_numpy_condition(b):
    out = ops.where(np.array([True, False]), b.input("x", esgraph.f32, [3, 2]), 0.0)
    assert out.shape == (3, 2) and out.dtype == esgraph.f32


def test_where_with_a_numpy_branch_value(b):
    out = ops.where(b.input("c", "bool", [2]), np.ones(2), b.input("y", esgraph.f32, [2]))
    assert out.dtype == esgraph.f32


def test_where_with_a_python_scalar_branch(b):
    out = ops.where(b.input("mask", "bool", [3, 2]), b.input("x", esgraph.f32, [3, 2]), 0.0)
    assert out.shape == (3, 2) and out.dtype == esgraph.f32


def test_numpy_scalars_on_the_left(x):
    assert (np.float32(2) * x).dtype == esgraph.f32
    assert (np.float64(2) + x).shape == (2, 3)


@pytest.mark.parametrize("fn", [operator.add, operator.sub, operator.mul, operator.truediv],
                         ids=["add", "sub", "mul", "truediv"])
def test_numpy_array_on_the_left(x, fn):
    out = fn(np.ones(3), x)
    assert isinstance(out, esgraph.Tensor)
    assert out.shape == (2, 3) and out.dtype == esgraph.f32


def test_numpy_array_on_the_left_of_matmul(b):
    out = np.ones((2, 3)) @ b.input("w", esgraph.f32, [3, 4])
    assert isinstance(out, esgraph.Tensor) and out.shape == (2, 4)


def test_numpy_array_on_the_left_of_a_comparison(x):
    out = np.zeros(3) < x
    assert isinstance(out, esgraph.Tensor) and out.dtype == esgraph.bool_


# ---- no truth value ------------------------------------------------------------------------------
def test_bool_of_a_tensor_is_a_type_error(x):
    with pytest.raises(TypeError, match="no truth value"):
        bool(x)
    with pytest.raises(TypeError, match="esgraph.ops.if_"):
        if x > 0:
            pass
    with pytest.raises(TypeError):
        x and x


def test_operands_that_are_not_tensors(x):
    with pytest.raises(TypeError, match="None is not a tensor"):
        x + None
    with pytest.raises(TypeError):
        x + "a"
