"""Memory formats on the CPU: with the option channel_block (by default 16 with AVX-512, 8 with
AVX2), the pools and convolutions compute over blocked channels (nChw8c, nChw16c) and the
elementwise ops between them stay blocked; values are checked against PyTorch's pools and the
counts of reorders against what the plan must insert."""
import numpy as np
import pytest
import torch

import esgraph
from esgraph import ops

from numerics import cpu_flags

RTOL, ATOL = 1e-5, 1e-6


def pools_graph(shape):
    """max pool 2x2/2, x·0.5 - 0.25, relu, avg pool 3x3 padded 1, tanh, max pool 2x2, padded right."""
    with esgraph.GraphBuilder("pools") as b:
        x = b.input("x", esgraph.f32, list(shape))
        y = ops.max_pool2d(x, kernel=[2, 2], strides=[2, 2])
        y = ops.relu(y * 0.5 - 0.25)
        y = ops.avg_pool2d(y, kernel=[3, 3], pads=[1, 1, 1, 1])
        return b.build([ops.max_pool2d(ops.tanh(y), kernel=[2, 2], pads=[0, 0, 1, 1])])


def torch_pools(x):
    t = torch.from_numpy(x.astype(np.float64))
    y = torch.nn.functional.max_pool2d(t, 2, 2)
    y = torch.relu(y * 0.5 - 0.25)
    y = torch.nn.functional.avg_pool2d(y, 3, 1, 1, count_include_pad=False)
    y = torch.nn.functional.pad(torch.tanh(y), (0, 1, 0, 1), value=-float("inf"))
    return torch.nn.functional.max_pool2d(y, 2, 1).numpy().astype(np.float32)


@pytest.mark.parametrize("block", [8, 16])
@pytest.mark.parametrize("channels", [3, 8, 12, 16, 20])
def test_a_blocked_chain_matches_torch_with_reorders_at_its_ends(block, channels):
    x = np.random.default_rng(channels).standard_normal((2, channels, 11, 10)).astype(np.float32)
    g = pools_graph(x.shape)
    model = esgraph.compile(g, backend_options={"channel_block": block})
    np.testing.assert_allclose(model(x), torch_pools(x), rtol=RTOL, atol=ATOL)
    assert model.stats()["reorders"] == 2
    row_major = esgraph.compile(g, backend_options={"channel_block": 0})
    np.testing.assert_array_equal(model(x), row_major(x))  # the same math, element by element


def test_the_option_is_checked():
    g = pools_graph((1, 4, 6, 6))
    for bad in (4, 17, -1):
        with pytest.raises(esgraph.InvalidArgumentError, match="channel_block"):
            esgraph.compile(g, backend_options={"channel_block": bad})
    assert esgraph.compile(g, backend_options={"channel_block": 0}).stats()["reorders"] == 0


def squeeze_excite_graph(shape, reduce):
    """max pool 2x2/2; s = sigmoid(global pool); y·s - s/2, relu; max pool 2x2: the global pool
    and the per-channel products stay blocked."""
    with esgraph.GraphBuilder("se") as b:
        x = b.input("x", esgraph.f32, list(shape))
        y = ops.max_pool2d(x, kernel=[2, 2], strides=[2, 2])
        pooled = (ops.reduce_mean if reduce == "mean" else ops.reduce_max)(y, axes=[2, 3], keepdims=True)
        s = ops.sigmoid(pooled)
        z = ops.relu(y * s - s * 0.5)
        return b.build([ops.max_pool2d(z, kernel=[2, 2])])


def torch_squeeze_excite(x, reduce):
    t = torch.from_numpy(x.astype(np.float64))
    y = torch.nn.functional.max_pool2d(t, 2, 2)
    pooled = y.mean((2, 3), keepdim=True) if reduce == "mean" else y.amax((2, 3), keepdim=True)
    s = torch.sigmoid(pooled)
    z = torch.relu(y * s - s * 0.5)
    return torch.nn.functional.max_pool2d(z, 2, 1).numpy().astype(np.float32)


@pytest.mark.parametrize("reduce", ["mean", "max"])
@pytest.mark.parametrize("block", [8, 16])
@pytest.mark.parametrize("channels", [3, 16, 20])
def test_a_squeeze_excitation_block_stays_blocked(channels, block, reduce):
    """Global pools over H and W and products with one value per channel compute on the
    blocked values: the only reorders are the graph's input and output."""
    x = np.random.default_rng(channels).standard_normal((2, channels, 12, 10)).astype(np.float32)
    model = esgraph.compile(squeeze_excite_graph(x.shape, reduce), backend_options={"channel_block": block})
    np.testing.assert_allclose(model(x), torch_squeeze_excite(x, reduce), rtol=RTOL, atol=ATOL)
    assert model.stats()["reorders"] == 2


