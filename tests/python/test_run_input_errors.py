"""Bad input at run time is refused with the documented errors; array-likes are converted.

See numerics.py for the comparison rules."""
import warnings

import numpy as np
import pytest

import esgraph
from esgraph import ops

from numerics import build, run, check, rng_for, normal, f32, f64, i32, i64


@pytest.fixture
def add_model():
    """Inputs a, b: f32[2, 3] and c: f32[batch, 3]; outputs a + b and the column sums of c."""
    with esgraph.GraphBuilder("add") as gb:
        y = gb.input("a", esgraph.f32, [2, 3]) + gb.input("b", esgraph.f32, [2, 3])
        z = ops.reduce_sum(gb.input("c", esgraph.f32, ["batch", 3]), axes=[0])
    return esgraph.compile(gb.build([y, z]))


def _abc(batch=4):
    rng = rng_for(batch)
    return normal(rng, (2, 3)), normal(rng, (2, 3)), normal(rng, (batch, 3))


def test_model_call_and_run_agree(add_model):
    a, b, c = _abc()
    y, z = add_model(a, b, c)
    check(y, a + b)
    check(z, c.astype(f64).sum(0).astype(f32))
    for outs in (add_model.run([a, b, c]), add_model.run({"a": a, "b": b, "c": c}), add_model.run({"c": c, "b": b, "a": a})):
        assert isinstance(outs, list)
        np.testing.assert_array_equal(outs[0], y)
        np.testing.assert_array_equal(outs[1], z)


@pytest.mark.parametrize("count", [0, 2, 4])
def test_wrong_number_of_inputs(add_model, count):
    arrays = list(_abc()) + [np.zeros((2, 3), f32)]
    with pytest.raises(esgraph.InvalidArgumentError, match="3 input"):
        add_model(*arrays[:count])
    with pytest.raises(esgraph.InvalidArgumentError, match="3 input"):
        add_model.run(arrays[:count])


@pytest.mark.parametrize("which, shape", [(0, (2, 4)), (0, (3, 3)), (1, (2, 3, 1)), (1, (6,)), (2, (4, 2)), (2, (3,)),
                                          (0, ())], ids=str)
def test_wrong_shape(add_model, which, shape):
    arrays = list(_abc())
    arrays[which] = np.zeros(shape, f32)
    with pytest.raises(esgraph.ShapeError) as info:
        add_model(*arrays)
    assert isinstance(info.value, ValueError)


def test_symbolic_dimension_takes_any_size_including_zero(add_model):
    a, b, _ = _abc()
    for batch in (0, 1, 7):
        c = normal(rng_for(batch), (batch, 3))
        check(add_model(a, b, c)[1], c.astype(f64).sum(0).astype(f32))


@pytest.mark.parametrize("convert", [lambda x: x.astype(f64), lambda x: np.asfortranarray(x.astype(f64)),
                                     lambda x: x.astype(i64), lambda x: x.astype(np.float16), lambda x: f64(x[0, 0])],
                         ids=["float64", "fortran order float64", "int64", "float16", "numpy scalar"])
def test_arrays_of_another_dtype_are_refused_unless_cast(add_model, convert):
    a, b, c = _abc()
    got = np.asarray(convert(a)).dtype
    with pytest.raises(esgraph.DTypeError,
                       match=rf"input 0 \(`a`: f32\) got {got} data; convert it with \.astype\(numpy\.float32\), or run with cast=True"):
        add_model(convert(a), b, c)
    with pytest.raises(esgraph.DTypeError, match=r"input 2 \(`c`: f32\)"):
        add_model.run([a, b, convert(c)])
    if np.ndim(convert(a)) == 2:
        y, z = add_model(convert(a), b, convert(c), cast=True)
        check(y, np.asarray(convert(a)).astype(f32) + b)
        check(z, np.asarray(convert(c)).astype(f32).astype(f64).sum(0).astype(f32))


def test_lists_and_numbers_convert_when_the_dtype_holds_them(add_model):
    a, b, c = _abc()
    y, z = add_model(a.tolist(), b, c.tolist())  # Python floats rounded to f32, as written in f32
    check(y, a + b)
    check(z, c.astype(f64).sum(0).astype(f32))
    y, _ = add_model([[1, 2, 3], [4, 5, 6]], b, c)  # integers into floats
    check(y, np.array([[1, 2, 3], [4, 5, 6]], f32) + b)


