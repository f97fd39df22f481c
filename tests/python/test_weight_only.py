"""Weight-only quantized products (matmul_nbits, ONNX Runtime's com.microsoft MatMulNBits)
against an independent numpy reference: the codes packed here from their values (low bits
first, in blocks along K padded with zero codes), dequantized in float64 as
(code - zero_point) · scale, and multiplied in float64. Results are compared to 1e-5 of the
largest |y| (f32 sums over up to 768 terms).

Checked on the AVX2 kernel (a graph input a: the compiled graph's launch reads
"matmul_nbits (fast)", stats() counts no reference kernel) over 2, 4 and 8 bits, blocks of 16
to 128, K a multiple of the block and not, with and without zero points, full-range codes and
zero points (0 and 2^bits - 1), every row remainder of its 4-row tiles (1 to 9 rows, a
symbolic row count), column counts past its 1x4 / 2x2 tiles, leading axes, the columns split
over two threads, products on concurrent streams, b an input rather than a constant; and on
the f64 reference kernel (every operand constant: the product folds while compiling). Bad
operands as esgraph errors.
ONNX: MatMulNBits imported and run against ONNX Runtime itself (packed u8 zero points, float
zero points (at 4 bits: ONNX Runtime 1.26 takes float ones at no other width), none, a bias,
1-D and 2-D scales, a rank-3 A, an f16 A), zero points given at run time, and the import's
refusals; matmul_nbits exported as MatMulNBits and run by ONNX Runtime. A compiled model of a
large 4-bit product keeps the codes, not an f32 copy of the weights."""

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import esgraph
import esgraph.onnx
from esgraph import ops

from numerics import cpu_flags, rng_for

U8, F32, F64 = np.uint8, np.float32, np.float64
RTOL = 1e-5  # of the largest |y|