@pytest.mark.parametrize("block", [8, 16])
def test_a_concatenation_along_the_channels_stays_blocked(block):
    """Pools of 16, 32 and 20 channels concatenated along the channels, then pooled again: in
    that order every input but the last fills whole blocks (one copy per input and image);
    with the 20 first, the result's blocks are picked lane by lane. Either way no reorder but
    the graph's inputs and output."""
    rng = np.random.default_rng(block)
    xs = [rng.standard_normal((2, c, 8, 6)).astype(np.float32) for c in (16, 32, 20)]

    def build(order):
        with esgraph.GraphBuilder("concat") as b:
            ins = [b.input(f"x{i}", esgraph.f32, list(x.shape)) for i, x in enumerate(xs)]
            pooled = [ops.max_pool2d(x, kernel=[2, 2]) for x in ins]
            y = ops.concat([pooled[i] for i in order], axis=1)
            return b.build([ops.avg_pool2d(ops.relu(y), kernel=[2, 2])])

    for order in ((0, 1, 2), (2, 0, 1)):
        model = esgraph.compile(build(order), backend_options={"channel_block": block})
        t = [torch.nn.functional.max_pool2d(torch.from_numpy(x), 2, 1) for x in xs]
        want = torch.nn.functional.avg_pool2d(torch.relu(torch.cat([t[i] for i in order], 1)), 2, 1).numpy()
        np.testing.assert_allclose(model.run(xs)[0], want, rtol=RTOL, atol=ATOL)
        assert model.stats()["reorders"] == 4
        assert "concat" not in readers_of_reorders(model)


def readers_of_reorders(model):
    """The ops that read a reordered copy (a fused group counts as "fused group")."""
    return {r["reader"] for r in model.stats().get("reordered_for", [])}


def _has_avx512():
    return "avx512f" in cpu_flags()