def test_values_an_integer_input_cannot_hold_are_refused_unless_cast():
    x = np.array([1.9, -1.9, 3.0])
    graph, _ = build(lambda t: t * 2, x.astype(i32))
    model = esgraph.compile(graph)
    with pytest.raises(esgraph.DTypeError, match=r"got float64 data; convert it with \.astype\(numpy\.int32\)"):
        model(x)
    with pytest.raises(esgraph.DTypeError, match="got values of float64 that i32 cannot hold"):
        model([1.7, 1e20, float("nan")])
    check(model([1, -2, 3]), np.array([2, -4, 6], i32))
    check(model(x, cast=True), x.astype(i32) * 2)  # numpy's astype, asked for: truncation
    u8_model = esgraph.compile(build(lambda t: t + 1, np.zeros(2, np.uint8))[0])
    with pytest.raises(esgraph.DTypeError, match="got values of int64 that u8 cannot hold"):
        u8_model([300, -1])
    check(u8_model([1, 254]), np.array([2, 255], np.uint8))  # Python ints that u8 holds
    bool_model = esgraph.compile(build(ops.logical_not, np.zeros(2, bool))[0])
    with pytest.raises(esgraph.DTypeError, match="that bool cannot hold"):
        bool_model([0, 2])
    check(bool_model([0, 1]), np.array([True, False]))
    f16_model = esgraph.compile(build(ops.neg, np.zeros(2, np.float16))[0])
    with pytest.raises(esgraph.DTypeError, match="that f16 cannot hold"):
        f16_model([1.0, 70000.0])  # would become inf
    check(f16_model([1.0, float("inf")]), np.array([-1.0, -np.inf], np.float16))  # infinite already


def test_objects_with_a_dtype_of_their_own_are_refused_like_arrays():
    torch = pytest.importorskip("torch")
    graph, _ = build(ops.neg, np.zeros(3, f32))
    with pytest.raises(esgraph.DTypeError, match=r"got float64 data; convert it with \.astype\(numpy\.float32\)"):
        esgraph.compile(graph)(torch.zeros(3, dtype=torch.float64))


def test_non_contiguous_input():
    x = normal(rng_for(), (4, 6))
    view = x[::2, ::3]
    check(run(ops.neg, np.ascontiguousarray(view)), -view)
    graph, _ = build(ops.neg, np.ascontiguousarray(view))
    check(esgraph.compile(graph)(view), -view)


def test_read_only_input():
    x = normal(rng_for(), (2, 3))
    x.setflags(write=False)
    graph, _ = build(ops.neg, x)
    check(esgraph.compile(graph)(x), -x)


def test_integer_outputs_run_without_warnings():
    x = np.arange(64, dtype=i32)
    graph, _ = build(lambda t: t + 1, x)
    model = esgraph.compile(graph)
    for _ in range(5):
        junk = np.full(64, np.nan, f32)  # freed memory full of NaN, which the next allocation may reuse
        del junk
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = model(x)
        check(got, x + 1)


def test_run_into_the_callers_arrays(add_model):
    a, b, c = _abc()
    y, z = np.full((2, 3), np.nan, f32), np.full(3, np.nan, f32)
    outs = add_model.run([a, b, c], out=[y, z])
    assert outs[0] is y and outs[1] is z
    check(y, a + b)
    check(z, c.astype(f64).sum(0).astype(f32))


def _bad_outs():
    y, z = np.empty((2, 3), f32), np.empty(3, f32)
    return {
        "count": ([y], esgraph.InvalidArgumentError, "2 output"),
        "dtype": ([y.astype(f64), z], TypeError, r"out\[0\]: dtype float64"),
        "shape": ([y, np.empty(4, f32)], esgraph.InvalidArgumentError, r"out\[1\]: shape \(4,\)"),
        "strided": ([np.empty((2, 6), f32)[:, ::2], z], esgraph.InvalidArgumentError, "C-contiguous"),
        "read-only": ([np.frombuffer(bytes(24), f32).reshape(2, 3), z], esgraph.InvalidArgumentError, "writeable"),
        "not an array": ([[[0.0] * 3] * 2, z], TypeError, "numpy array"),
        "not a list": (5, TypeError, "list"),
    }


@pytest.mark.parametrize("case", list(_bad_outs()))
def test_run_refuses_unusable_output_arrays(add_model, case):
    a, b, c = _abc()
    out, error, message = _bad_outs()[case]
    with pytest.raises(error, match=message):
        add_model.run([a, b, c], out=out)
    check(add_model(a, b, c)[0], a + b)