# ---- the numpy reference ---------------------------------------------------------------------
def blocks_of(k, block_size):
    return -(-k // block_size)


def pack_codes(codes, bits, block_size):
    """codes [N, K] (each below 2^bits) as MatMulNBits's b, [N, blocks, block_size · bits / 8]:
    each column's codes in blocks of block_size along K, zero codes after K, 8 / bits codes a
    byte, the first in the lowest bits."""
    n, k = codes.shape
    per_byte = 8 // bits
    blocks = blocks_of(k, block_size)
    padded = np.zeros((n, blocks * block_size), np.uint32)
    padded[:, :k] = codes
    grouped = padded.reshape(n, blocks, block_size // per_byte, per_byte)
    packed = np.zeros(grouped.shape[:3], np.uint32)
    for i in range(per_byte):
        packed |= grouped[..., i] << (i * bits)
    assert packed.max(initial=0) < 256
    return packed.astype(U8)


def pack_zero_points(zero_points, bits):
    """zero_points [N, blocks] as ONNX Runtime's packed u8 zero points: each column's in
    ceil(blocks · bits / 8) bytes, low bits first (a flat [N · that])."""
    n, blocks = zero_points.shape
    per_byte = 8 // bits
    padded = np.zeros((n, blocks_of(blocks, per_byte) * per_byte), np.uint32)
    padded[:, :blocks] = zero_points
    grouped = padded.reshape(n, -1, per_byte)
    packed = np.zeros(grouped.shape[:2], np.uint32)
    for i in range(per_byte):
        packed |= grouped[..., i] << (i * bits)
    return packed.astype(U8).reshape(-1)


def weights(codes, scales, zero_points, bits, block_size):
    """w [K, N] in float64: (code - zero point) · scale, the block's zero point and scale."""
    k = codes.shape[1]
    block = np.arange(k) // block_size
    zero = np.full(scales.shape, 2 ** (bits - 1), F64) if zero_points is None else zero_points.astype(F64)
    return ((codes.astype(F64) - zero[:, block]) * scales.astype(F64)[:, block]).T


def nbits_ref(a, codes, scales, zero_points, bits, block_size):
    return np.matmul(a.astype(F64), weights(codes, scales, zero_points, bits, block_size))


def operands(rng, n, k, bits, block_size, with_zero_points=True):
    """Full-range codes [N, K], scales [N, blocks], and zero points [N, blocks] (or None) that
    take both ends of their range."""
    blocks = blocks_of(k, block_size)
    top = 2 ** bits - 1
    codes = rng.integers(0, top + 1, (n, k)).astype(U8)
    codes.flat[:2] = [0, top]
    scales = rng.uniform(0.01, 0.1, (n, blocks)).astype(F32)
    zero_points = None
    if with_zero_points:
        zero_points = rng.integers(0, top + 1, (n, blocks)).astype(U8)
        zero_points.flat[0], zero_points.flat[-1] = 0, top
    return codes, scales, zero_points


def check_close(got, want, rtol=RTOL):
    """f32, want's shape, and within rtol of the largest |want| everywhere."""
    assert got.dtype == F32, got.dtype
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(float(np.abs(want).max(initial=0.0)), 1e-30)
    error = float(np.abs(got.astype(F64) - want).max(initial=0.0))
    assert error <= rtol * scale, f"max error {error:.3g} is {error / scale:.3g} of max |y| {scale:.3g}"


def nbits_model(a_shape, b, scales, zero_points, bits, block_size, **options):
    """matmul_nbits of a graph input a shaped a_shape and constant operands, compiled."""
    with esgraph.GraphBuilder("weight_only") as g:
        x = g.input("a", esgraph.f32, list(a_shape))
        y = ops.matmul_nbits(x, g.constant(b), g.constant(scales),
                             zero_points=None if zero_points is None else g.constant(zero_points), bits=bits, block_size=block_size)
        return esgraph.compile(g.build([y]), **options)


def on_fast_kernel(model, alone=True):
    """The product ran on the AVX2 kernel: each compiled plan (one per size class of a symbolic
    dimension) labels its one matmul_nbits launch "fast" (a kernel of ours, found among the
    fast kernels); `alone`: nothing runs on the reference evaluator either."""
    stats = model.stats()
    plans = model.to_dot().split("digraph ")[1:]
    return (len(plans) >= 1 and stats["fast_kernels"] >= 1 and (not alone or stats["reference_kernels"] == 0)
            and all(p.count('label="matmul_nbits') == p.count('label="matmul_nbits (fast)') == 1 for p in plans))


def run_fast(a, codes, scales, zero_points, bits, block_size, **options):
    model = nbits_model(a.shape, pack_codes(codes, bits, block_size), scales, zero_points, bits, block_size, **options)
    got = model.run([a])[0]
    assert on_fast_kernel(model), model.stats()
    return got


# ---- the layout, on the op's own documented example ------------------------------------------
def test_packing_matches_the_documented_example():
    """op_defs' first example: K = 17 codes 0..15, 15 in blocks of 16 at 4 bits; byte i holds
    codes 2i (low nibble) and 2i+1 (high); the second block's padding codes are zero. This
    file's packer gives those bytes, and the op numpy's 374 on both kernels."""
    codes = np.array([list(range(16)) + [15]], U8)
    b = pack_codes(codes, 4, 16)
    np.testing.assert_array_equal(b, [[[16, 50, 84, 118, 152, 186, 220, 254], [15, 0, 0, 0, 0, 0, 0, 0]]])
    np.testing.assert_array_equal(pack_codes(np.array([[1, 2, 3, 0, 3]], U8), 2, 16),
                                  [[[1 | 2 << 2 | 3 << 4, 3, 0, 0]]])  # 2 bits: the first code lowest
    a = np.arange(1, 18, dtype=F32).reshape(1, 17)
    scales = np.array([[0.5, 2]], F32)
    want = nbits_ref(a, codes, scales, None, 4, 16)
    assert want[0, 0] == 374
    check_close(run_fast(a, codes, scales, None, 4, 16), want)
    check_close(fold(a, b, scales, None, 4, 16), want)


# ---- the AVX2 kernel against numpy -----------------------------------------------------------
def _covering_cases():
    """Every bits x block size x K (below one block, a block's multiple or not, 768 a multiple
    of every block), with and without zero points; N, M, leading axes and threads cycling so
    that each N (column remainders) and each M (row remainders) comes up with each bits."""
    cases = []
    ns, ms = [1, 3, 5, 7, 33], [1, 2, 3, 4, 5, 7]
    i = 0
    for bits in (2, 4, 8):
        for block_size in (16, 32, 64, 128):
            for k in (17, 100, 768):
                for with_zero_points in (True, False):
                    lead = (2, 3) if i % 4 == 3 else ()
                    cases.append((bits, block_size, k, ns[i % 5], ms[i % 6], lead, with_zero_points, 1 + i // 2 % 2))
                    i += 1
    return cases


CASES = _covering_cases()


@pytest.mark.parametrize("bits, block_size, k, n, m, lead, with_zero_points, threads", CASES,
                         ids=[f"{c[0]}bit-block{c[1]}-{'x'.join(map(str, c[5] + (c[4], c[2], c[3])))}-{'zp' if c[6] else 'nozp'}-t{c[7]}"
                              for c in CASES])
def test_against_numpy(bits, block_size, k, n, m, lead, with_zero_points, threads):
    rng = rng_for("against numpy", bits, block_size, k, n, m, lead, with_zero_points)
    codes, scales, zero_points = operands(rng, n, k, bits, block_size, with_zero_points)
    a = rng.standard_normal(lead + (m, k)).astype(F32)
    got = run_fast(a, codes, scales, zero_points, bits, block_size, threads=threads)
    check_close(got, nbits_ref(a, codes, scales, zero_points, bits, block_size))


def test_cases_cover_the_shapes():
    """The cycling above does reach every K, N, M, block size and bits."""
    assert {c[2] for c in CASES} == {17, 100, 768} and {c[3] for c in CASES} == {1, 3, 5, 7, 33}
    assert {c[4] for c in CASES} == {1, 2, 3, 4, 5, 7} and {c[5] for c in CASES} == {(), (2, 3)}
    for bits in (2, 4, 8):
        assert {c[3] for c in CASES if c[0] == bits} == {1, 3, 5, 7, 33} and {c[4] for c in CASES if c[0] == bits} == {1, 2, 3, 4, 5, 7}
        assert len({(c[3], c[4]) for c in CASES if c[0] == bits}) >= 20
    assert {c[7] for c in CASES} == {1, 2} and {(c[6], c[7]) for c in CASES} == {(z, t) for z in (True, False) for t in (1, 2)}
    assert any(c[2] % c[1] for c in CASES) and any(c[2] % c[1] == 0 for c in CASES)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 33])
def test_every_row_and_column_remainder(n):
    """a [m, K] with m symbolic, one model run at m = 1 to 9 (4-row tiles, then 3, 2 as 2x2
    and 2x1, 1 as 1x4 and 1x1), N around the tiles' 1, 2 and 4 columns; and m = 0."""
    bits, block_size, k = 4, 32, 100
    rng = rng_for("remainders", n)
    codes, scales, zero_points = operands(rng, n, k, bits, block_size)
    model = nbits_model(["m", k], pack_codes(codes, bits, block_size), scales, zero_points, bits, block_size, threads=1)
    for m in [1, 2, 3, 4, 5, 6, 7, 8, 9, 0]:
        a = rng.standard_normal((m, k)).astype(F32)
        got = model.run({"a": a})[0]
        check_close(got, nbits_ref(a, codes, scales, zero_points, bits, block_size))
        if m:
            assert on_fast_kernel(model)


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("m", [1, 2, 3, 5, 33])
def test_columns_split_over_two_threads(bits, m):
    """Enough multiply-adds for two pieces (over 2^20): the columns in two shares of whole 4s,
    N = 3 mod 4 leaving a remainder in the second; the columns also run past the tiles of
    columns whose codes stay in L1, and 33 rows pass them 4 at a time and 1. Two threads give
    numpy's values, as one does."""
    k, n, block_size = 768, {1: 1503, 2: 703, 3: 503, 5: 303, 33: 67}[m], 64
    rng = rng_for("two threads", bits, m)
    codes, scales, zero_points = operands(rng, n, k, bits, block_size)
    a = rng.standard_normal((m, k)).astype(F32)
    assert m * k * n >= 2 ** 20
    want = nbits_ref(a, codes, scales, zero_points, bits, block_size)
    for threads in (2, 1):
        check_close(run_fast(a, codes, scales, zero_points, bits, block_size, threads=threads), want)


@pytest.mark.parametrize("bits, block_size", [(2, 16), (4, 32), (8, 64)])
@pytest.mark.parametrize("m", [15, 16, 17, 70])
def test_many_rows_dequantize_a_tile_of_columns_at_a_time(bits, block_size, m):
    """From 16 rows on (a prompt's prefill) the kernel dequantizes 24 columns at a time and
    multiplies them with every row on the f32 packed GEMM: the same values, at the switch (15,
    16, 17 rows), over several tiles split over two threads, N past a tile, K past a block."""
    rng = rng_for("many rows", bits, m)
    k, n = 100, 53
    codes, scales, zero_points = operands(rng, n, k, bits, block_size)
    a = rng.standard_normal((m, k)).astype(F32)
    for threads in (1, 2):
        check_close(run_fast(a, codes, scales, zero_points, bits, block_size, threads=threads),
                    nbits_ref(a, codes, scales, zero_points, bits, block_size))


@pytest.mark.parametrize("streams, threads", [(2, 2), (3, 2)])
def test_products_on_concurrent_streams(streams, threads):
    """Four products of one a (scaled differently) on concurrent streams, each big enough to
    split over the threads: every kernel's permuted rows of a are its own (a buffer per thread),
    run after run."""
    m, k, bits, block_size = 5, 768, 4, 64
    rng = rng_for("streams", streams, threads)
    weights_of = [operands(rng, n, k, bits, block_size) for n in (303, 299, 301, 307)]
    with esgraph.GraphBuilder("streams") as g:
        x = g.input("a", esgraph.f32, [m, k])
        ys = [ops.matmul_nbits(x * float(j + 2), g.constant(pack_codes(codes, bits, block_size)), g.constant(scales),
                               zero_points=g.constant(zero_points), bits=bits, block_size=block_size)
              for j, (codes, scales, zero_points) in enumerate(weights_of)]
        model = esgraph.compile(g.build(ys), streams=streams, threads=threads)
    for _ in range(5):
        a = rng.standard_normal((m, k)).astype(F32)
        for j, (got, (codes, scales, zero_points)) in enumerate(zip(model.run([a]), weights_of)):
            check_close(got, nbits_ref(a * (j + 2), codes, scales, zero_points, bits, block_size))
    assert model.stats()["streams"] == streams and model.stats()["reference_kernels"] == 0
    assert model.to_dot().count('label="matmul_nbits (fast)') == 4


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_extreme_codes_and_zero_points(bits):
    """Every code 2^bits - 1 less a zero point 0, and every code 0 less a zero point 2^bits - 1
    (the widest weights there are, both signs), a all positive: no cancellation, numpy's
    values. Then every code equal to its zero point: w = 0. The AVX2 kernel sums a · code and
    subtracts zero · sum(a) a block, so its result is near 0 to within f32 rounding of those sums
    (1e-6 of scale · zero · sum |a|), not exactly 0."""
    m, k, n, block_size = 5, 100, 7, 32
    top = 2 ** bits - 1
    blocks = blocks_of(k, block_size)
    rng = rng_for("extremes", bits)
    a = rng.uniform(0.5, 1.5, (m, k)).astype(F32)
    scales = rng.uniform(0.5, 1.0, (n, blocks)).astype(F32)
    for code, zero in ((top, 0), (0, top)):
        codes, zero_points = np.full((n, k), code, U8), np.full((n, blocks), zero, U8)
        want = nbits_ref(a, codes, scales, zero_points, bits, block_size)
        assert (np.sign(want) == (1 if code else -1)).all()
        check_close(run_fast(a, codes, scales, zero_points, bits, block_size), want)
        check_close(fold(a, pack_codes(codes, bits, block_size), scales, zero_points, bits, block_size), want)
    codes, zero_points = np.full((n, k), top, U8), np.full((n, blocks), top, U8)
    got = run_fast(a, codes, scales, zero_points, bits, block_size)
    assert np.abs(got).max() <= 1e-6 * top * float(scales.max()) * float(np.abs(a).sum(axis=1).max())
    np.testing.assert_array_equal(fold(a, pack_codes(codes, bits, block_size), scales, zero_points, bits, block_size), 0)


def test_b_scales_and_zero_points_as_graph_inputs():
    """The AVX2 kernel reads the codes wherever they lie: b, scales and zero points graph inputs
    (no constant to prepare) give numpy's values."""
    bits, block_size, m, k, n = 4, 16, 3, 100, 9
    rng = rng_for("operand inputs")
    codes, scales, zero_points = operands(rng, n, k, bits, block_size)
    b = pack_codes(codes, bits, block_size)
    a = rng.standard_normal((m, k)).astype(F32)
    with esgraph.GraphBuilder("inputs") as g:
        y = ops.matmul_nbits(g.input("a", esgraph.f32, [m, k]), g.input("b", esgraph.u8, list(b.shape)),
                             g.input("scales", esgraph.f32, list(scales.shape)),
                             zero_points=g.input("zero_points", esgraph.u8, list(zero_points.shape)), bits=bits, block_size=block_size)
        model = esgraph.compile(g.build([y]))
    got = model.run({"a": a, "b": b, "scales": scales, "zero_points": zero_points})[0]
    assert on_fast_kernel(model)
    check_close(got, nbits_ref(a, codes, scales, zero_points, bits, block_size))


def test_empty_products():
    """K = 0 (no blocks) gives zeros; N = 0 and M = 0 empty results."""
    rng = rng_for("empty")
    for m, k, n in [(3, 0, 5), (3, 40, 0), (0, 40, 5)]:
        codes, scales, zero_points = operands(rng, n, k, 4, 32) if n and k else (
            np.zeros((n, k), U8), np.ones((n, blocks_of(k, 32)), F32), None)
        a = rng.standard_normal((m, k)).astype(F32)
        got = nbits_model((m, k), pack_codes(codes, 4, 32), scales, zero_points, 4, 32).run([a])[0]
        check_close(got, nbits_ref(a, codes, scales, zero_points, 4, 32))


# ---- the reference kernel ------------------------------------------------------------------
def fold(a, b, scales, zero_points, bits, block_size):
    """matmul_nbits with every operand a constant: the product folds while compiling, on the
    f64 reference kernel (the compiled model launches nothing)."""
    with esgraph.GraphBuilder("folded") as g:
        y = ops.matmul_nbits(g.constant(a), g.constant(b), g.constant(scales),
                             zero_points=None if zero_points is None else g.constant(zero_points), bits=bits, block_size=block_size)
        model = esgraph.compile(g.build([y]))
    stats = model.stats()
    assert stats["launches"] == 0 and stats["fast_kernels"] == 0, stats
    return model.run([])[0]


REFERENCE_CASES = [(2, 16, 17, 5, 3, ()), (2, 128, 768, 7, 2, ()), (4, 32, 100, 33, 5, (2, 3)), (4, 64, 768, 3, 4, ()),
                   (8, 16, 768, 7, 7, ()), (8, 128, 100, 1, 1, (2, 3))]


@pytest.mark.parametrize("with_zero_points", [True, False], ids=["zp", "nozp"])
@pytest.mark.parametrize("bits, block_size, k, n, m, lead", REFERENCE_CASES,
                         ids=[f"{c[0]}bit-block{c[1]}-{'x'.join(map(str, c[5] + (c[4], c[2], c[3])))}" for c in REFERENCE_CASES])
def test_reference_kernel_and_fast_kernel_against_numpy(bits, block_size, k, n, m, lead, with_zero_points):
    """The f64 reference kernel (every weight rounded once to f32, then summed in f64) is within
    1e-6 of numpy; the AVX2 kernel within 1e-5, on the same operands."""
    rng = rng_for("reference", bits, block_size, k, n, m, lead, with_zero_points)
    codes, scales, zero_points = operands(rng, n, k, bits, block_size, with_zero_points)
    a = rng.standard_normal(lead + (m, k)).astype(F32)
    want = nbits_ref(a, codes, scales, zero_points, bits, block_size)
    check_close(fold(a, pack_codes(codes, bits, block_size), scales, zero_points, bits, block_size), want, rtol=1e-6)
    check_close(run_fast(a, codes, scales, zero_points, bits, block_size), want)


# ---- bad operands ----------------------------------------------------------------------------
M, K, N = 4, 40, 5


def _bad(a_shape=(M, K), a_type=esgraph.f32, bits=4, block_size=32, b_shape=None, scales_shape=None, zero_points_shape=None,
         zero_points_type=U8):
    blocks = blocks_of(K, 32)
    with esgraph.GraphBuilder() as g:
        x = g.input("a", a_type, list(a_shape))
        ops.matmul_nbits(x, g.constant(np.zeros(b_shape or (N, blocks, 16), U8)), g.constant(np.ones(scales_shape or (N, blocks), F32)),
                         zero_points=g.constant(np.zeros(zero_points_shape or (N, blocks), zero_points_type)), bits=bits,
                         block_size=block_size)


@pytest.mark.parametrize("arguments, error, message", [
    ({"bits": 3}, esgraph.AttributeValueError, r"`bits` must be 2, 4 or 8, got 3"),
    ({"bits": 16}, esgraph.AttributeValueError, r"attribute `bits` is 16, outside \[2, 8\]"),
    ({"block_size": 24}, esgraph.AttributeValueError, r"`block_size` must be a power of two up to 2\^30, got 24"),
    ({"block_size": 8}, esgraph.AttributeValueError, r"attribute `block_size` is 8, outside \[16, inf\]"),
    ({"b_shape": (N, 2, 15)}, esgraph.ShapeError, r"`b` must be \[5,2,16\] for K = 40, 4 bits and blocks of 32, got \[5,2,15\]"),
    ({"b_shape": (N, 32)}, esgraph.ShapeError, r"`b` must be \[5,2,16\] for K = 40, 4 bits and blocks of 32, got \[5,32\]"),
    ({"bits": 8}, esgraph.ShapeError, r"`b` must be \[5,2,32\] for K = 40, 8 bits and blocks of 32, got \[5,2,16\]"),
    ({"a_shape": (M, 70)}, esgraph.ShapeError, r"`b` must be \[5,3,16\] for K = 70, 4 bits and blocks of 32, got \[5,2,16\]"),
    ({"scales_shape": (N, 3)}, esgraph.ShapeError, r"`scales` must be \[5,2\] for K = 40, 4 bits and blocks of 32, got \[5,3\]"),
    ({"scales_shape": (N * 2,)}, esgraph.ShapeError, r"`scales` must be \[5,2\] for K = 40, 4 bits and blocks of 32, got \[10\]"),
    ({"zero_points_shape": (N + 1, 2)}, esgraph.ShapeError,
     r"`zero_points` must be \[5,2\] for K = 40, 4 bits and blocks of 32, got \[6,2\]"),
    ({"zero_points_type": np.int8}, esgraph.DTypeError, r"input `zero_points` must be u8, got i8"),
    ({"a_shape": (K,)}, esgraph.ShapeError, r"`a` needs rank >= 2 \(\[..., M, K\]\), got \[40\]"),
    ({"a_type": esgraph.f64}, esgraph.DTypeError, r"input `a` has dtype f64, but T accepts only f32, f16, bf16"),
    ({"a_type": esgraph.i32}, esgraph.DTypeError, r"input `a` has dtype i32, but T accepts only f32, f16, bf16"),
    ({"a_shape": (M, "k")}, esgraph.ShapeError, r"`a`'s last axis \(K\) must be a number, got \[4,k\]"),
], ids=["bits 3", "bits 16", "block 24", "block 8", "b [N,2,15]", "b 2-D", "b for 4 bits at 8", "K mismatch", "scales [N,3]",
        "scales 1-D", "zero points [N+1,2]", "zero points i8", "rank-1 a", "f64 a", "i32 a", "symbolic K"])
def test_bad_operands_are_refused_where_built(arguments, error, message):
    with pytest.raises(error, match="matmul_nbits: .*" + message):
        _bad(**arguments)


def test_the_errors_are_esgraph_errors():
    assert issubclass(esgraph.AttributeValueError, esgraph.Error) and issubclass(esgraph.ShapeError, esgraph.Error)
    assert issubclass(esgraph.DTypeError, esgraph.Error)


# ---- ONNX import, against ONNX Runtime -------------------------------------------------------
def nbits_node_model(a_shape, b, scales, zero_points=None, bias=None, g_idx=None, **attrs):
    """One com.microsoft MatMulNBits node, every operand but A an initializer; attrs K, N, bits,
    block_size."""
    inits = [numpy_helper.from_array(b, "B"), numpy_helper.from_array(scales, "scales")]
    names = ["A", "B", "scales"]
    for index, name, value in ((3, "zero_points", zero_points), (4, "g_idx", g_idx), (5, "bias", bias)):
        if value is not None:
            names += [""] * (index - len(names)) + [name]
            inits.append(numpy_helper.from_array(value, name))
    node = helper.make_node("MatMulNBits", names, ["Y"], domain="com.microsoft", **attrs)
    graph = helper.make_graph([node], "matmul_nbits", [helper.make_tensor_value_info("A", TensorProto.FLOAT, list(a_shape))],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])


def ort_run(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


IMPORT_CASES = [  # bits, block_size, zero points ("packed", "float", None), bias, 1-D scales, A's shape
    (4, 32, "packed", False, True, (5, 100)),
    (4, 16, None, True, False, (2, 3, 100)),
    (4, 64, "float", False, False, (3, 768)),
    (2, 16, "packed", True, True, (2, 3, 17)),
    (2, 32, None, False, False, (4, 100)),
    (8, 16, "packed", True, False, (2, 3, 100)),
    (8, 128, None, False, True, (7, 768)),
    (4, 16, "float", True, True, (1, 40)),
]


@pytest.mark.parametrize("bits, block_size, zero_points, bias, flat_scales, a_shape", IMPORT_CASES,
                         ids=[f"{c[0]}bit-block{c[1]}-zp {c[2]}{'-bias' if c[3] else ''}-scales {'1-D' if c[4] else '2-D'}-A{list(c[5])}"
                              for c in IMPORT_CASES])
def test_onnx_import_against_onnx_runtime(bits, block_size, zero_points, bias, flat_scales, a_shape):
    k, n = a_shape[-1], 7
    rng = rng_for("onnx import", bits, block_size, zero_points, bias, flat_scales, a_shape)
    codes, scales, zero_codes = operands(rng, n, k, bits, block_size, zero_points is not None)
    bias_values = rng.standard_normal(n).astype(F32) if bias else None
    stored_zero_points = {None: None, "packed": pack_zero_points(zero_codes, bits) if zero_codes is not None else None,
                          "float": zero_codes.astype(F32) if zero_codes is not None else None}[zero_points]
    if zero_points == "packed" and bits < 8:  # the packing at work: fewer bytes than blocks
        assert stored_zero_points.size < zero_codes.size
    model = nbits_node_model(a_shape, pack_codes(codes, bits, block_size), scales.reshape(-1) if flat_scales else scales,
                             stored_zero_points, bias_values, K=k, N=n, bits=bits, block_size=block_size)
    a = rng.standard_normal(a_shape).astype(F32)
    want = ort_run(model, {"A": a})
    ref = nbits_ref(a, codes, scales, zero_codes, bits, block_size) + (0 if bias_values is None else bias_values)
    check_close(want, ref)  # ONNX Runtime and this file's numpy agree on the layout
    compiled = esgraph.compile(esgraph.onnx.load(model.SerializeToString()))
    assert on_fast_kernel(compiled)
    got = compiled.run({"A": a})[0]
    assert got.shape == want.shape == a_shape[:-1] + (n,)
    check_close(got, want.astype(F64))


def test_onnx_import_of_f16_a_with_a_symbolic_batch():
    """A f16 ["batch", K] (scales f16, as MatMulNBits wants them alike): the import casts a to f32
    around the product, run on the AVX2 kernel for every batch; ONNX Runtime's values to f16's
    precision."""
    k, n, bits, block_size = 100, 7, 4, 32
    rng = rng_for("f16 import")
    codes, scales, zero_points = operands(rng, n, k, bits, block_size)
    inits = [numpy_helper.from_array(pack_codes(codes, bits, block_size), "B"),
             numpy_helper.from_array(scales.astype(np.float16), "scales"),
             numpy_helper.from_array(pack_zero_points(zero_points, bits), "zero_points")]
    node = helper.make_node("MatMulNBits", ["A", "B", "scales", "zero_points"], ["Y"], domain="com.microsoft", K=k, N=n, bits=bits,
                            block_size=block_size)
    graph = helper.make_graph([node], "f16", [helper.make_tensor_value_info("A", TensorProto.FLOAT16, ["batch", k])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT16, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    compiled = esgraph.compile(esgraph.onnx.load(model.SerializeToString()))
    for batch in (3, 1, 6):
        a = rng.standard_normal((batch, k)).astype(np.float16)
        got = compiled.run([a])[0]
        assert got.dtype == np.float16 and got.shape == (batch, n)
        assert on_fast_kernel(compiled, alone=False)  # (the casts on the reference evaluator)
        want = ort_run(model, {"A": a})
        ref = nbits_ref(a, codes, scales.astype(np.float16), zero_points, bits, block_size)
        assert np.abs(want - ref).max() <= 2e-3 * np.abs(ref).max()
        assert np.abs(got.astype(F64) - want).max() <= 2e-3 * np.abs(ref).max()


def test_onnx_import_of_zero_points_given_at_run_time():
    """Zero points a graph input: the import needs their values (it unpacks them), so the model
    waits for each run's and compiles per set of them; numpy's values either way."""
    k, n, bits, block_size = 100, 7, 4, 32
    rng = rng_for("zero points input")
    codes, scales, _ = operands(rng, n, k, bits, block_size, False)
    inits = [numpy_helper.from_array(pack_codes(codes, bits, block_size), "B"), numpy_helper.from_array(scales, "scales")]
    node = helper.make_node("MatMulNBits", ["A", "B", "scales", "zp"], ["Y"], domain="com.microsoft", K=k, N=n, bits=bits,
                            block_size=block_size)
    graph = helper.make_graph([node], "zp_input", [helper.make_tensor_value_info("A", TensorProto.FLOAT, [3, k]),
                                                   helper.make_tensor_value_info("zp", TensorProto.UINT8, [n * 2])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    compiled = esgraph.compile(esgraph.onnx.load(model.SerializeToString()))
    for _ in range(2):
        zero_points = rng.integers(0, 16, (n, 4)).astype(U8)
        a = rng.standard_normal((3, k)).astype(F32)
        got = compiled.run({"A": a, "zp": pack_zero_points(zero_points, bits)})[0]
        check_close(got, nbits_ref(a, codes, scales, zero_points, bits, block_size))


def _import_failure(model):
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(model.SerializeToString())
    assert len(info.value.failures) == 1
    where, why = info.value.failures[0]
    assert where == "MatMulNBits -> Y"
    return why


@pytest.mark.parametrize("case, message", [
    ("g_idx", r"^g_idx \(deprecated in ONNX Runtime: codes in the order of K only\)$"),
    ("bits 3", r"^bits=3 \(esgraph takes 2, 4 or 8\)$"),
    ("block 8", r"^block_size=8 \(a power of two of at least 16\)$"),
    ("block 48", r"^block_size=48 \(a power of two of at least 16\)$"),
    ("float zero points 2.5", r"^float zero points that are not 15 whole codes below 16$"),
    ("float zero points 16", r"^float zero points that are not 15 whole codes below 16$"),
    ("packed zero points short", r"^zero_points holds 5 bytes; 5 columns of 3 blocks of 4-bit codes pack into 10$"),
    ("K not A's", r"^A's last axis is 40, but K=64$"),
    ("unknown attribute", r"^attribute\(s\) frobnicate not supported$"),
])
def test_onnx_import_refusals(case, message):
    k, n, bits, block_size = 40, 5, 4, 16
    rng = rng_for("refusal", case)
    codes, scales, _ = operands(rng, n, k, bits, block_size, False)
    b = pack_codes(codes, bits, block_size)
    attrs = dict(K=k, N=n, bits=bits, block_size=block_size)
    extra = {}
    if case == "g_idx":
        extra["g_idx"] = (np.arange(k) // block_size).astype(np.int32)
    elif case == "bits 3":
        attrs["bits"] = 3
    elif case.startswith("block"):
        attrs["block_size"] = int(case.split()[1])
    elif case.startswith("float zero points"):
        extra["zero_points"] = np.full(n * 3, float(case.split()[-1]), F32)
    elif case == "packed zero points short":
        extra["zero_points"] = np.zeros(n, U8)  # one byte a column: 3 blocks of 4 bits need 2
    elif case == "K not A's":
        attrs["K"] = 64
    elif case == "unknown attribute":
        attrs["frobnicate"] = 1
    why = _import_failure(nbits_node_model((3, k), b, scales, **extra, **attrs))
    assert re.search(message, why), why


def test_onnx_import_of_another_com_microsoft_op_is_refused():
    node = helper.make_node("FusedMatMul", ["A", "A"], ["Y"], domain="com.microsoft")
    graph = helper.make_graph([node], "other", [helper.make_tensor_value_info("A", TensorProto.FLOAT, [3, 3])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(model.SerializeToString())
    assert info.value.failures == [("FusedMatMul -> Y", "domain 'com.microsoft' is not supported beyond MatMulNBits, QLinearAdd")]


# ---- accuracy_level 4: a in int8 -------------------------------------------------------------
def _has_vnni():
    return {"avx512_vnni", "avx512vl", "avx512bw"} <= cpu_flags()


def int8_rows_bound(a, codes, scales, zero_points, bits, block_size):
    """How far a product with a's rows rounded to int8, 32 values to a scale s (max |a| / 127),
    may lie from the exact one: each value moves by at most s / 2, so each y[r][j] by the sum
    over its 32-value pieces of s / 2 times the piece's sum of |w|."""
    k = a.shape[-1]
    padded = -(-k // 32) * 32
    rows = np.zeros((int(np.prod(a.shape[:-1])), padded))
    rows[:, :k] = a.reshape(-1, k)
    w = np.zeros((padded, codes.shape[0]))
    w[:k] = np.abs(weights(codes, scales, zero_points, bits, block_size))
    half_steps = np.abs(rows.reshape(len(rows), -1, 32)).max(-1) / 127 / 2
    return (half_steps @ w.reshape(-1, 32, w.shape[1]).sum(1)).reshape(a.shape[:-1] + (codes.shape[0],))


LEVEL_4_CASES = [(block_size, k, n, m, zp, threads) for i, (block_size, k) in enumerate(
    [(32, 768), (32, 96), (32, 17), (64, 100), (128, 768), (64, 64)])
    for n, m, zp, threads in [((1, 5, 33)[i % 3], (1, 2, 3, 4, 7)[i % 5], i % 2 == 0, 1 + i % 2), (33, 1 + (i + 2) % 7, i % 2 == 1, 2)]]


@pytest.mark.parametrize("block_size, k, n, m, with_zero_points, threads", LEVEL_4_CASES,
                         ids=[f"block{c[0]}-{c[3]}x{c[1]}x{c[2]}-{'zp' if c[4] else 'nozp'}-t{c[5]}" for c in LEVEL_4_CASES])
def test_accuracy_level_4_rounds_a_to_int8_within_half_a_step(block_size, k, n, m, with_zero_points, threads):
    """4-bit codes with accuracy_level 4 (ONNX Runtime's leave to multiply a in int8): within
    the rounding's bound of the exact product everywhere (blocks of 32, paired in the kernel's
    registers, and larger; K with an odd count of 32-value pieces; every row and column
    remainder), and, where the CPU has AVX512-VNNI, not the f32 path's values: the int8 path ran."""
    rng = rng_for("accuracy level 4", block_size, k, n, m, with_zero_points)
    codes, scales, zero_points = operands(rng, n, k, 4, block_size, with_zero_points)
    a = rng.standard_normal((m, k)).astype(F32)
    a[0, :3] = [0.0, 50.0, -50.0]  # one piece's scale set by a large value: the rest round coarsely
    b = pack_codes(codes, 4, block_size)
    with esgraph.GraphBuilder("level4") as g:
        y = ops.matmul_nbits(g.input("a", esgraph.f32, [m, k]), g.constant(b), g.constant(scales),
                             zero_points=None if zero_points is None else g.constant(zero_points), block_size=block_size,
                             accuracy_level=4)
        model = esgraph.compile(g.build([y]), threads=threads)
    got = model.run([a])[0]
    assert on_fast_kernel(model)
    exact = nbits_ref(a, codes, scales, zero_points, 4, block_size)
    bound = int8_rows_bound(a, codes, scales, zero_points, 4, block_size) + 1e-5 * np.abs(exact).max()
    assert (np.abs(got - exact) <= bound).all(), float((np.abs(got - exact) / bound).max())
    f32_path = run_fast(a, codes, scales, zero_points, 4, block_size, threads=threads)
    assert (np.abs(got - f32_path).max() > 0) == _has_vnni()


def test_accuracy_level_4_leaves_infinities_and_nans_to_the_f32_path_and_keeps_tiny_values():
    """A row holding a NaN or an infinity has no int8 scale: that product runs on the f32 path,
    which carries them (the int8 path had turned a NaN into 0). Values near the smallest
    normal float round within the bound (127 / their largest overflowed a float)."""
    rng = rng_for("accuracy level 4 non-finite")
    codes, scales, zero_points = operands(rng, 5, 64, 4, 32)
    with esgraph.GraphBuilder("level4") as g:
        y = ops.matmul_nbits(g.input("a", esgraph.f32, [2, 64]), g.constant(pack_codes(codes, 4, 32)), g.constant(scales),
                             zero_points=g.constant(zero_points), accuracy_level=4)
        model = esgraph.compile(g.build([y]))
    for bad in (np.nan, np.inf):
        a = rng.standard_normal((2, 64)).astype(F32)
        a[0, 5] = bad
        np.testing.assert_array_equal(model.run([a])[0], run_fast(a, codes, scales, zero_points, 4, 32))
    tiny = (rng.standard_normal((2, 64)) * 1e-38).astype(F32)
    exact = nbits_ref(tiny, codes, scales, zero_points, 4, 32)
    assert (np.abs(model.run([tiny])[0] - exact) <= int8_rows_bound(tiny, codes, scales, zero_points, 4, 32) + 1e-45).all()


def test_accuracy_level_4_leaves_8_bits_and_many_rows_on_the_f32_path():
    """8-bit codes are bound by their bytes (no faster in int8), and 16 rows or more dequantize
    onto the f32 GEMM: the same values as at level 0."""
    rng = rng_for("accuracy level 4 elsewhere")
    for bits, m in ((8, 3), (4, 20)):
        codes, scales, zero_points = operands(rng, 9, 96, bits, 32)
        a = rng.standard_normal((m, 96)).astype(F32)
        with esgraph.GraphBuilder("level4") as g:
            y = ops.matmul_nbits(g.input("a", esgraph.f32, [m, 96]), g.constant(pack_codes(codes, bits, 32)), g.constant(scales),
                                 zero_points=g.constant(zero_points), bits=bits, accuracy_level=4)
            level4 = esgraph.compile(g.build([y])).run([a])[0]
        np.testing.assert_array_equal(level4, run_fast(a, codes, scales, zero_points, bits, 32))


def test_accuracy_level_through_onnx_and_its_bad_values():
    """MatMulNBits's accuracy_level is read (it was ignored) and written back; one outside 0 to
    4 is refused where built and where imported."""
    k, n, block_size = 96, 5, 32
    rng = rng_for("accuracy level onnx")
    codes, scales, zero_points = operands(rng, n, k, 4, block_size)
    model = nbits_node_model((2, k), pack_codes(codes, 4, block_size), scales, pack_zero_points(zero_points, 4), None,
                             K=k, N=n, bits=4, block_size=block_size, accuracy_level=4)
    graph = esgraph.onnx.load(model.SerializeToString())
    assert "accuracy_level=4" in graph.to_text()
    a = rng.standard_normal((2, k)).astype(F32)
    exact = nbits_ref(a, codes, scales, zero_points, 4, block_size)
    got = esgraph.compile(graph).run([a])[0]
    assert (np.abs(got - exact) <= int8_rows_bound(a, codes, scales, zero_points, 4, block_size) + 1e-5 * np.abs(exact).max()).all()
    exported = next(node for node in esgraph.onnx.to_model(graph).graph.node if node.op_type == "MatMulNBits")
    assert [helper.get_attribute_value(x) for x in exported.attribute if x.name == "accuracy_level"] == [4]
    next(x for x in model.graph.node[0].attribute if x.name == "accuracy_level").i = 5
    with pytest.raises(esgraph.onnx.ImportFailed, match=r"accuracy_level=5 \(ONNX Runtime defines 0 to 4\)"):
        esgraph.onnx.load(model.SerializeToString())
    with esgraph.GraphBuilder("bad") as g:
        with pytest.raises(esgraph.AttributeValueError, match="accuracy_level"):
            ops.matmul_nbits(g.input("a", esgraph.f32, [1, k]), g.constant(pack_codes(codes, 4, block_size)), g.constant(scales),
                             accuracy_level=7)


# ---- ONNX export -----------------------------------------------------------------------------
@pytest.mark.parametrize("bits, with_zero_points", [(2, True), (4, True), (8, True), (4, False), (8, False)],
                         ids=["2bit-zp", "4bit-zp", "8bit-zp", "4bit-nozp", "8bit-nozp"])
def test_export_runs_on_onnx_runtime(bits, with_zero_points, tmp_path):
    """Exported as one com.microsoft MatMulNBits (the model imports com.microsoft 1), constant
    zero points packed as ONNX Runtime wants them, and no initializer left that no node reads:
    ONNX Runtime gives esgraph's and numpy's values. Read back, it compiles to the AVX2 kernel
    again."""
    m, k, n, block_size = 3, 100, 9, 32  # 4 blocks: two bytes of 4-bit zero points, one of 2-bit ones, a column
    rng = rng_for("export", bits, with_zero_points)
    codes, scales, zero_points = operands(rng, n, k, bits, block_size, with_zero_points)
    a = rng.standard_normal((2, m, k)).astype(F32)
    with esgraph.GraphBuilder("exported") as g:
        y = ops.matmul_nbits(g.input("a", esgraph.f32, [2, m, k]), g.constant(pack_codes(codes, bits, block_size)), g.constant(scales),
                             zero_points=None if zero_points is None else g.constant(zero_points), bits=bits, block_size=block_size)
        graph = g.build([y])
    want = nbits_ref(a, codes, scales, zero_points, bits, block_size)
    ours = esgraph.compile(graph).run([a])[0]
    check_close(ours, want)
    path = str(tmp_path / "nbits.onnx")
    esgraph.onnx.save(graph, path)
    exported = onnx.load(path)
    onnx.checker.check_model(exported)
    assert [(node.domain, node.op_type) for node in exported.graph.node] == [("com.microsoft", "MatMulNBits")]
    assert {(o.domain, o.version) for o in exported.opset_import} >= {("com.microsoft", 1)}
    assert any(o.domain in ("", "ai.onnx") for o in exported.opset_import)
    node = exported.graph.node[0]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attrs == {"K": k, "N": n, "bits": bits, "block_size": block_size}
    read = {name for node in exported.graph.node for name in node.input if name}
    assert {i.name for i in exported.graph.initializer} <= read, "an initializer no node reads"
    present = [name for name in node.input if name]
    assert len(present) == (4 if with_zero_points else 3)
    if with_zero_points:
        stored = {i.name: numpy_helper.to_array(i) for i in exported.graph.initializer}[node.input[3]]
        assert stored.dtype == U8
        np.testing.assert_array_equal(stored.reshape(-1), pack_zero_points(zero_points, bits))
    got = ort_run(exported, {exported.graph.input[0].name: a})
    check_close(got, want)
    check_close(got, ours.astype(F64))
    again = esgraph.compile(path)
    assert on_fast_kernel(again)
    check_close(again.run([a])[0], want)


@pytest.mark.parametrize("bits", [4, 8])
def test_export_of_computed_zero_points(bits, tmp_path):
    """Zero points computed at run time (a graph input here) are exported unpacked: below 8 bits
    cast to floats (ONNX Runtime's unpacked form, which it runs at 4 bits only), at 8 bits as
    they are. ONNX Runtime gives numpy's values."""
    m, k, n, block_size = 3, 100, 9, 32
    rng = rng_for("export computed", bits)
    codes, scales, zero_points = operands(rng, n, k, bits, block_size)
    a = rng.standard_normal((m, k)).astype(F32)
    with esgraph.GraphBuilder("computed") as g:
        z = g.input("z", esgraph.u8, list(zero_points.shape))
        y = ops.matmul_nbits(g.input("a", esgraph.f32, [m, k]), g.constant(pack_codes(codes, bits, block_size)), g.constant(scales),
                             zero_points=z, bits=bits, block_size=block_size)
        graph = g.build([y])
    path = str(tmp_path / "computed.onnx")
    esgraph.onnx.save(graph, path)
    exported = onnx.load(path)
    onnx.checker.check_model(exported)
    assert [node.op_type for node in exported.graph.node] == (["Cast", "MatMulNBits"] if bits < 8 else ["MatMulNBits"])
    read = {name for node in exported.graph.node for name in node.input if name}
    assert {i.name for i in exported.graph.initializer} <= read
    want = nbits_ref(a, codes, scales, zero_points, bits, block_size)
    check_close(ort_run(exported, {"a": a, "z": zero_points}), want)


# ---- memory: the codes, not an f32 copy of the weights ----------------------------------------
def test_a_compiled_model_keeps_the_codes_only(tmp_path):
    """A 4-bit product of 2048 x 2048 weights: 2 MiB of codes and 256 KiB of scales and zero
    points, 16 MiB as f32. The compiled model packs no copy of them (weights_packed 0) and
    plans no working memory for one (arena and working bytes below the codes' size), and its
    file holds about the codes' bytes, not the f32 weights'."""
    k = n = 2048
    bits, block_size = 4, 32
    rng = rng_for("memory")
    codes, scales, zero_points = operands(rng, n, k, bits, block_size)
    b = pack_codes(codes, bits, block_size)
    model = nbits_model((1, k), b, scales, zero_points, bits, block_size)
    a = rng.standard_normal((1, k)).astype(F32)
    got = model.run([a])[0]
    check_close(got, nbits_ref(a, codes, scales, zero_points, bits, block_size))
    stats = model.stats()
    assert on_fast_kernel(model)
    assert stats["weights_packed"] == 0
    assert stats["arena_bytes"] + stats["working_bytes"] < b.nbytes // 8
    operand_bytes = b.nbytes + scales.nbytes + zero_points.nbytes
    model.save(tmp_path / "nbits.esgm")
    size = (tmp_path / "nbits.esgm").stat().st_size
    assert operand_bytes <= size < operand_bytes + (256 << 10)
    assert size < k * n * 4 // 6
    loaded = esgraph.load_model(tmp_path / "nbits.esgm")
    check_close(loaded.run([a])[0], got.astype(F64), rtol=0)


def test_ascend_refuses_it_by_name_and_runs_it_on_the_host_with_host_fallback():
    """CANN's weight-quantized product (aclnnWeightQuantBatchMatmulV2) takes FLOAT16 and BFLOAT16
    activations only: the Ascend backend (simulated here) names the op and why, and with
    host_fallback runs it on the host."""
    rng = rng_for("ascend")
    codes, scales, zero_points = operands(rng, 8, 64, 4, 32)
    with esgraph.GraphBuilder("ascend") as g:
        x = g.input("a", esgraph.f32, [2, 64])
        y = ops.matmul_nbits(x, g.constant(pack_codes(codes, 4, 32)), g.constant(scales), zero_points=g.constant(zero_points))
        graph = g.build([y])
    with pytest.raises(esgraph.UnsupportedError, match=r"no device lowering yet for matmul_nbits x1 \(f32 activations "
                                                       r"\(aclnnWeightQuantBatchMatmulV2 takes FLOAT16 and BFLOAT16 ones only\)\)"):
        esgraph.compile(graph, backend="ascend-sim")
    model = esgraph.compile(graph, backend="ascend-sim", backend_options={"host_fallback": 1})
    assert model.stats()["host_ops"] == [{"op": "matmul_nbits", "count": 1, "reason": "f32 activations (aclnnWeightQuantBatchMatmulV2 takes FLOAT16 and BFLOAT16 ones only)"}]
    a = rng.standard_normal((2, 64)).astype(F32)
    check_close(model.run([a])[0], nbits_ref(a, codes, scales, zero_points, 4, 32))