def test_grouped_convolutions_of_8_channels_a_group_run_in_blocks_of_8():
    """Among nChw16c values, a convolution whose direct oneDNN kernel wants blocks of 8 (8
    channels a group) computes in nChw8c, reordered on each side; values against PyTorch."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 16, 10, 10)).astype(np.float32)
    w1, w2, w3 = (rng.standard_normal(s).astype(np.float32) * 0.2 for s in ((32, 16, 1, 1), (32, 8, 3, 3), (16, 32, 1, 1)))
    with esgraph.GraphBuilder("grouped") as b:
        h = ops.relu(ops.conv2d(b.input("x", esgraph.f32, list(x.shape)), b.constant(w1)))
        h = ops.relu(ops.conv2d(h, b.constant(w2), groups=4, pads=[1, 1, 1, 1]))
        g = b.build([ops.conv2d(h, b.constant(w3))])
    model = esgraph.compile(g, backend_options={"channel_block": 16})
    t = torch.relu(torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w1)))
    t = torch.relu(torch.nn.functional.conv2d(t, torch.from_numpy(w2), groups=4, padding=1))
    want = torch.nn.functional.conv2d(t, torch.from_numpy(w3)).numpy()
    np.testing.assert_allclose(model(x), want, rtol=1e-4, atol=1e-4)
    if _has_avx512():
        assert "nChw8c" in {v["format"] for v in model.stats()["blocked_values"]}


@pytest.mark.parametrize("block", [8, 16])
def test_a_channel_shuffle_and_its_halves_stay_blocked(block):
    """ShuffleNet's shuffle (reshape to [N, 2, C/2, H, W], swap, reshape back) and its two channel
    halves become gathers of the channels, which run on the blocked values: no reorder but the
    graph's input and outputs; values against PyTorch's view/transpose/chunk."""
    rng = np.random.default_rng(block)
    x = rng.standard_normal((2, 32, 6, 5)).astype(np.float32)
    with esgraph.GraphBuilder("shuffle") as b:
        y = ops.max_pool2d(b.input("x", esgraph.f32, list(x.shape)), kernel=[2, 2])
        n, c, h, w = 2, 32, 5, 4
        s = ops.reshape(ops.transpose(ops.reshape(y, [n, 2, c // 2, h, w]), perm=[0, 2, 1, 3, 4]), [n, c, h, w])
        halves = [ops.slice(s, [0], [c // 2], axes=[1]), ops.slice(s, [c // 2], [c], axes=[1])]
        g = b.build([ops.relu(t) for t in halves])
    model = esgraph.compile(g, backend_options={"channel_block": block})
    t = torch.nn.functional.max_pool2d(torch.from_numpy(x), 2, 1)
    t = t.view(2, 2, 16, 5, 4).transpose(1, 2).reshape(2, 32, 5, 4)
    for got, want in zip(model.run([x]), t.chunk(2, dim=1)):
        np.testing.assert_array_equal(got, torch.relu(want).numpy())
    assert model.stats()["reorders"] == 3
    assert "gather" in model.to_dot() and "transpose" not in model.to_dot()


def test_a_blocked_gather_of_channels_reads_run_time_indices_and_refuses_bad_ones():
    x = np.random.default_rng(3).standard_normal((1, 20, 4, 4)).astype(np.float32)
    with esgraph.GraphBuilder("gather") as b:
        y = ops.max_pool2d(b.input("x", esgraph.f32, list(x.shape)), kernel=[1, 1])
        g = b.build([ops.gather(y, b.input("i", esgraph.i64, [3]), axis=1)])
    model = esgraph.compile(g, backend_options={"channel_block": 16})
    assert model.stats()["reorders"] == 2  # x in, the result out: the gather runs blocked
    np.testing.assert_array_equal(model(x, np.array([19, -1, 3])), x[:, [19, 19, 3]])
    with pytest.raises(esgraph.InvalidArgumentError, match="index 20 is out of range for an axis of 20"):
        model(x, np.array([0, 20, 1]))


@pytest.mark.parametrize("block", [8, 16])
def test_blocked_gathers_and_concatenations_pick_lanes_from_any_blocks(block):
    """A result block's lanes come from two source blocks (a permute of two vectors per pixel)
    or from more (lane by lane), with repeats, negative indices and padding lanes; a concatenation
    of 5-channel inputs puts three inputs into one block. Against numpy."""
    rng = np.random.default_rng(block + 1)
    x = rng.standard_normal((2, 48, 5, 3)).astype(np.float32)
    parts = [rng.standard_normal((2, 5, 5, 3)).astype(np.float32) for _ in range(4)]
    picks = {
        "two blocks": np.array([1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31, 2, 2, -1]),
        "many blocks": rng.permutation(48),
        "one block": np.array([4, 0, 4]),
    }
    with esgraph.GraphBuilder("picks") as b:
        y = ops.max_pool2d(b.input("x", esgraph.f32, list(x.shape)), kernel=[1, 1])
        i = b.input("i", esgraph.i64, ["picked"])
        cat = ops.concat([ops.max_pool2d(b.input(f"p{k}", esgraph.f32, list(p.shape)), kernel=[1, 1]) for k, p in enumerate(parts)], axis=1)
        g = b.build([ops.gather(y, i, axis=1), ops.relu(cat)])
    for name, idx in picks.items():
        model = esgraph.compile(g, shapes={"picked": len(idx)}, backend_options={"channel_block": block})
        got, got_cat = model.run([x, idx, *parts])
        np.testing.assert_array_equal(got, x[:, idx], err_msg=name)
        np.testing.assert_array_equal(got_cat, np.maximum(np.concatenate(parts, axis=1), 0))
        assert not {"gather", "concat"} & readers_of_reorders(model)


@pytest.mark.parametrize("threads", [1, 2])
def test_reorders_of_several_large_images_split_over_the_threads(threads):
    """Reorders into and out of nChw16c of 4 images of 2^16 elements each: with two threads the
    images are split between them (one reorder an image), with one all images in one; values
    against PyTorch either way."""
    x = np.random.default_rng(threads).standard_normal((4, 20, 64, 52)).astype(np.float32)
    with esgraph.GraphBuilder("reorders") as b:
        g = b.build([ops.max_pool2d(b.input("x", esgraph.f32, list(x.shape)), kernel=[2, 2], strides=[2, 2])])
    model = esgraph.compile(g, threads=threads, backend_options={"channel_block": 16})
    assert model.stats()["reorders"] == 2
    want = torch.nn.functional.max_pool2d(torch.from_numpy(x), 2, 2).numpy()
    np.testing.assert_array_equal(model(x), want)