def test_output_array_sharing_an_input_is_refused(add_model):
    a, b, c = _abc()
    with pytest.raises(esgraph.InvalidArgumentError, match="shares memory with input 1"):
        add_model.run([a, b, c], out=[b, np.empty(3, f32)])
    np.testing.assert_array_equal(b, _abc()[1])  # untouched
    both = np.empty(6, f32)
    with pytest.raises(esgraph.InvalidArgumentError, match=r"out\[1\]: shares memory with out\[0\]"):
        add_model.run([a, b, c], out=[both.reshape(2, 3), both[:3]])


def test_byte_swapped_arrays_are_converted_in_and_refused_out(add_model):
    a, b, c = _abc()
    y = add_model.run([a.astype(">f4"), b, c])[0]
    check(y, a + b)
    with pytest.raises(TypeError, match="dtype >f4"):
        add_model.run([a, b, c], out=[np.empty((2, 3), ">f4"), np.empty(3, f32)])


def test_run_with_a_missing_name(add_model):
    a, b, c = _abc()
    with pytest.raises(esgraph.InvalidArgumentError, match="`b`"):
        add_model.run({"a": a, "c": c})
    with pytest.raises(esgraph.InvalidArgumentError):
        add_model.run({})


def test_run_with_an_unknown_name(add_model):
    a, b, c = _abc()
    with pytest.raises(esgraph.InvalidArgumentError):
        add_model.run({"a": a, "b": b, "c": c, "d": c})


def test_an_error_leaves_the_model_usable(add_model):
    a, b, c = _abc()
    with pytest.raises(esgraph.ShapeError):
        add_model(a, np.zeros((5, 5), f32), c)
    check(add_model(a, b, c)[0], a + b)


def test_input_and_output_names(add_model):
    assert add_model.input_names == ["a", "b", "c"]
    assert len(add_model.output_names) == 2


def test_a_kernel_error_inside_a_stream_raises_and_the_model_stays_usable():
    with esgraph.GraphBuilder("branches") as gb:
        x = gb.input("x", esgraph.f32, [64, 64])
        i = gb.input("i", esgraph.i64, [4])
        left, right = ops.tanh(x @ x), ops.gather(x + x, i)
    model = esgraph.compile(gb.build([left, right]), streams=2, threads=2)
    xs = normal(rng_for("streams"), (64, 64), scale=0.1)
    for _ in range(3):
        with pytest.raises(esgraph.InvalidArgumentError, match="out of range"):
            model(xs, np.array([0, 1, 99, 2]))
        _, got = model(xs, np.array([0, 1, 63, 2]))
        check(got, (xs + xs)[[0, 1, 63, 2]])


def _bf16_bits_nearest_even(x):
    bits = x.astype(f32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def test_bf16_crosses_numpy_as_uint16_bit_patterns():
    # numpy has no bf16: model inputs and outputs of that dtype are their bits in uint16.
    x = np.array([1.0, 3.14159265, -2.5e-3, 65504.0, 1 / 3], dtype=f32)
    bits = run(lambda t: ops.cast(t, esgraph.bf16), x)
    assert bits.dtype == np.uint16
    np.testing.assert_array_equal(bits, _bf16_bits_nearest_even(x))
    with esgraph.GraphBuilder("from_bf16") as b:
        t = b.input("t", esgraph.bf16, [5])
        y = ops.cast(t, esgraph.f32)
    model = esgraph.compile(b.build([y]))
    np.testing.assert_array_equal(model(bits), (bits.astype(np.uint32) << 16).view(f32))
    with pytest.raises(esgraph.DTypeError, match="bit patterns as a numpy uint16"):
        model(x)  # float values would be read as bits: refused


def test_an_index_out_of_range_is_reported_as_given():
    """gather's error names the index the data holds (-5), not its normalized form (-2)."""
    with esgraph.GraphBuilder() as b:
        y = ops.gather(b.input("d", esgraph.f32, [3, 4]), b.input("i", esgraph.i64, [1]), axis=0)
        model = esgraph.compile(b.build([y]))
    with pytest.raises(esgraph.InvalidArgumentError, match="gather: index -5 is out of range for an axis of 3"):
        model.run([np.zeros((3, 4), np.float32), np.array([-5])])
