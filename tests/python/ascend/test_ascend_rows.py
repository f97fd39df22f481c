"""The Ascend backend on the simulated device (conftest.py says how these tests run): the row
normalizations (softmax, log_softmax, layer_norm, rms_norm) as generated row kernels: rows that fit
and long rows, masks, scales and biases, half precision."""
import numpy as np
import pytest

import esgraph
from esgraph import ops

from ascend_device import RTOL, ATOL, graph_of, both, check_same, calls


# ---- row normalizations: generated row kernels ------------------------------------------------------
ROW_OPS = {
    "softmax": lambda a: ops.softmax(a),
    "log_softmax": lambda a: ops.log_softmax(a),
    "layer_norm": lambda a: ops.layer_norm(a),
    "rms_norm": lambda a: ops.rms_norm(a, epsilon=1e-3),
}


@pytest.mark.parametrize("op", sorted(ROW_OPS))
@pytest.mark.parametrize("rows, length, cores", [(1, 1, 8), (5, 7, 3), (301, 37, 8), (3, 512, 2), (2, 5000, 64), (3, 20011, 2)])
def test_row_normalizations_run_as_generated_kernels(op, rows, length, cores, acl_log):
    """Each row normalization is one generated kernel over whole rows (rows that do not fill a
    32-byte block, more rows than cores and fewer, rows longer than the Unified Buffer holds,
    chunk by chunk), with no call into CANN's library."""
    x = (np.random.default_rng(rows + length).standard_normal((rows, length)) * 4 + 1).astype(np.float32)
    check_same(graph_of(ROW_OPS[op], x.shape), [x], ai_cores=cores)
    log = acl_log()
    assert not any(line.startswith("aclnn") for line in log)
    launches = calls(log, "aclrtLaunchKernelWithConfig")
    assert len(launches) == 1 and f"numBlocks={min(rows, cores)}" in launches[0]


def test_norms_with_scale_bias_and_trailing_axes():
    rng = np.random.default_rng(21)
    x, scale, bias = rng.standard_normal((4, 6, 10)).astype(np.float32), rng.standard_normal((6, 10)).astype(np.float32), \
        rng.standard_normal((6, 10)).astype(np.float32)
    check_same(graph_of(lambda t, s, c: ops.layer_norm(t, scale=s, bias=c, axis=1, epsilon=1e-3), x.shape, scale.shape, bias.shape),
               [x, scale, bias])
    check_same(graph_of(lambda t, s: ops.layer_norm(t, scale=s, axis=-1), x.shape, (10,)), [x, scale[0].copy()])
    check_same(graph_of(lambda t, s: ops.rms_norm(t, scale=s, axis=-2), x.shape, scale.shape), [x, scale])
    # Rows of constants (variance 0) and of huge values.
    c = np.full((3, 9), 2.5, np.float32)
    c[1] *= 1e30
    check_same(graph_of(lambda t: ops.layer_norm(t, epsilon=0.0) + ops.rms_norm(t), c.shape), [c])


