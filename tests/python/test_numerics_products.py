"""Matmul, convolution and pooling on seeded random data against numpy (and a short numpy
reference written here for conv2d and pooling), on oneDNN's primitives and split over threads.

See numerics.py for the comparison rules."""

import numpy as np
import pytest

import esgraph
from esgraph import ops

from numerics import build, run, check, cpu_flags, rng_for, normal, small_ints, f32, f64, i32, i64, UNARY


def precisions(model, products):
    """The precisions of a model's oneDNN products of one kind ("onednn_convolutions", "onednn_matmuls")."""
    return {p["precision"] for p in model.stats().get(products, [])}


def product_kernels(model):
    """The kernels of a model's products with constant weights: oneDNN's primitives, our packed
    GEMM where oneDNN has only its gemm (AVX2 without AVX-512), or for one row a call our kernel
    reading the constant in place."""
    stats = model.stats()
    return stats.get("onednn_matmuls", []) + stats.get("packed_matmuls", []) + stats.get("row_matmuls", [])


@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("a_shape, b_shape", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)),
                                              ((2, 1, 3, 4), (5, 4, 6)), ((1, 3, 1), (2, 1, 2)), ((3, 0), (0, 2)),
                                              ((0, 3, 4), (4, 2))], ids=str)
def test_matmul(a_shape, b_shape, transpose_a, transpose_b):
    rng = rng_for(a_shape, b_shape, transpose_a, transpose_b)
    a, b = normal(rng, a_shape, scale=1.0), normal(rng, b_shape, scale=1.0)
    # Store the operands transposed where the op transposes them back.
    a_in = np.ascontiguousarray(a.swapaxes(-1, -2)) if transpose_a else a
    b_in = np.ascontiguousarray(b.swapaxes(-1, -2)) if transpose_b else b
    got = run(lambda x, y: ops.matmul(x, y, transpose_a=transpose_a, transpose_b=transpose_b), a_in, b_in)
    check(got, np.matmul(a.astype(f64), b.astype(f64)).astype(f32))


@pytest.mark.parametrize("dtype", [i32, i64])
def test_matmul_int(dtype):
    rng = rng_for(dtype)
    a, b = small_ints(rng, (2, 3, 4), dtype), small_ints(rng, (4, 2), dtype)
    check(run(ops.matmul, a, b), np.matmul(a, b))


def test_matmul_operator():
    rng = rng_for()
    a, b = normal(rng, (3, 4)), normal(rng, (4, 2))
    check(run(lambda x, y: x @ y, a, b), (a.astype(f64) @ b.astype(f64)).astype(f32))


# Products with constant 2-D weights run on oneDNN's matmul primitive (weights reordered once).
# (A's shape, N): few rows (one block), rows in blocks of 64 and a last block of 36 (a fused
# head), and a lone product split in shares of rows.
CONSTANT_WEIGHT_PRODUCTS = {"few rows": ((8, 256), 512), "blocks and a tail": ((2, 50, 64), 512),
                            "rows in shares": ((300, 256), 512), "one row": ((1, 1, 96), 40),
                            "columns in shares": ((4, 1024), 1000)}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("epilogue", [False, True])
