"""Model.prepare: runs on numpy arrays fixed once, checked against numpy; what it refuses."""
import gc
import threading

import numpy as np
import pytest

import esgraph as eg
from esgraph import ops


def mlp(b, batch=4):
    x = b.input("x", eg.f32, [batch, 8])
    w = b.input("w", eg.f32, [8, 5])
    return eg.compile(b.build([ops.relu(ops.matmul(x, w)) * 2.0, ops.reduce_sum(x, axes=[1])]))


def test_each_run_reads_the_arrays_as_they_are_then(b):
    m = mlp(b)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((8, 5)).astype(np.float32)
    p = m.prepare({"w": w, "x": x})
    for _ in range(3):
        y, s = p.run()
        np.testing.assert_allclose(y, np.maximum(x @ w, 0) * 2, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(s, x.sum(1), rtol=1e-5, atol=1e-6)
        x[...] = rng.standard_normal((4, 8))
    assert p.run()[0] is p.outputs[0] and p.inputs[0] is x


def test_given_outputs_are_written_in_place(b):
    m = mlp(b)
    x, w = np.ones((4, 8), np.float32), np.eye(8, 5, dtype=np.float32)
    y, s = np.empty((4, 5), np.float32), np.empty(4, np.float32)
    p = m.prepare([x, w], out=[y, s])
    assert p.run()[0] is y
    np.testing.assert_array_equal(y, np.full((4, 5), 2, np.float32))
    np.testing.assert_array_equal(s, np.full(4, 8, np.float32))


def test_the_prepared_run_keeps_its_arrays_and_model_alive(b):
    m = mlp(b)
    p = m.prepare([np.full((4, 8), 2, np.float32), np.ones((8, 5), np.float32)])
    del m
    gc.collect()
    np.testing.assert_array_equal(p.run()[0], np.full((4, 5), 32, np.float32))


def test_bf16_crosses_as_its_bit_patterns(b):
    x = b.input("x", eg.bf16, [3])
    m = eg.compile(b.build([x + x]))
    bits = (np.array([1.0, -2.5, 3.0], np.float32).view(np.uint32) >> 16).astype(np.uint16)
    got = m.prepare([bits]).run()[0]
    assert got.dtype == np.uint16
    np.testing.assert_array_equal((got.astype(np.uint32) << 16).view(np.float32), [2.0, -5.0, 6.0])


def test_what_prepare_refuses(b):
    m = mlp(b)
    x, w = np.ones((4, 8), np.float32), np.ones((8, 5), np.float32)
    with pytest.raises(eg.DTypeError, match=r"input 0 \(`x`\) is float64 of shape \(4, 8\), the model's is f32.*converts nothing"):
        m.prepare([x.astype(np.float64), w])
    with pytest.raises(TypeError, match="expected a numpy array"):
        m.prepare([x.tolist(), w])
    with pytest.raises(eg.InvalidArgumentError, match="must be C-contiguous"):
        m.prepare([np.ones((8, 4), np.float32).T, w])
    with pytest.raises(eg.InvalidArgumentError, match="takes 2 input"):
        m.prepare([x])
    with pytest.raises(eg.InvalidArgumentError, match="no array for input `w`"):
        m.prepare({"x": x})
    # A key the model has no input of is named, with the model's inputs (it was "no array for x").
    with pytest.raises(eg.InvalidArgumentError, match=r"the model has no input 'y', 3 \(its inputs: `x`, `w`\)"):
        m.prepare({"y": x, 3: w, "w": w})
    with pytest.raises(eg.ShapeError, match=r"input x is \[4,8\], got \[3,8\]"):
        m.prepare([np.ones((3, 8), np.float32), w])
    y = np.empty((4, 5), np.float32)
    with pytest.raises(eg.InvalidArgumentError, match="must be writeable"):
        y.flags.writeable = False
        m.prepare([x, w], out=[y, np.empty(4, np.float32)])
    with pytest.raises(eg.InvalidArgumentError, match="out: the model has 2 output"):
        m.prepare([x, w], out=[np.empty((4, 5), np.float32)])
    with pytest.raises(eg.InvalidArgumentError, match="shares memory with input 0"):
        m.prepare([x, w], out=[np.empty((4, 5), np.float32), x.reshape(-1)[:4]])


def test_an_output_sized_by_the_data_has_nothing_to_prepare(b):
    x = b.input("x", eg.f32, [4])
    m = eg.compile(b.build([ops.nonzero(ops.greater(x, b.constant(np.float32(0))))]))
    with pytest.raises(eg.InvalidArgumentError, match="its size depends on the data"):
        m.prepare([np.ones(4, np.float32)])


def test_the_lists_it_gives_are_copies(b):
    m = mlp(b)
    p = m.prepare([np.full((4, 8), 2, np.float32), np.ones((8, 5), np.float32)])
    outs, ins = p.run(), p.inputs
    outs[0] = ins[0] = None  # the prepared run's own references stay
    gc.collect()
    np.testing.assert_array_equal(p.run()[0], np.full((4, 5), 32, np.float32))
    assert p.inputs[0] is not None


def test_one_run_at_a_time(b):
    # Two threads run one prepared run: while one runs, the other's call is refused.
    x = b.input("x", eg.f32, [384, 384])
    m = eg.compile(b.build([ops.matmul(ops.matmul(x, x), x)]))
    p = m.prepare([np.ones((384, 384), np.float32) / 384])
    refused = []

    def runs(count):
        for _ in range(count):
            try:
                p.run()
            except eg.InvalidArgumentError as e:
                refused.append(str(e))

    t = threading.Thread(target=runs, args=(40,))
    t.start()
    runs(40)
    t.join()
    assert refused and all("running already, on another thread" in r for r in refused), refused
    np.testing.assert_allclose(p.run()[0], np.ones((384, 384), np.float32) / 384, rtol=1e-5)


def test_run_and_prepare_read_a_dict_by_the_same_rules(b):
    """Model.run with {name: array} names a key the model has no input of, with its inputs, as
    prepare does (run said "no value for input `x`", or that the dict had extra names without
    naming them); values in any key order."""
    m = mlp(b)
    x, w = np.ones((4, 8), np.float32), np.full((8, 5), 0.5, np.float32)
    np.testing.assert_allclose(m.run({"w": w, "x": x})[0], np.maximum(x @ w, 0) * 2)
    for verb in (m.run, m.prepare):
        with pytest.raises(eg.InvalidArgumentError, match=r"the model has no input 'y' \(its inputs: `x`, `w`\)"):
            verb({"y": x, "w": w})
        with pytest.raises(eg.InvalidArgumentError, match=r"the model has no input 'y' \(its inputs: `x`, `w`\)"):
            verb({"x": x, "w": w, "y": x})
        with pytest.raises(eg.InvalidArgumentError, match="no array for input `w`"):
            verb({"x": x})
