"""Reshapes, squeezes and unsqueezes are their input's bytes (no launch) wherever the memory
plan can make them so; the values must be what numpy and PyTorch compute, whatever format or
buffer the viewed value lives in."""
import numpy as np
import pytest

import esgraph
from esgraph import ops

RNG = np.random.default_rng(5)


def test_a_flatten_after_a_blocked_convolution_views_the_row_major_copy():
    """A convolution's result lies in blocked channels (nChw16c/8c); a flatten of it must view
    the row-major copy the reorder makes, never the blocked bytes (32 channels of 6x6: the
    sizes agree either way, only the order differs)."""
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    w = RNG.standard_normal((32, 3, 3, 3)).astype(np.float32)
    fc = RNG.standard_normal((32 * 6 * 6, 10)).astype(np.float32)
    with esgraph.GraphBuilder() as b:
        h = ops.relu(ops.conv2d(b.input("x", esgraph.f32, [2, 3, 8, 8]), w))
        y = ops.reshape(h, [2, 32 * 6 * 6]) @ fc
    model = esgraph.compile(b.build([y]))
    want = torch.relu(torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w))).reshape(2, -1) @ torch.from_numpy(fc)
    np.testing.assert_allclose(model(x), want.numpy(), rtol=1e-4, atol=1e-3)
    assert model.stats()["views"] == 1  # the reshape is the convolution's bytes


def test_views_of_inputs_and_of_values_still_read_later_keep_their_bytes():
    """A view of an input reads the caller's bytes; a view of an intermediate keeps it alive, so
    an elementwise op that could have written over that intermediate in place goes elsewhere."""
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    with esgraph.GraphBuilder() as b:
        xi = b.input("x", esgraph.f32, [4, 6])
        a = ops.exp(xi)
        v = ops.unsqueeze(ops.reshape(a, [2, 12]), axes=[0])  # a chain of views of a
        c = ops.tanh(a)  # may not take a's buffer: v still shows it
        y = ops.squeeze(ops.reshape(xi, [1, 24]), axes=[0]) + ops.reshape(c, [24]) + ops.reshape(v, [24])
    model = esgraph.compile(b.build([y]))
    want = x.reshape(24) + np.tanh(np.exp(x)).reshape(24) + np.exp(x).reshape(24)
    np.testing.assert_allclose(model(x), want, rtol=1e-5, atol=1e-6)
    launched = model.to_dot()
    assert "reshape" not in launched and "squeeze" not in launched
    assert model.stats()["launches"] == 3  # exp, tanh and the fused sum


def test_a_view_that_is_an_output_is_copied_into_the_callers_buffer():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    with esgraph.GraphBuilder() as b:
        xi = b.input("x", esgraph.f32, [3, 4])
        e = ops.exp(xi)
        outs = [ops.reshape(e, [12]), e * 2.0]
    got = esgraph.compile(b.build(outs))(x)
    np.testing.assert_allclose(got[0], np.exp(x).reshape(12), rtol=1e-6)
    np.testing.assert_allclose(got[1], np.exp(x) * 2, rtol=1e-6)