@pytest.mark.parametrize("case", CONSTANT_WEIGHT_PRODUCTS)
def test_matmul_with_constant_weights_runs_on_the_matmul_primitive(case, epilogue, transpose_b, threads):
    """x @ W (and tanh(x @ W + r), the product heading a fused group): the values of numpy's
    product in f64, on oneDNN's primitive as the model's facts say, alone or under a group's rows."""
    a_shape, n = CONSTANT_WEIGHT_PRODUCTS[case]
    rng = rng_for(case, epilogue, transpose_b)
    x, w = normal(rng, a_shape, scale=1.0), normal(rng, (a_shape[-1], n), scale=1.0)
    r = normal(rng, a_shape[:-1] + (n,), scale=1.0)
    want = x.astype(f64) @ w.astype(f64)
    if epilogue:
        want = np.tanh(want + r)
    with esgraph.GraphBuilder("product") as b:
        xi = b.input("x", esgraph.f32, list(x.shape))
        y = ops.matmul(xi, b.constant(np.ascontiguousarray(w.T) if transpose_b else w), transpose_b=transpose_b)
        g = b.build([ops.tanh(y + b.input("r", esgraph.f32, list(r.shape))) if epilogue else y])
    model = esgraph.compile(g, threads=threads)
    got = model.run([x, r] if epilogue else [x])[0]
    np.testing.assert_allclose(got, want.astype(f32), rtol=1e-4, atol=1e-4)  # sums of up to 256 products of N(0, 1)
    assert len(product_kernels(model)) == 1
    assert model.stats()["library_calls"] == 1 and model.stats()["reference_kernels"] == 0
    # Split with two threads from 2^20 multiply-adds (two pieces of 2^19): a lone product's rows
    # in shares (its columns for few rows); a fused head of several blocks of rows spreads its
    # blocks instead.
    rows, k = int(np.prod(a_shape[:-1])), a_shape[-1]
    one_block = rows <= max(64, 16384 // n)
    split = threads == 2 and rows * k * n >= 2 ** 20 and (one_block or not epilogue)
    assert model.stats()["split_matmuls"] == int(split)


def test_matmul_with_weights_from_a_run_stays_on_sgemm():
    rng = rng_for("sgemm")
    x, w = normal(rng, (8, 32)), normal(rng, (32, 16))
    g = build(lambda a, b: ops.matmul(a, b), x, w)[0]
    model = esgraph.compile(g)
    check(model(x, w), (x.astype(f64) @ w.astype(f64)).astype(f32))
    assert not product_kernels(model) and model.stats()["library_calls"] == 0


@pytest.mark.parametrize("threads", [1, 2])
def test_products_of_a_few_rows_run_on_weights_packed_once_where_onednn_packs_at_every_call(threads):
    """Where oneDNN's kernel packs the weights again at every call (its gemm, AVX2 without
    AVX-512), calls of 2 to 32 rows run on our packed GEMM (a recurrent step); one row, or many
    (a fused head then one block per thread), read the constant where it lies."""
    rng = rng_for("packed", threads)
    w = normal(rng, (256, 512), scale=0.1)
    models = {}
    for rows in (1, 8, 32, 33, 300):
        x, r = normal(rng, (rows, 256), scale=1.0), normal(rng, (rows, 512), scale=1.0)
        with esgraph.GraphBuilder("product") as b:
            y = ops.matmul(b.input("x", esgraph.f32, [rows, 256]), b.constant(w))
            g = b.build([ops.tanh(y + b.input("r", esgraph.f32, [rows, 512]))])
        models[rows] = model = esgraph.compile(g, threads=threads)
        want = np.tanh(x.astype(f64) @ w.astype(f64) + r)
        np.testing.assert_allclose(model(x, r), want.astype(f32), rtol=1e-5, atol=1e-5)
    if not models[8].stats().get("packed_matmuls"):
        pytest.skip("oneDNN packs the weights once on this CPU (brgemm): no packed GEMM here")
    for rows, model in models.items():
        packed = 2 <= rows <= 32
        assert bool(model.stats().get("packed_matmuls")) == packed, rows
        assert (model.stats()["weights_in_place"] > 0) != packed, rows  # (a count of column shares)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("k, n", [(1, 1), (7, 13), (33, 70), (1024, 200), (300, 2049)], ids=str)
def test_one_row_products_read_the_weights_in_place(k, n, transpose_b, threads):
    """A decoder's token: one row times constant weights on our kernel that streams them where
    they lie (no copy), K x N split by rows of K over the threads, N x K by its rows; odd sizes
    reach every tail (columns past the last 8, rows of K past the last 4, dot products past the
    last 8), with a fused epilogue, against numpy in f64."""
    rng = rng_for("one row", k, n, transpose_b, threads)
    w, x, r = normal(rng, (k, n), scale=0.1), normal(rng, (1, k), scale=1.0), normal(rng, (1, n), scale=1.0)
    with esgraph.GraphBuilder("token") as b:
        weights = b.constant(np.ascontiguousarray(w.T) if transpose_b else w)
        y = ops.matmul(b.input("x", esgraph.f32, [1, k]), weights, transpose_b=transpose_b)
        g = b.build([ops.tanh(y + b.input("r", esgraph.f32, [1, n]))])
    model = esgraph.compile(g, threads=threads)
    want = np.tanh(x.astype(f64) @ w.astype(f64) + r)
    np.testing.assert_allclose(model(x, r), want.astype(f32), rtol=2e-5, atol=2e-5)
    stats = model.stats()
    if not {"avx2", "fma"} <= cpu_flags():
        pytest.skip("no AVX2 and FMA: oneDNN's gemm takes one row")
    assert [p["implementation"] for p in stats["row_matmuls"]] == ["row:avx2"]
    assert stats["weights_packed"] == 0 and stats["weights_in_place"] >= 1


def test_large_constant_weights_reshaped_fold_before_the_product():
    """An exporter's squeeze of 2^18-element weights (above the folding limit for results larger
    than their inputs) folds at compile time: no squeeze runs, and the product takes the
    folded constant as its weights."""
    rng = rng_for("fold")
    x, w = normal(rng, (4, 256)), normal(rng, (1, 1024, 256))
    with esgraph.GraphBuilder("squeezed") as b:
        g = b.build([ops.matmul(b.input("x", esgraph.f32, list(x.shape)), ops.squeeze(b.constant(w), axes=[0]), transpose_b=True)])
    model = esgraph.compile(g)
    np.testing.assert_allclose(model(x), x.astype(f64) @ w[0].T.astype(f64), rtol=1e-4, atol=1e-4)
    assert model.stats()["launches"] == 1 and len(product_kernels(model)) == 1


def conv2d_reference(x, w, bias=None, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), groups=1):
    """NCHW cross-correlation with an OIHW filter: one einsum per kernel tap and group."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x.astype(f64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    y = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xg, wg = xp[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og].astype(f64)
        for i in range(kh):
            for j in range(kw):
                r0, c0 = i * dilations[0], j * dilations[1]
                patch = xg[:, :, r0:r0 + strides[0] * (oh - 1) + 1:strides[0], c0:c0 + strides[1] * (ow - 1) + 1:strides[1]]
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, wg[:, :, i, j])
    if bias is not None:
        y += bias.astype(f64)[None, :, None, None]
    return y


def test_conv2d_reference_on_a_hand_computed_case():
    x = np.arange(16, dtype=f64).reshape(1, 1, 4, 4)
    w = np.array([[[[1, 0], [0, -1]]]], f64)
    # Each output is x[r, c] - x[r + 1, c + 1] = -5 everywhere; stride 2 keeps the even corners.
    np.testing.assert_array_equal(conv2d_reference(x, w, strides=(2, 2)), np.full((1, 1, 2, 2), -5.0))
    # A zero pad on top: the first row sees zeros above, so its outputs are -x[0, c + 1].
    y = conv2d_reference(x, w, pads=(1, 0, 0, 0))
    np.testing.assert_array_equal(y[0, 0, 0], -x[0, 0, 0, 1:])


CONV_CASES = {
    "plain": dict(x=(1, 1, 5, 5), w=(1, 1, 3, 3)),
    "channels+bias": dict(x=(2, 3, 6, 5), w=(4, 3, 3, 2), bias=True),
    "strides": dict(x=(1, 2, 7, 8), w=(3, 2, 3, 3), strides=[2, 3]),
    "pads asymmetric": dict(x=(1, 2, 5, 6), w=(2, 2, 3, 3), pads=[1, 0, 2, 1]),
    "dilations": dict(x=(1, 2, 9, 7), w=(2, 2, 3, 2), dilations=[2, 3]),
    "groups": dict(x=(2, 4, 6, 6), w=(6, 2, 3, 3), groups=2, bias=True),
    "depthwise": dict(x=(1, 3, 5, 5), w=(3, 1, 3, 3), groups=3, pads=[1, 1, 1, 1]),
    "depthwise strided dilated": dict(x=(2, 4, 9, 8), w=(4, 1, 3, 2), groups=4, strides=[2, 3], pads=[1, 2, 0, 1],
                                      dilations=[2, 1], bias=True),
    "depthwise wide padding": dict(x=(1, 2, 4, 4), w=(2, 1, 3, 3), groups=2, pads=[3, 3, 3, 3], strides=[2, 2]),
    "channel multiplier": dict(x=(1, 2, 6, 6), w=(4, 1, 3, 3), groups=2, pads=[1, 1, 1, 1]),
    "everything": dict(x=(2, 6, 9, 10), w=(4, 3, 3, 2), strides=[2, 1], pads=[2, 1, 0, 1], dilations=[1, 2],
                       groups=2, bias=True),
    "1x1": dict(x=(1, 4, 3, 3), w=(5, 4, 1, 1)),
    # Columns of more than 512 KB per image: laid out and multiplied in bands of output rows.
    # (Data in quarters, so that the products and their sums are exact in any order.)
    "bands": dict(x=(2, 8, 20, 512), w=(3, 8, 3, 3), pads=[1, 1, 1, 1], bias=True, quarters=True),
    "bands strided": dict(x=(1, 8, 24, 1024), w=(3, 8, 3, 3), strides=[1, 2], pads=[2, 1, 0, 0], dilations=[2, 1],
                          quarters=True),
}


def conv_data(rng, spec):
    """The input and filters of a CONV_CASES entry (popping its shapes from `spec`)."""
    x, w = normal(rng, spec.pop("x"), scale=1.0), normal(rng, spec.pop("w"), scale=1.0)
    if spec.pop("quarters", False):
        x, w = np.round(x * 4) / 4, np.round(w * 4) / 4
    return x, w


@pytest.mark.parametrize("block", [0, 8, 16])
@pytest.mark.parametrize("filters", ["input", "constant"])
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d(case, filters, block):
    """On oneDNN's primitives in every memory format (channel_block 0: row-major), with filters
    given at each run (reordered then) or constant (reordered at compile time)."""
    spec = dict(CONV_CASES[case])
    rng = rng_for(case)
    x, w = conv_data(rng, spec)
    bias = [normal(rng, (w.shape[0],))] if spec.pop("bias", False) else []
    want = conv2d_reference(x, w, *bias, **spec).astype(f32)
    if filters == "input":
        g = build(lambda a, b, *c: ops.conv2d(a, b, bias=c[0] if c else None, **spec), x, w, *bias)[0]
        args = [x, w, *bias]
    else:
        with esgraph.GraphBuilder("conv") as b:
            a = b.input("x", esgraph.f32, x.shape)
            c = b.constant(bias[0]) if bias else None
            g = b.build([ops.conv2d(a, b.constant(w), bias=c, **spec)])
        args = [x]
    model = esgraph.compile(g, backend_options={"channel_block": block})
    check(model.run(args)[0], want)
    assert model.stats()["library_calls"] == 1  # every case is on a primitive


# name: the activation's post-op
CONV_ACTIVATIONS = ["relu", "leaky_relu", "leaky_relu default", "gelu exact", "gelu tanh", "silu", "sigmoid", "tanh", "clip",
                    "clip min only", "elu", "hard_sigmoid", "hard_swish"]


@pytest.mark.parametrize("block", [0, 16])
@pytest.mark.parametrize("name", CONV_ACTIVATIONS)
def test_conv2d_activation_runs_as_a_post_op(name, block):
    """conv2d then an activation: one launch, the activation inside oneDNN's convolution."""
    fn, ref, _ = UNARY[name]
    spec = dict(CONV_CASES["everything"])
    rng = rng_for(name)
    x, w = conv_data(rng, spec)
    bias = normal(rng, (w.shape[0],))
    spec.pop("bias")
    want = ref(conv2d_reference(x, w, bias, **spec)).astype(f32)
    g = build(lambda a, b, c: fn(ops.conv2d(a, b, bias=c, **spec)), x, w, bias)[0]
    model = esgraph.compile(g, backend_options={"channel_block": block})
    stats = model.stats()
    assert stats["launches"] - stats["reorders"] == 1
    assert stats["post_op_convolutions"] == 1
    np.testing.assert_allclose(model(x, w, bias), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_with_its_epilogue_is_one_kernel(case, threads):
    """relu(conv2d(x, w) + r) * 0.5: the convolution heads the group, which runs as its
    primitive's post-ops (a sum of the residual, relu, a scale)."""
    spec = dict(CONV_CASES[case])
    rng = rng_for(case)
    x, w = conv_data(rng, spec)
    bias = [normal(rng, (w.shape[0],))] if spec.pop("bias", False) else []
    conv = conv2d_reference(x, w, *bias, **spec)
    r = normal(rng, conv.shape)
    want = (np.maximum(conv + r.astype(f64), 0) * 0.5).astype(f32)

    def graph(a, b, res, *c):
        return ops.relu(ops.conv2d(a, b, bias=c[0] if c else None, **spec) + res) * 0.5

    g = build(graph, x, w, r, *bias)[0]
    model = esgraph.compile(g, threads=threads, backend_options={"channel_block": 0})
    stats = model.stats()
    assert (stats["launches"], stats["epilogue_groups"], stats["fused_ops"]) == (1, 1, 4)  # conv2d + add relu mul
    assert stats["post_op_convolutions"] == 1
    check(model(x, w, r, *bias), want)


# Convolutions big enough to be split over two threads (over 2M multiply-adds): several images
# (3: uneven halves), or one image with its output channels split in whole blocks (40: two
# blocks and a half of 16), grouped ones by whole groups, depthwise ones by channels.
SPLIT_CONV_CASES = {
    "split images": dict(x=(3, 16, 20, 20), w=(40, 16, 3, 3), pads=[1, 1, 1, 1], bias=True),
    "split output channels": dict(x=(1, 24, 30, 30), w=(40, 24, 3, 3), pads=[1, 1, 1, 1], bias=True),
    "split grouped": dict(x=(1, 64, 24, 24), w=(64, 8, 3, 3), groups=8, pads=[1, 1, 1, 1]),
    "split depthwise": dict(x=(1, 72, 120, 120), w=(72, 1, 3, 3), groups=72, strides=[2, 2], pads=[1, 1, 1, 1], bias=True),
}


@pytest.mark.parametrize("constant_filters", [True, False])
@pytest.mark.parametrize("block", [0, 8, 16])
@pytest.mark.parametrize("case", SPLIT_CONV_CASES)
def test_a_large_convolution_splits_over_the_threads(case, block, constant_filters):
    """relu(conv2d(x, w) + r): with two threads the primitive is split into pieces run on the
    model's pool (each piece its slice of images or output channels, the residual summed into
    its slice); the same values as one thread's whole primitive and as numpy."""
    spec = dict(SPLIT_CONV_CASES[case])
    rng = rng_for(case)
    x, w = conv_data(rng, spec)
    bias = [normal(rng, (w.shape[0],))] if spec.pop("bias", False) else []
    conv = conv2d_reference(x, w, *bias, **spec)
    r = normal(rng, conv.shape)
    want = np.maximum(conv + r.astype(f64), 0).astype(f32)
    with esgraph.GraphBuilder("split") as b:
        xi, ri = b.input("x", esgraph.f32, list(x.shape)), b.input("r", esgraph.f32, list(r.shape))
        wi = b.constant(w) if constant_filters else b.input("w", esgraph.f32, list(w.shape))
        bi = b.constant(bias[0]) if bias else None
        g = b.build([ops.relu(ops.conv2d(xi, wi, bias=bi, **spec) + ri)])
    args = [x, r] if constant_filters else [x, r, w]
    got = {}
    for threads in (1, 2):
        model = esgraph.compile(g, threads=threads, backend_options={"channel_block": block})
        assert (model.stats()["post_op_convolutions"], model.stats()["split_convolutions"]) == (1, threads - 1)
        got[threads] = model.run(args)[0]
        np.testing.assert_allclose(got[threads], want, rtol=1e-4, atol=1e-4)  # sums of up to 216 products of N(0, 1)
    # A piece's primitive may sum in another order than the whole one's (seen at block 0 on an
    # AVX2-only Zen 3: 1.7e-5 on one element of a 216-term sum), so equal to within the float32
    # rounding of such sums rather than bit for bit.
    np.testing.assert_allclose(got[2], got[1], rtol=1e-5, atol=5e-5)


def test_conv2d_epilogue_without_post_ops_runs_over_the_result():
    """A member oneDNN has no post-op for (here `x * sigmoid(x)` written out, and an exp): the
    primitive computes the convolution, the group's rows run over its result, still one launch."""
    spec = dict(CONV_CASES["everything"])
    rng = rng_for("no post-ops")
    x, w = conv_data(rng, spec)
    spec.pop("bias")
    conv = conv2d_reference(x, w, **spec)
    want = np.exp(conv / (1 + np.exp(-conv)) * 0.25).astype(f32)
    for block in (0, 8):
        def graph(a, b):
            y = ops.conv2d(a, b, **spec)
            return ops.exp(y * ops.sigmoid(y) * 0.25)

        model = esgraph.compile(build(graph, x, w)[0], backend_options={"channel_block": block})
        assert model.stats()["epilogue_groups"] == 1
        assert model.stats()["post_op_convolutions"] == 0
        check(model(x, w), want)


def pool2d_reference(x, kernel, strides=(1, 1), pads=(0, 0, 0, 0), ceil_mode=False, kind="max"):
    """Windows over the input padded with NaN; max or mean over the values inside the input."""
    n, c, h, w = x.shape
    sizes = []
    for size, k, s, before, after in ((h, kernel[0], strides[0], pads[0], pads[2]),
                                      (w, kernel[1], strides[1], pads[1], pads[3])):
        room = size + before + after - k
        out = (-(-room // s) if ceil_mode else room // s) + 1
        if ceil_mode and (out - 1) * s >= size + before:  # a window starting in the padding is dropped
            out -= 1
        sizes.append(out)
    oh, ow = sizes
    # Enough NaN after the input for windows that overhang it in ceil mode.
    extra_h = max(0, (oh - 1) * strides[0] + kernel[0] - (h + pads[0]))
    extra_w = max(0, (ow - 1) * strides[1] + kernel[1] - (w + pads[1]))
    xp = np.pad(x.astype(f64), ((0, 0), (0, 0), (pads[0], extra_h), (pads[1], extra_w)), constant_values=np.nan)
    y = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * strides[0]:i * strides[0] + kernel[0], j * strides[1]:j * strides[1] + kernel[1]]
            y[:, :, i, j] = (np.nanmax if kind == "max" else np.nanmean)(win, axis=(2, 3))
    return y


def test_pool2d_reference_on_a_hand_computed_case():
    x = np.arange(9, dtype=f64).reshape(1, 1, 3, 3)
    y = pool2d_reference(x, (2, 2), strides=(2, 2), ceil_mode=True, kind="avg")
    np.testing.assert_array_equal(y[0, 0], [[(0 + 1 + 3 + 4) / 4, (2 + 5) / 2], [(6 + 7) / 2, 8]])
    y = pool2d_reference(x, (3, 3), pads=(1, 1, 1, 1), kind="max")
    np.testing.assert_array_equal(y[0, 0], [[4, 5, 5], [7, 8, 8], [7, 8, 8]])


POOL_CASES = {
    "2x2": dict(x=(1, 2, 4, 4), kernel=[2, 2]),
    "stride 2": dict(x=(2, 3, 6, 7), kernel=[2, 2], strides=[2, 2]),
    "3x3 stride 2 pads": dict(x=(1, 2, 7, 7), kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    "asymmetric pads": dict(x=(1, 1, 5, 6), kernel=[3, 2], strides=[1, 2], pads=[2, 0, 1, 1]),
    "ceil_mode exact fit": dict(x=(1, 3, 7, 7), kernel=[3, 3], strides=[2, 2], ceil_mode=True),
    "ceil_mode overhang": dict(x=(1, 2, 6, 5), kernel=[3, 2], strides=[2, 2], ceil_mode=True),
    "ceil_mode pads": dict(x=(2, 1, 6, 6), kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=True),
    "ceil_mode drops a window in the padding": dict(x=(1, 1, 5, 5), kernel=[2, 2], strides=[2, 2],
                                                    pads=[1, 1, 1, 1], ceil_mode=True),
    "planes over threads": dict(x=(4, 16, 48, 48), kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
}


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", POOL_CASES)
def test_pool2d(case, kind):
    spec = dict(POOL_CASES[case])
    x = normal(rng_for(case, kind), spec.pop("x"))
    op = ops.max_pool2d if kind == "max" else ops.avg_pool2d
    got = run(lambda t: op(t, spec["kernel"], **{k: v for k, v in spec.items() if k != "kernel"}), x)
    check(got, pool2d_reference(x, kind=kind, **spec).astype(f32))


def test_max_pool2d_int():
    x = small_ints(rng_for(), (1, 2, 5, 5), i32, -20, 20)
    got = run(lambda t: ops.max_pool2d(t, [3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), x)
    check(got, pool2d_reference(x, (3, 3), (2, 2), (1, 1, 1, 1)).astype(i32))


def _cpu_multiplies_bf16():
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())


@pytest.mark.skipif(not _cpu_multiplies_bf16(), reason="the CPU does not multiply bfloat16")
@pytest.mark.parametrize("case", ["channels+bias", "groups", "depthwise", "everything", "1x1", "split images",
                                  "split output channels", "split depthwise"])
def test_conv2d_in_bf16_is_within_bfloat16_rounding(case):
    """precision='bf16': images and filters rounded to bfloat16, products summed in f32, within
    bf16's rounding (8 bits of mantissa) of the f64 reference; the model's facts name the precision."""
    spec = dict({**CONV_CASES, **SPLIT_CONV_CASES}[case])
    rng = rng_for(case)
    x, w = conv_data(rng, spec)
    bias = [normal(rng, (w.shape[0],))] if spec.pop("bias", False) else []
    with esgraph.GraphBuilder("conv") as b:
        a = b.input("x", esgraph.f32, x.shape)
        g = b.build([ops.relu(ops.conv2d(a, b.constant(w), bias=b.constant(bias[0]) if bias else None, **spec))])
    model = esgraph.compile(g, precision="bf16", threads=2)  # the split cases in two pieces, each rounding its own images
    want = np.maximum(conv2d_reference(x, w, *bias, **spec), 0)
    # Each product of two operands rounded to 8 bits: a relative error of 2^-8 per operand.
    bound = 2 * 2.0 ** -8 * conv2d_reference(np.abs(x), np.abs(w), **spec) + 1e-5
    assert np.all(np.abs(model(x) - want) <= bound)
    assert precisions(model, "onednn_convolutions") == {"bf16"}
    assert precisions(esgraph.compile(g), "onednn_convolutions") == {"f32"}


@pytest.mark.skipif(not _cpu_multiplies_bf16(), reason="the CPU does not multiply bfloat16")
@pytest.mark.parametrize("case", CONSTANT_WEIGHT_PRODUCTS)
def test_matmul_in_bf16_is_within_bfloat16_rounding(case):
    """precision='bf16' rounds a constant-weight product's operands to bfloat16 too, summing in
    f32: within bf16's rounding of the f64 product; the model's facts mark the kernel."""
    a_shape, n = CONSTANT_WEIGHT_PRODUCTS[case]
    rng = rng_for(case, "bf16")
    x, w = normal(rng, a_shape, scale=1.0), normal(rng, (a_shape[-1], n), scale=1.0)
    with esgraph.GraphBuilder("product") as b:
        g = b.build([ops.relu(ops.matmul(b.input("x", esgraph.f32, list(x.shape)), b.constant(w)))])
    model = esgraph.compile(g, precision="bf16", threads=2)
    want = np.maximum(x.astype(f64) @ w.astype(f64), 0)
    bound = 2 * 2.0 ** -8 * (np.abs(x).astype(f64) @ np.abs(w).astype(f64)) + 1e-5
    assert np.all(np.abs(model(x) - want) <= bound)
    assert precisions(model, "onednn_matmuls") == {"bf16"}
    assert {p["precision"] for p in product_kernels(esgraph.compile(g))} == {"f32"}


def test_an_unknown_precision_is_refused():
    g = build(lambda a, b: ops.conv2d(a, b), np.ones((1, 1, 3, 3), f32), np.ones((1, 1, 1, 1), f32))[0]
    with pytest.raises(esgraph.InvalidArgumentError, match="precision 'f16'; valid: 'f32', 'bf16'"):
        esgraph.compile(g, precision="f16")
    if not _cpu_multiplies_bf16():
        with pytest.raises(esgraph.UnsupportedError, match="AVX512-BF16 or AMX-BF16"):
            esgraph.compile(g, precision="bf16")
    with pytest.raises(esgraph.UnsupportedError, match="precision 'bf16' is the CPU's"):
        esgraph.compile(g, precision="bf16", backend="ascend-sim")


@pytest.mark.parametrize("x_shape, w_shape, why", [
    ((0, 4, 5, 5), (4, 4, 3, 3), "only its reference kernel"),  # no images
    ((1, 4, 5, 5), (0, 4, 3, 3), "oneDNN: could not create"),   # no filters
])
def test_a_convolution_onednn_does_not_serve_runs_on_im2col_with_the_reason_in_the_facts(x_shape, w_shape, why):
    """Alone and heading a group (its rows then run over the im2col result): the result's
    shape, empty, and the facts give oneDNN's refusal (the only shapes oneDNN 2.6 refuses
    are empty ones)."""
    rng = rng_for(x_shape, w_shape)
    x, w = normal(rng, x_shape), normal(rng, w_shape)
    for fn in (lambda a, b: ops.conv2d(a, b, pads=[1, 1, 1, 1]), lambda a, b: ops.exp(ops.conv2d(a, b, pads=[1, 1, 1, 1]))):
        model = esgraph.compile(build(fn, x, w)[0])
        im2col = model.stats()["im2col_convolutions"]
        assert len(im2col) == 1 and im2col[0]["count"] == 1 and why in im2col[0]["reason"]
        got = model(x, w)
        assert got.dtype == f32 and got.shape == conv2d_reference(x, w, pads=(1, 1, 1, 1)).shape and got.size == 0


@pytest.mark.parametrize("block", [0, 16])
def test_a_convolution_plus_its_own_images_is_not_computed_in_place(block):
    """conv(x) + x with x an intermediate that dies there: the plan may give the sum x's buffer,
    so the residual sum cannot be a post-op (oneDNN convolves out of place only); the rows add
    it instead. Values against the reference."""
    rng = rng_for("own images", block)
    x, w = normal(rng, (2, 16, 7, 7)), normal(rng, (16, 16, 3, 3), scale=0.2)
    model = esgraph.compile(build(lambda a, b: ops.conv2d(ops.relu(a), b, pads=[1, 1, 1, 1]) + ops.relu(a), x, w)[0],
                            backend_options={"channel_block": block})
    r = np.maximum(x, 0)
    np.testing.assert_allclose(model(x, w), conv2d_reference(r, w, pads=(1, 1, 1, 1)) + r, rtol=1e-5, atol=1e-5)
    assert model.stats()["post_op_convolutions"] == 0