@pytest.mark.parametrize("mask_shape", [(2, 1, 1, 16), (16,), (2, 3, 5, 16), (3, 1, 16), (1, 1, 5, 16)])
def test_softmax_reads_its_mask_rows_in_place(mask_shape, acl_log):
    """softmax(x * scale + mask) in one row kernel: a mask broadcast over leading dims (an
    attention mask [B, 1, 1, S] over [B, H, S, S], a row, a middle dim) is read row by row where
    it is, never expanded."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 5, 16)).astype(np.float32)
    mask = np.where(rng.random(mask_shape) > 0.3, 0, -1e9).astype(np.float32)
    check_same(graph_of(lambda a, m: ops.softmax(a, mask=m, scale=0.125), x.shape, mask.shape), [x, mask], ai_cores=4)
    assert not any(line.startswith("aclnn") for line in acl_log())


def test_softmax_the_row_kernel_does_not_take_splits_for_aclnn(acl_log):
    """A scale or mask the row kernel does not take becomes a generated elementwise kernel before
    a plain softmax: over another axis than the last, aclnnSoftmax (which has neither); a mask
    broadcast along the row is expanded and added, and the plain softmax left is a row kernel."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 5, 16)).astype(np.float32)
    check_same(graph_of(lambda a: ops.softmax(a, scale=-2.0, axis=1), x.shape), [x])
    m = rng.standard_normal((2, 1, 5, 1)).astype(np.float32)
    check_same(graph_of(lambda a, mm: ops.softmax(a, mask=mm), x.shape, m.shape), [x, m])
    log = acl_log()
    assert len(calls(log, "aclnnSoftmaxGetWorkspaceSize")) == 1 and len(calls(log, "aclnnExpandGetWorkspaceSize")) == 1


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_row_normalizations_in_half_precision(dtype):
    """f16 and bf16 rows are converted to f32 as they enter, normalized, and rounded once."""
    rng = np.random.default_rng(8)
    x, s, m = rng.standard_normal((6, 40)), rng.standard_normal(40), np.where(rng.random(40) > 0.2, 0.0, -1e4)

    def to_device(a):  # f16 as numpy's; bf16 as the upper half of an f32's bits
        return a.astype(np.float16) if dtype == "f16" else (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)

    def to_f32(a):
        return a.astype(np.float32) if dtype == "f16" else (a.astype(np.uint32) << 16).view(np.float32)
    t = getattr(esgraph, dtype)
    with esgraph.GraphBuilder("g") as b:
        xi, si, mi = b.input("x", t, [6, 40]), b.input("s", t, [40]), b.input("m", t, [40])
        g = b.build([ops.softmax(xi, mask=mi, scale=0.5), ops.log_softmax(xi), ops.layer_norm(xi, scale=si, bias=si),
                     ops.rms_norm(xi, scale=si)])
    cpu, sim = both(g, [to_device(x), to_device(s), to_device(m)])
    for c, d in zip(cpu, sim):
        assert c.dtype == d.dtype
        # Both compute in f32 and round once; the sums' order differs: a unit in the last place.
        np.testing.assert_allclose(to_f32(d), to_f32(c), rtol=8e-3 if dtype == "bf16" else 1e-3, atol=1e-2)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_long_rows_with_masks_scales_and_biases(dtype, acl_log):
    """Rows longer than the Unified Buffer holds (an LLM's 8192-wide f32 hidden state and more):
    each reduction pass reads the row chunk by chunk, the mask's chunks at its own row, the scale
    and bias chunk by chunk with the result."""
    rng = np.random.default_rng(17)
    width = 9000 if dtype == "f32" else 20000
    np_type, t = (np.float32, esgraph.f32) if dtype == "f32" else (np.float16, esgraph.f16)
    x = (rng.standard_normal((2, 3, width)) * 3).astype(np_type)
    mask = np.where(rng.random((2, 1, width)) > 0.1, 0.0, -1e4).astype(np_type)
    scale, bias = rng.standard_normal(width).astype(np_type), rng.standard_normal(width).astype(np_type)
    with esgraph.GraphBuilder("long") as b:
        xi, mi, si, bi = b.input("x", t, [2, 3, width]), b.input("m", t, [2, 1, width]), b.input("s", t, [width]), b.input("b", t, [width])
        g = b.build([ops.softmax(xi, mask=mi, scale=0.25), ops.log_softmax(xi), ops.layer_norm(xi, scale=si, bias=bi),
                     ops.rms_norm(xi, scale=si, epsilon=1e-3)])
    cpu, sim = both(g, [x, mask, scale, bias])
    for c, d in zip(cpu, sim):
        np.testing.assert_allclose(d.astype(np.float32), c.astype(np.float32), rtol=RTOL if dtype == "f32" else 2e-3,
                                   atol=ATOL if dtype == "f32" else 2e-3)
    assert not any(line.startswith("aclnn") for line in acl_log())


def test_softmax_over_another_axis_is_refused_for_log_softmax():
    with pytest.raises(esgraph.UnsupportedError, match=r"log_softmax x1 \(a softmax over another axis than the last"):
        esgraph.compile(graph_of(lambda a: ops.log_softmax(a, axis=0), (2, 9)), backend="ascend-sim")
