"""The Ascend backend on the simulated device (backend="ascend-sim"): the real backend code (the
AscendCL loader, kernel generation and build, device programs) against the stand-in
libascendcl.so of tests/ascend_sim, whose call log shows the launch protocol.

Values are checked against the CPU backend (itself checked against numpy in test_numerics_*.py)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import esgraph
from esgraph import ops

from esgraph_op_set import OP_SET, py_name

from esgraph_codegen import compute

RTOL, ATOL = 1e-5, 1e-5


@pytest.fixture(scope="module", autouse=True)
def private_kernel_cache(tmp_path_factory):
    """Kernels built by this module go to a cache of its own (and are shared by its tests)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("ESG_KERNEL_CACHE", str(tmp_path_factory.mktemp("kernels")))
    yield
    mp.undo()


@pytest.fixture
def acl_log(tmp_path, monkeypatch):
    """The simulator's call log of what the test does, as a list of lines (read when called)."""
    path = tmp_path / "acl.log"
    monkeypatch.setenv("ACLSIM_LOG", str(path))

    def lines():
        return path.read_text().splitlines() if path.exists() else []
    return lines


def graph_of(fn, *shapes):
    with esgraph.GraphBuilder("g") as b:
        xs = [b.input(f"x{i}", esgraph.f32, list(s)) for i, s in enumerate(shapes)]
        out = fn(*xs)
        return b.build(list(out) if isinstance(out, (tuple, list)) else [out])


def both(graph, arrays, **options):
    """(CPU outputs, ascend-sim outputs) of one graph."""
    cpu = esgraph.compile(graph).run(list(arrays))
    sim = esgraph.compile(graph, backend="ascend-sim", **options).run(list(arrays))
    return cpu, sim


def check_same(graph, arrays, **options):
    cpu, sim = both(graph, arrays, **options)
    assert len(cpu) == len(sim)
    for c, s in zip(cpu, sim):
        assert s.dtype == c.dtype and s.shape == c.shape
        np.testing.assert_allclose(s, c, rtol=RTOL, atol=ATOL)


# ---- every elementwise op with an Ascend C lowering -------------------------------------------
def lowered_ops():
    """Ops whose YAML expression lowers to Ascend C and whose inputs are all float tensors."""
    found = []
    for op in OP_SET.ops:
        if not op.compute or any(i.optional or i.variadic for i in op.inputs):
            continue
        try:
            compute.to_ascendc(op.compute, [i.name for i in op.inputs], [a.name for a in op.attrs])
        except compute.NotLowerable:
            continue
        found.append(op)
    return found


LOWERED = lowered_ops()
# Inputs away from zero, and positive where the math needs it (log, sqrt, division).
POSITIVE = re.compile(r"log\(|sqrt\(|/")


def op_inputs(op, shape, seed):
    rng = np.random.default_rng(seed)
    positive = bool(POSITIVE.search(op.compute))
    arrays = []
    for _ in op.inputs:
        a = rng.uniform(0.2, 2.0, shape)
        if not positive:
            a *= rng.choice([-1.0, 1.0], shape)
        arrays.append(a.astype(np.float32))
    return arrays


def test_the_lowering_covers_the_common_ops():
    names = {op.name for op in LOWERED}
    assert {"add", "sub", "mul", "div", "maximum", "minimum", "neg", "abs", "exp", "log", "sqrt", "rsqrt",
            "relu", "sigmoid", "tanh", "gelu", "silu", "erf", "clip", "softplus", "hard_swish", "leaky_relu", "elu",
            "selu", "where", "greater", "less_equal", "equal", "not_equal", "logical_and", "logical_or", "logical_not",
            "is_nan", "is_inf", "floor", "ceil", "round", "sign", "pow", "tan", "asin", "acos", "atan", "sinh", "cosh",
            "asinh", "acosh"} <= names


def in_float_group(op, fn):
    """`fn` (the op) between float inputs and a float result, all in one group: a bool input is
    `x > 0` of its float input, a bool result picks between the first input and its double. The
    kernels keep booleans inside a group as 0 and 1; at its edges they are not lowered yet."""
    bool_in = [i.type == "bool" for i in op.inputs]
    bool_out = op.outputs[0].type == "bool"

    def graph(*xs):
        y = fn(*[ops.greater(x, 0.0) if b else x for x, b in zip(xs, bool_in)])
        return ops.where(y, xs[0], xs[0] * 2.0) if bool_out else y
    return graph


def special_values(arrays):
    """Equal operands at every third element, and NaN, ±inf and 0 in the first input."""
    for a in arrays[1:]:
        a[::3] = arrays[0][::3]
    arrays[0][1::7], arrays[0][2::11], arrays[0][3::13], arrays[0][4::17] = np.nan, np.inf, -np.inf, 0.0
    return arrays


# Ops with a required attribute, called with one.
CALLS = {"cast": lambda x: ops.cast(x, esgraph.f16)}


# Sizes: one element; not a multiple of 8 floats (a DataCopyPad tail); several tiles that do
# not divide evenly over the blocks. Cores: one block, fewer blocks than tiles, more.
@pytest.mark.parametrize("op", LOWERED, ids=lambda op: op.name)
def test_op_matches_the_cpu(op):
    fn = in_float_group(op, CALLS.get(op.name, getattr(ops, py_name(op.name))))
    for size, cores in ((1, 8), (37, 1), (30011, 2), (30011, 3), (30011, 64)):
        arrays = op_inputs(op, (size,), seed=size)
        check_same(graph_of(fn, *[a.shape for a in arrays]), arrays, ai_cores=cores)
    if "CMPMODE" in " ".join(compute.to_ascendc(op.compute, [i.name for i in op.inputs], [a.name for a in op.attrs]).statements):
        with np.errstate(invalid="ignore"):
            arrays = special_values(op_inputs(op, (4099,), seed=1))
            check_same(graph_of(fn, *[a.shape for a in arrays]), arrays, ai_cores=3)


# Values of each type at a group's edges and inside it: bool bytes in and out, f16 and bf16 in
# an f32 group, their results rounded as the CPU stores them, casts to bool.
TYPE_CASES = {
    "bool result": (lambda a: ops.greater(a, 0.0), ["f32"]),
    "bool input": (lambda a, b: ops.where(b, a, a * 2.0), ["f32", "bool"]),
    "bool to bool": (lambda b, c: ops.logical_or(ops.logical_not(b), c), ["bool", "bool"]),
    "f16 input of an f32 group": (lambda a, h: ops.cast(h, esgraph.f32) * a, ["f32", "f16"]),
    "f16 inside an f32 group": (lambda a: ops.cast(ops.cast(a * 3.0, esgraph.f16), esgraph.f32) + 1.0, ["f32"]),
    "f16 result of an f32 group": (lambda a: ops.cast(ops.exp(a), esgraph.f16), ["f32"]),
    "cast to bool": (lambda a: ops.where(ops.cast(ops.relu(a), esgraph.bool_), a, 0.0), ["f32"]),
    "f16 group with masks": (lambda h: ops.where(ops.greater(h, 0.0), h, h * 0.5), ["f16"]),
    "bool scalar and two outputs": (lambda a, s: [ops.where(s, a, -a), ops.less(a, 1.0)], ["f32", "bool scalar"]),
    "bf16 in and out": (lambda a, b: ops.sigmoid(a) * b - 1.0, ["bf16", "bf16"]),
    "bf16 inside an f32 group": (lambda a: ops.cast(ops.cast(a * 3.0, esgraph.bf16) + ops.cast(a, esgraph.bf16), esgraph.f32), ["f32"]),
}


@pytest.mark.parametrize("case", TYPE_CASES)
def test_types_at_group_edges_and_inside(case):
    fn, types = TYPE_CASES[case]
    rng = np.random.default_rng(7)
    for size, cores in ((1, 1), (37, 2), (4099, 3)):
        arrays = []
        for t in types:
            if t.startswith("bool"):
                arrays.append(rng.random(1 if "scalar" in t else size) > 0.5)
            elif t == "bf16":  # bf16 travels as its bits: the upper half of an f32
                arrays.append(((rng.standard_normal(size) * 3).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16))
            else:
                arrays.append((rng.standard_normal(size) * 3).astype(np.float16 if t == "f16" else np.float32))
        with esgraph.GraphBuilder("types") as b:
            dtypes = [esgraph.bf16 if t == "bf16" else a.dtype for t, a in zip(types, arrays)]
            out = fn(*[b.input(f"x{i}", d, list(a.shape)) for i, (d, a) in enumerate(zip(dtypes, arrays))])
        check_same(b.build(out if isinstance(out, list) else [out]), arrays, ai_cores=cores)


def test_gelu_both_forms_and_attributes():
    x = np.linspace(-4, 4, 1001, dtype=np.float32)
    for approximate in ("none", "tanh"):
        check_same(graph_of(lambda t: ops.gelu(t, approximate=approximate), x.shape), [x])
    check_same(graph_of(lambda t: ops.clip(t, min=-0.5, max=1.25), x.shape), [x])
    check_same(graph_of(lambda t: ops.hard_sigmoid(t, alpha=0.3, beta=0.4), x.shape), [x])


# ---- fused groups --------------------------------------------------------------------------------
def test_kernels_spread_over_the_devices_ai_cores(acl_log, monkeypatch):
    """Without ai_cores, a kernel's blocks are the device's vector cores (aclGetDeviceCapability's
    ACL_DEVICE_INFO_VECTOR_CORE_NUM): a vector-only kernel's block is one vector core, two per
    AI core on Atlas A2."""
    monkeypatch.setenv("ACLSIM_AI_CORES", "3")
    x = np.linspace(-2, 2, 256 * 1024, dtype=np.float32).reshape(256, 1024)  # more tiles than vector cores
    g = graph_of(lambda a: ops.tanh(a) * 2.0, x.shape)
    np.testing.assert_allclose(esgraph.compile(g, backend="ascend-sim")(x), np.tanh(x) * 2, rtol=RTOL, atol=ATOL)
    assert any(line.endswith(" 1 -> 6") for line in calls(acl_log(), "aclGetDeviceCapability"))
    launches = calls(acl_log(), "aclrtLaunchKernelWithConfig")
    assert launches and all(" numBlocks=6 " in line for line in launches)
    monkeypatch.setenv("ACLSIM_AI_CORES", "0")
    with pytest.raises(esgraph.BackendError, match="reports 0 vector cores"):
        esgraph.compile(g, backend="ascend-sim")


def test_a_fused_chain_is_one_kernel_with_the_same_values(acl_log):
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 300, 40)).astype(np.float32)
    g = graph_of(lambda a, b: ops.tanh(a * b + 0.5) * ops.sigmoid(a) - ops.exp(-ops.abs(b)), x.shape, w.shape)
    check_same(g, [x, w])
    launches = [line for line in acl_log() if line.startswith("aclrtLaunchKernelWithConfig")]
    assert len(launches) == 1  # captured once; the run replays the capture
    unfused = esgraph.compile(g, backend="ascend-sim", fusion=False)
    np.testing.assert_allclose(unfused(x, w), esgraph.compile(g)(x, w), rtol=RTOL, atol=ATOL)
    assert unfused.stats()["device_kernel_launches"] == 9


@pytest.mark.parametrize("size, cores", [(5, 1), (40000, 1), (40000, 3), (40001, 8), (40001, 64)])
def test_a_fused_group_over_tiles_and_cores(size, cores):
    # One kernel (built once: sizes come in the tiling argument) over one partial tile, several
    # tiles in one block, and tiles spread unevenly over blocks.
    rng = np.random.default_rng(size + cores)
    x, w = rng.standard_normal((2, size)).astype(np.float32)
    check_same(graph_of(lambda a, b: ops.silu(a * b - 0.25) + ops.tanh(b), x.shape, w.shape), [x, w], ai_cores=cores)


def test_f16_groups():
    # The same kernels over half tiles; the simulator rounds each instruction's result to half,
    # the CPU each op's, so values agree to a few half ulps.
    rng = np.random.default_rng(11)
    x, w = rng.uniform(-2, 2, (2, 3000)).astype(np.float16)
    with esgraph.GraphBuilder("h") as b:
        a, c = b.input("a", esgraph.f16, list(x.shape)), b.input("c", esgraph.f16, list(w.shape))
        g16 = b.build([ops.sigmoid(a * c + 0.5) - ops.tanh(c) + ops.relu(a)])
    for cores in (1, 3):
        cpu = esgraph.compile(g16).run([x, w])[0]
        sim = esgraph.compile(g16, backend="ascend-sim", ai_cores=cores).run([x, w])[0]
        assert sim.dtype == np.float16
        np.testing.assert_allclose(sim.astype(np.float32), cpu.astype(np.float32), rtol=4e-3, atol=4e-3)


def test_broadcast_operands_scalars_and_rows():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 48)).astype(np.float32)
    bias = rng.standard_normal(48).astype(np.float32)
    row = rng.standard_normal((1, 48)).astype(np.float32)
    s = np.array(0.75, np.float32)
    g = graph_of(lambda a, b, r, c: ops.relu(a + b) * r + c, x.shape, bias.shape, row.shape, s.shape)
    check_same(g, [x, bias, row, s])
    flat = rng.standard_normal((64, 48)).astype(np.float32)  # [64, 48] into [1, 64, 48]: streamed, not resident
    check_same(graph_of(lambda a, b: a * b + 1.0, (1, 64, 48), flat.shape), [x[None], flat])
    odd = rng.standard_normal((100, 7)).astype(np.float32)  # rows of 7 floats: not 32-byte aligned
    check_same(graph_of(lambda a, b: a * b, odd.shape, (7,)), [odd, odd[0].copy()], ai_cores=3)


def test_other_broadcasts_are_expanded_first(acl_log):
    """A per-channel operand over NCHW, a column, a middle axis: the kernels read single elements
    and trailing rows in place; the others become an aclnnExpand ahead of the group's kernel."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 5, 6, 7)).astype(np.float32)
    channel, column, middle = (rng.standard_normal(s).astype(np.float32) for s in ((5, 1, 1), (4, 1, 6, 1), (1, 5, 1, 7)))
    g = graph_of(lambda a, c, k, m: ops.relu(a * c + k) - m, x.shape, channel.shape, column.shape, middle.shape)
    model = esgraph.compile(g, backend="ascend-sim", ai_cores=3)
    assert any(p["step"].startswith("legalize for ascend-sim") for p in model.stats()["passes"])
    np.testing.assert_allclose(model(x, channel, column, middle), esgraph.compile(g)(x, channel, column, middle), rtol=RTOL, atol=ATOL)
    assert len(calls(acl_log(), "aclnnExpandGetWorkspaceSize")) == 3
    # A trailing row stays in the kernel.
    check_same(graph_of(lambda a, r: a + r, x.shape, (6, 7)), [x, x[0, 0].copy()])


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


def test_gather_runs_as_index_select(acl_log):
    """An embedding lookup ([vocabulary, width] by [batch, tokens] indices) and a gather along a
    middle axis: aclnnIndexSelect over a flat view of the indices, its result viewed back."""
    rng = np.random.default_rng(8)
    table = rng.standard_normal((50, 16)).astype(np.float32)
    tokens = rng.integers(0, 50, (4, 7)).astype(np.int32)
    with esgraph.GraphBuilder("embedding") as b:
        g = b.build([ops.gather(b.input("t", esgraph.f32, [50, 16]), b.input("i", esgraph.i32, [4, 7])) * 2.0])
    check_same(g, [table, tokens])
    x = rng.standard_normal((3, 5, 6)).astype(np.float32)
    picks = np.array([[4, 0], [2, 2]], np.int64)
    with esgraph.GraphBuilder("middle") as b:
        g = b.build([ops.gather(b.input("x", esgraph.f32, [3, 5, 6]), b.input("i", esgraph.i64, [2, 2]), axis=-2)])
    check_same(g, [x, picks])
    assert len(calls(acl_log(), "aclnnIndexSelectGetWorkspaceSize")) == 2
    # Negative indices count from the end; CANN documents none for IndexSelect (the simulator
    # refuses them), so the device wraps them first: where(i < 0, i + dim, i) through aclnn's
    # integer ops, or a constant rewritten.
    before = len(acl_log())
    check_same(g, [x, np.array([[-1, 0], [-5, 4]], np.int64)])
    assert calls(acl_log()[before:], "aclnnSWhereGetWorkspaceSize")
    with esgraph.GraphBuilder("constant") as b:
        g = b.build([ops.gather(b.input("x", esgraph.f32, [3, 5, 6]), esgraph.constant(np.array([-1, 0, -6], np.int32)), axis=2)])
    check_same(g, [x])


def test_slices_copy_a_strided_view(acl_log):
    """A slice is a view of x (offset at its starts, strides times its steps) that
    aclnnInplaceCopy copies into the result: axes in any order, negative starts, ends past the
    end, steps; a negative step has no such view and is refused."""
    x = np.random.default_rng(9).standard_normal((6, 9, 10)).astype(np.float32)
    for kw in (dict(starts=[1], ends=[5]), dict(starts=[2, -7], ends=[100, 9], axes=[2, 1], steps=[3, 2]),
               dict(starts=[0, 1, 1], ends=[6, 9, 10], steps=[2, 4, 1])):
        check_same(graph_of(lambda a: ops.slice(a, **kw) * 2.0, x.shape), [x], ai_cores=2)
    assert len(calls(acl_log(), "aclnnInplaceCopyGetWorkspaceSize")) == 3
    with pytest.raises(esgraph.UnsupportedError, match=r"slice x1 \(a negative step"):
        esgraph.compile(graph_of(lambda a: ops.slice(a, starts=[-1], ends=[-7], steps=[-1]), x.shape), backend="ascend-sim")


def test_products_arg_reductions_and_top_k_run_on_aclnn(acl_log):
    """reduce_prod over one axis as aclnnProdDim and over all as aclnnProd (over several, one
    axis at a time); argmax and argmin as aclnnArgMax/ArgMin and top_k as aclnnTopk, whose
    indices are int64. The data has no ties, whose order CANN does not document."""
    rng = np.random.default_rng(13)
    x = rng.permutation(3 * 4 * 6).reshape(3, 4, 6).astype(np.float32) / 10 - 3  # distinct values
    for kw in (dict(axes=[1]), dict(axes=[-1], keepdims=True), dict(), dict(axes=[0, 1, 2], keepdims=True)):
        check_same(graph_of(lambda a: ops.reduce_prod(a * 0.25 + 1.0, **kw), x.shape), [x])
    # Several but not all axes: one product per axis (device lowering), then a reshape.
    for kw in (dict(axes=[0, 2]), dict(axes=[-1, 0], keepdims=True)):
        check_same(graph_of(lambda a: ops.reduce_prod(a * 0.25 + 1.0, **kw), x.shape), [x])
    for fn in (ops.argmax, ops.argmin):
        for kw in (dict(axis=1), dict(axis=-1, keepdims=True)):
            check_same(graph_of(lambda a: fn(a, **kw), x.shape), [x])
    for kw in (dict(k=3), dict(k=2, axis=1, largest=False), dict(k=0, axis=0)):
        check_same(graph_of(lambda a: ops.top_k(a, **kw), x.shape), [x])
    log = acl_log()
    assert len(calls(log, "aclnnProdDimGetWorkspaceSize")) == 2 + 4 and len(calls(log, "aclnnProdGetWorkspaceSize")) == 2
    assert len(calls(log, "aclnnArgMaxGetWorkspaceSize")) == 2 and len(calls(log, "aclnnArgMinGetWorkspaceSize")) == 2
    assert calls(log, "aclnnTopkGetWorkspaceSize")


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_elementwise_ops_run_on_aclnn(dtype, acl_log):
    """Elementwise ops of integer values run one by one through CANN's ops of the same names
    (the generated kernels compute floats and bools); a float op after them still fuses into a
    kernel. Integer division and other integer widths are refused with the reason."""
    rng = np.random.default_rng(14)
    a, b = (rng.integers(-50, 50, (4, 6)).astype(dtype) for _ in range(2))
    t = esgraph.i32 if dtype == np.int32 else esgraph.i64

    def graph(x, y):
        s = (x + y) * 3 - ops.maximum(x, y)
        m = ops.minimum(x, ops.neg(y))
        w = ops.where(ops.greater(x, y), s, ops.abs(m))
        flags = [ops.less(x, y), ops.less_equal(x, y), ops.greater_equal(x, y), ops.equal(x, s), ops.not_equal(x, y)]
        return [w, ops.cast(w, esgraph.f32) * 0.5 + 1.0, ops.cast(ops.cast(x, esgraph.f32) * 1.5, t)] + flags

    with esgraph.GraphBuilder("ints") as bld:
        outs = graph(bld.input("x", t, [4, 6]), bld.input("y", t, [1, 6]))
    g = bld.build(outs)
    cpu = esgraph.compile(g).run([a, b[:1]])
    sim = esgraph.compile(g, backend="ascend-sim").run([a, b[:1]])
    for c, s in zip(cpu, sim):
        assert s.dtype == c.dtype and s.shape == c.shape
        np.testing.assert_array_equal(s, c)
    log = acl_log()
    for name in ("aclnnAdd", "aclnnSub", "aclnnMul", "aclnnMaximum", "aclnnMinimum", "aclnnNeg", "aclnnAbs", "aclnnGtTensor",
                 "aclnnSWhere", "aclnnCast", "aclnnLtTensor", "aclnnLeTensor", "aclnnGeTensor", "aclnnEqTensor", "aclnnNeTensor"):
        assert calls(log, name + "GetWorkspaceSize"), name
    assert calls(log, "aclrtLaunchKernelWithConfig")  # the f32 mul and add: one generated kernel
    # The library's ops promise nothing about an output over an input (a cast between i32 and f32
    # would write one type over the other): none is planned in place, unlike on the CPU.
    with esgraph.GraphBuilder("chain") as bld:
        x = bld.input("x", t, [64])
        chain = bld.build([ops.cast(ops.cast(ops.neg(x + x) * 3, esgraph.f32), t) - x])
    assert esgraph.compile(chain, fusion=False).stats()["in_place_values"] > 0
    assert esgraph.compile(chain, backend="ascend-sim", fusion=False).stats()["in_place_values"] == 0
    with esgraph.GraphBuilder("div") as bld:
        x = bld.input("x", t, [4])
        q = bld.build([x / x])
    with pytest.raises(esgraph.UnsupportedError, match=r"div x1 \(integer division"):
        esgraph.compile(q, backend="ascend-sim")
    with esgraph.GraphBuilder("i8") as bld:
        x = bld.input("x", esgraph.i8, [4])
        q = bld.build([x + x])
    with pytest.raises(esgraph.UnsupportedError, match=r"add x1 \(i8 \(i32 and i64 only among integers\)"):
        esgraph.compile(q, backend="ascend-sim")
    with esgraph.GraphBuilder("f64") as bld:
        x = bld.input("x", esgraph.f64, [4])
        q = bld.build([x / x, x + x])
    with pytest.raises(esgraph.UnsupportedError, match=r"add x1 \(f64 \(f32, f16 and bf16 only among floats\)\), "
                                                       r"div x1 \(f64 division"):
        esgraph.compile(q, backend="ascend-sim")


POOLS = [dict(kernel=[2, 2]), dict(kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
         dict(kernel=[3, 2], strides=[2, 3], ceil_mode=True), dict(kernel=[3, 3], strides=[2, 2], pads=[1, 0, 2, 1])]


@pytest.mark.parametrize("pool", ["max_pool2d", "avg_pool2d"])
def test_pooling_runs_on_aclnn(pool, acl_log):
    """max_pool2d as aclnnMaxPool (four pads), avg_pool2d as aclnnAvgPool2d (the mean of the
    window's elements inside the input, one pad per axis of at most half the window): other
    padding becomes an explicit pad, a pool without padding and a factor per position (window
    area over its elements inside the input), so the mean still counts only those."""
    x = np.random.default_rng(10).standard_normal((2, 3, 9, 10)).astype(np.float32)
    fn = getattr(ops, pool)
    for kw in POOLS + [dict(kernel=[3, 3], pads=[2, 2, 2, 2]), dict(kernel=[2, 3], strides=[2, 2], pads=[0, 0, 1, 1], ceil_mode=True)]:
        if pool == "max_pool2d" and kw.get("pads") == [2, 2, 2, 2]:
            continue
        check_same(graph_of(lambda a: fn(a, **kw) + 1.0, x.shape), [x])
    log = acl_log()
    assert calls(log, "aclnnMaxPoolGetWorkspaceSize" if pool == "max_pool2d" else "aclnnAvgPool2dGetWorkspaceSize")
    if pool == "avg_pool2d":
        assert len(calls(log, "aclnnConstantPadNdGetWorkspaceSize")) == 3
    # More padding than CANN takes (a window's worth in all for MaxPool; for AvgPool2d, a
    # ceil-mode window reaching past the padded input) is refused with the reason.
    why = "more padding than the window" if pool == "max_pool2d" else "asymmetric padding"
    kw = dict(kernel=[3, 3], pads=[2, 2, 2, 2]) if pool == "max_pool2d" else dict(kernel=[3, 3], strides=[2, 2], pads=[0, 0, 1, 0], ceil_mode=True)
    with pytest.raises(esgraph.UnsupportedError, match=why):
        esgraph.compile(graph_of(lambda a: fn(a, **kw), (2, 3, 7, 6)), backend="ascend-sim")


def test_what_cann_documents_no_aclnn_op_for_is_refused_by_name():
    """The limits of CANN's operator documentation: 6 dims at most for matmul, no bool
    aclnnArange (a range too large to fold), conv2d padding within 255 on Atlas A2."""
    cases = [
        (graph_of(lambda a, w: ops.matmul(a, w), (1,) * 5 + (2, 3), (3, 4)), r"rank 7 \(aclnnMatmul takes at most 6 dims\)"),
        (graph_of(lambda a: ops.where(ops.range(limit=70000.0, dtype=esgraph.bool_), a, a), (70000,)), "aclnnArange makes"),
        (graph_of(lambda a, w: ops.conv2d(a, w, pads=[256, 256, 256, 256]), (1, 1, 3, 3), (1, 1, 3, 3)), "padding beyond 255"),
    ]
    for graph, why in cases:
        with pytest.raises(esgraph.UnsupportedError, match=why):
            esgraph.compile(graph, backend="ascend-sim")


@pytest.mark.parametrize("reduce", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min"])
def test_reductions_run_on_aclnn(reduce):
    x = np.random.default_rng(11).standard_normal((3, 4, 5, 6)).astype(np.float32)
    fn = getattr(ops, reduce)
    for kw in (dict(axes=[2, 3], keepdims=True), dict(axes=[-1]), dict()):
        check_same(graph_of(lambda a: fn(a, **kw), x.shape), [x])


def test_a_convolutional_network_imported_from_pytorch_runs_on_the_device():
    """Convolutions (batch norm folded in) with ReLU, max pooling, a global average, a linear
    layer: a small ResNet-style stem from torch.fx, all of it on the device."""
    torch = pytest.importorskip("torch")
    import esgraph.torch as esg_torch
    from torch import nn

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)).eval()
    x = torch.randn(2, 3, 16, 16)
    graph = esg_torch.from_module(net, (x,))
    with torch.no_grad():
        want = net(x).numpy()
    got = esgraph.compile(graph, backend="ascend-sim").run([x.numpy()])[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_half_precision_models_run_on_aclnn_too():
    """f16 through matmul, softmax, layer norm, transpose and a mean, with generated kernels in
    between: values agree to a few f16 ulps (the device rounds each instruction, the CPU each op)."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal((4, 8, 32)).astype(np.float16)
    w = (rng.standard_normal((32, 16)) * 0.2).astype(np.float16)
    with esgraph.GraphBuilder("half") as b:
        h = ops.matmul(b.input("x", esgraph.f16, [4, 8, 32]), b.input("w", esgraph.f16, [32, 16]))
        y = ops.layer_norm(ops.softmax(ops.gelu(h) * 2.0), axis=-1)
        g = b.build([y, ops.reduce_mean(ops.transpose(y, perm=[0, 2, 1]), axes=[-1])])
    cpu, sim = both(g, [x, w])
    for c, s in zip(cpu, sim):
        assert s.dtype == np.float16
        np.testing.assert_allclose(s.astype(np.float32), c.astype(np.float32), rtol=4e-3, atol=8e-3)


IMPORTED = ["transformer", "lstm", "gru"]


@pytest.mark.parametrize("route", ["fx", "onnx"])
@pytest.mark.parametrize("model", IMPORTED)
def test_imported_models_run_on_the_device(model, route, tmp_path):
    """Real torch.nn models, imported both ways, run entirely on ascend-sim and match PyTorch:
    attention with its masks and norms, unrolled recurrences (splits become slices; groups that
    would re-enter themselves become single ops)."""
    torch = pytest.importorskip("torch")
    import warnings

    import esgraph.onnx as esg_onnx
    import esgraph.torch as esg_torch
    from torch import nn

    torch.manual_seed(0)
    net, x = {"transformer": (nn.TransformerEncoderLayer(64, 4, 128, batch_first=True), torch.randn(2, 8, 64)),
              "lstm": (nn.LSTM(16, 32, num_layers=2, batch_first=True), torch.randn(2, 5, 16)),
              "gru": (nn.GRU(16, 32, batch_first=True), torch.randn(2, 5, 16))}[model]
    net.eval()
    if route == "fx":
        graph = esg_torch.from_module(net, (x,))
    else:
        path = str(tmp_path / "m.onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(net, (x,), path, opset_version=14)
        graph = esg_onnx.load(path)
    with torch.no_grad():
        want = net(x)
    want = (want[0] if isinstance(want, tuple) else want).numpy()
    got = esgraph.compile(graph, backend="ascend-sim").run([x.numpy()])[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_masks_rows_and_scales_of_other_types():
    """A causal bool mask [S, S] over scores [B, H, S, S]; a bf16 bias row and an f16 row in a
    group that computes f32; a bf16 softmax with a scale: the kernels read only f32 rows in
    place, the rest is expanded (bools too) or converted; the scale takes x's own type."""
    rng = np.random.default_rng(13)
    scores = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    causal = np.tril(np.ones((8, 8), bool))
    with esgraph.GraphBuilder("causal") as b:
        s_, m = b.input("s", esgraph.f32, [2, 3, 8, 8]), b.input("m", esgraph.bool_, [8, 8])
        g = b.build([ops.softmax(ops.where(m, s_, -1e9))])
    check_same(g, [scores, causal])

    def bits(a):  # bf16 as the upper half of an f32
        return (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    x, bias, half_row = rng.standard_normal((4, 6, 16)), rng.standard_normal(16), rng.standard_normal(16).astype(np.float16)
    with esgraph.GraphBuilder("rows") as b:
        xb, bb = b.input("x", esgraph.bf16, [4, 6, 16]), b.input("b", esgraph.bf16, [16])
        hr = b.input("h", esgraph.f16, [16])
        g = b.build([ops.softmax(xb + bb, scale=0.125), ops.cast(xb, esgraph.f32) * ops.cast(hr, esgraph.f32)])
    check_same(g, [bits(x), bits(bias), half_row])


def test_groups_with_several_outputs_and_views():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 30)).astype(np.float32)
    g = graph_of(lambda a: (ops.reshape(ops.exp(a), [30, 16]), ops.exp(a) * 2.0, ops.squeeze(ops.unsqueeze(a + 1.0, [0]), axes=[0])),
                 x.shape)
    check_same(g, [x])


def test_symbolic_sizes_compile_once_per_shape():
    with esgraph.GraphBuilder("sym") as b:
        x = b.input("x", esgraph.f32, ["N", 8])
        g = b.build([ops.silu(x) + 1.0])
    model = esgraph.compile(g, backend="ascend-sim")
    for n in (1, 5, 300):
        x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
        np.testing.assert_allclose(model(x), esgraph.compile(g)(x), rtol=RTOL, atol=ATOL)


def test_a_size_class_shares_one_device_and_one_captured_model(acl_log):
    """Sizes of one class (a range) bind one symbolic plan: kernels and copies take their sizes
    from the tilings written before a run, so the class has one allocation, one kernel load each
    and one captured model, replayed at every size; a run after another size writes its tilings
    first, a run after the same size does not."""
    rng = np.random.default_rng(21)
    bias = rng.standard_normal(32).astype(np.float32)
    with esgraph.GraphBuilder("class") as b:
        x = b.input("x", esgraph.f32, ["N", 32])
        g = b.build([ops.softmax(ops.tanh(x) + bias), ops.reshape(ops.exp(x), [-1])])
    model = esgraph.compile(g, backend="ascend-sim", shapes={"N": (1, 64)})
    cpu = esgraph.compile(g)

    def run(*sizes):
        for n in sizes:
            xs = rng.standard_normal((n, 32)).astype(np.float32)
            for got, want in zip(model.run([xs]), cpu.run([xs])):
                np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    run(3, 64, 17, 17, 3)
    log = acl_log()
    assert model.stats()["bindings"] == 3 and model.stats()["captured"] == 1
    assert len(calls(log, "aclrtMallocAlign32")) == 1 and len(calls(log, "aclrtMallocHost")) == 1  # and its staging
    assert len(calls(log, "aclmdlRICaptureBegin")) == 1 and len(calls(log, "aclmdlRIExecuteAsync")) == 5
    assert len(calls(log, "aclrtBinaryLoadFromFile")) == model.stats()["device_kernels"]
    # Per run: the input in and two outputs out, and the tilings when the size changed (3 of 5 runs).
    copies = [line.split(" ")[1] for line in calls(log, "aclrtMemcpyAsync")]
    assert copies.count("H2D") == 5 + 3 and copies.count("D2H") == 5 * 2
    # One allocation laid out for the class's largest sizes, shared by its bindings that lower
    # alike; one captured model for the class, replayed at every size in it.
    assert model.stats()["device_memory_shared"] == 1
    assert model.stats()["capture_scope"] == "size class"
    # At N = 1 the bias is read as the group's own elements, not as a resident row: another
    # kernel, so a device of its own, and the class's stays as it was for its other sizes.
    run(1, 17, 1, 9)  # 9, new after 1: the class's device again, not a third
    log = acl_log()
    assert len(calls(log, "aclrtMallocAlign32")) == 2 and len(calls(log, "aclmdlRICaptureBegin")) == 2
    del model
    log = acl_log()
    for create, destroy in (("aclrtMallocAlign32", "aclrtFree"), ("aclmdlRICaptureEnd", "aclmdlRIDestroy"),
                            ("aclrtBinaryLoadFromFile", "aclrtBinaryUnLoad"), ("aclrtCreateStream", "aclrtDestroyStream"),
                            ("aclrtMallocHost", "aclrtFreeHost")):
        assert len(calls(log, create)) == len(calls(log, destroy)), create


def test_aclnn_ops_capture_per_size_on_the_class_device(acl_log):
    """aclnn ops are planned for their sizes: each size captures its own model (and plans its
    workspace), over the class's one allocation and its kernels."""
    rng = np.random.default_rng(22)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    with esgraph.GraphBuilder("mm") as b:
        x = b.input("x", esgraph.f32, ["N", 16])
        g = b.build([ops.relu(x @ w) * 2.0])
    model = esgraph.compile(g, backend="ascend-sim", shapes={"N": (1, 32)})
    for n in (5, 32, 5, 9):
        xs = rng.standard_normal((n, 16)).astype(np.float32)
        np.testing.assert_allclose(model(xs), np.maximum(xs @ w, 0) * 2.0, rtol=RTOL, atol=ATOL)
    log = acl_log()
    assert model.stats()["bindings"] == 3 and model.stats()["captured"] == 1
    assert len(calls(log, "aclmdlRICaptureBegin")) == 3
    kernels = model.stats()["device_kernels"]
    assert kernels >= 1 and len(calls(log, "aclrtBinaryLoadFromFile")) == kernels
    assert len(calls(log, "aclrtMallocAlign32")) == 1 + 3  # the class's allocation, and each size's matmul workspace
    assert model.stats()["capture_scope"] == "size"  # its aclnn ops are planned for their sizes


def test_sizes_bound_on_two_threads_at_once_build_while_the_other_captures():
    """Each new size class makes a device (synchronous uploads) and captures it: a capture is
    thread-local, so the other thread's uploads go on meanwhile."""
    import threading
    with esgraph.GraphBuilder("threads") as b:
        x = b.input("x", esgraph.f32, ["N", 8])
        g = b.build([ops.softmax(ops.exp(x) * 2.0)])
    model, cpu = esgraph.compile(g, backend="ascend-sim"), esgraph.compile(g)
    errors = []

    def run(sizes):
        try:
            for n in sizes:
                xs = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
                np.testing.assert_allclose(model(xs), cpu(xs), rtol=RTOL, atol=ATOL)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=run, args=(sizes,)) for sizes in ((1, 3, 5, 9, 17, 33), (2, 4, 7, 12, 20, 40))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@pytest.mark.parametrize("soc, refused", [
    ("Ascend910B3", None), ("Ascend910_9391", None),
    ("Ascend310P3", r"the device is an Ascend310P3, but esgraph's kernels are built for dav-c220-vec .*ESG_ASCEND_ARCH=dav-m200"),
    ("Ascend910A", r"the device is an Ascend910A, .*builds no kernels for its core version"),
    ("Ascend910B", r"the device is an Ascend910B, "),  # the first 910's B variant: no digit
])
def test_generated_kernels_run_only_on_the_soc_they_are_built_for(soc, refused, monkeypatch):
    """aclrtGetSocName's SoC against the kernels' core version: another is refused by name, with
    what would be needed, before anything is built; a model of library calls runs on any."""
    monkeypatch.setenv("ACLSIM_SOC", soc)
    x = np.random.default_rng(23).standard_normal((4, 6)).astype(np.float32)
    elementwise = graph_of(lambda a: ops.exp(a) + 1.0, x.shape)
    if refused:
        with pytest.raises(esgraph.UnsupportedError, match=refused):
            esgraph.compile(elementwise, backend="ascend-sim")
    else:
        model = esgraph.compile(elementwise, backend="ascend-sim")
        np.testing.assert_allclose(model(x), np.exp(x) + 1.0, rtol=RTOL, atol=ATOL)
        assert (model.stats()["device"], model.stats()["soc"]) == (0, soc)
    w = np.random.default_rng(24).standard_normal((6, 3)).astype(np.float32)
    library_only = esgraph.compile(graph_of(lambda a: a @ w, x.shape), backend="ascend-sim")
    np.testing.assert_allclose(library_only(x), x @ w, rtol=RTOL, atol=ATOL)


def test_empty_tensors_launch_nothing(acl_log):
    x = np.zeros((0, 5), np.float32)
    check_same(graph_of(lambda a: ops.exp(a) + 1.0, x.shape), [x])
    assert not any(line.startswith("aclrtLaunchKernelWithConfig") for line in acl_log())


# ---- ops through CANN's operator library (aclnn) -----------------------------------------------------
def test_aclnn_ops_match_the_cpu():
    rng = np.random.default_rng(6)

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    a, b, batch = r(6, 5), r(5, 7), r(3, 6, 5)
    check_same(graph_of(lambda x, y: ops.matmul(x, y), a.shape, b.shape), [a, b])
    check_same(graph_of(lambda x, y: ops.matmul(x, y, transpose_a=True, transpose_b=True), (5, 6), (7, 5)), [a.T.copy(), b.T.copy()])
    check_same(graph_of(lambda x, y: ops.matmul(x, y), batch.shape, b.shape), [batch, b])  # batch broadcast
    x = r(4, 6, 10)
    for axis in (-1, 1, 0):
        check_same(graph_of(lambda t: ops.softmax(t, axis=axis), x.shape), [x])
    check_same(graph_of(lambda t: ops.layer_norm(t), x.shape), [x])
    check_same(graph_of(lambda t, s, c: ops.layer_norm(t, scale=s, bias=c, axis=1, epsilon=1e-3), x.shape, (6, 10), (6, 10)),
               [x, r(6, 10), r(6, 10)])
    for axes, keep in (([], False), ([1], True), ([-1, 0], False)):
        check_same(graph_of(lambda t: ops.reduce_sum(t, axes=axes, keepdims=keep), x.shape), [x])
    for perm in ([2, 0, 1], [0, 2, 1], []):
        check_same(graph_of(lambda t: ops.transpose(t, perm=perm), x.shape), [x])
    check_same(graph_of(lambda t, u: ops.concat([t, u, t], axis=1), x.shape, (4, 2, 10)), [x, r(4, 2, 10)])
    image, w, wg, bias = r(2, 4, 9, 11), r(6, 4, 3, 3), r(6, 2, 3, 3), r(6)
    check_same(graph_of(lambda t, k: ops.conv2d(t, k), image.shape, w.shape), [image, w])
    check_same(graph_of(lambda t, k, c: ops.relu(ops.conv2d(t, k, bias=c, strides=[2, 1], pads=[1, 2, 1, 2], dilations=[1, 2],
                                                             groups=2)), image.shape, wg.shape, bias.shape), [image, wg, bias])
    # More padding on one side (TF's SAME at stride 2, one-sided): an explicit pad, then a
    # symmetric convolution.
    for pads, strides in (([0, 0, 1, 1], [2, 2]), ([2, 1, 0, 3], [1, 1])):
        check_same(graph_of(lambda t, k: ops.conv2d(t, k, pads=pads, strides=strides), image.shape, w.shape), [image, w])


def test_pad_runs_on_aclnn(acl_log):
    """pad in constant mode as aclnnConstantPadNd (pairs from the last axis on, the value as a
    scalar); reflect and edge are refused with the reason."""
    x = np.random.default_rng(12).standard_normal((2, 3, 5, 4)).astype(np.float32)
    for kw in (dict(pads=[0, 0, 1, 2, 0, 0, 3, 0]), dict(pads=[1, 0, 0, 1, 0, 2, 2, 0], value=-1.5)):
        check_same(graph_of(lambda a: ops.pad(a, **kw) * 2.0, x.shape), [x])
    half = x.astype(np.float16)
    with esgraph.GraphBuilder("f16") as b:
        y = ops.pad(b.input("x", esgraph.f16, list(x.shape)), [0, 1, 0, 0, 0, 0, 2, 1], value=0.5)
    g = b.build([y])
    np.testing.assert_array_equal(esgraph.compile(g, backend="ascend-sim").run([half])[0], esgraph.compile(g).run([half])[0])
    assert len(calls(acl_log(), "aclnnConstantPadNdGetWorkspaceSize")) == 3


@pytest.mark.parametrize("mode, aclnn", [("reflect", "aclnnReflectionPad2d"), ("edge", "aclnnReplicationPad2d")])
def test_border_pads_run_on_aclnn(mode, aclnn, acl_log):
    """reflect and edge pads of the last two axes (of a tensor of any rank, viewed as 3-D) as
    CANN's 2-D border pads; other axes, and pads of an axis's length or more, are refused."""
    rng = np.random.default_rng(14)
    for shape, pads in (((2, 3, 5, 4), [0, 0, 1, 2, 0, 0, 3, 0]), ((6,), [2, 5]), ((4, 5), [3, 0, 1, 4]),
                        ((2, 2, 2, 4, 5), [0, 0, 0, 2, 1, 0, 0, 0, 3, 4])):
        x = rng.standard_normal(shape).astype(np.float32)
        check_same(graph_of(lambda a: ops.pad(a, pads, mode=mode) + 1.0, x.shape), [x])
    assert len(calls(acl_log(), aclnn + "GetWorkspaceSize")) == 4
    with pytest.raises(esgraph.UnsupportedError, match=r"pad x1 \(reflect or edge padding of other axes than the last two"):
        esgraph.compile(graph_of(lambda a: ops.pad(a, [1, 0, 0, 0, 0, 0], mode=mode), (3, 4, 5)), backend="ascend-sim")
    with pytest.raises(esgraph.UnsupportedError, match=r"pad x1 \(reflect or edge padding of an axis by its length or more"):
        esgraph.compile(graph_of(lambda a: ops.pad(a, [0, 4, 0, 0], mode="edge"), (3, 4)), backend="ascend-sim")
    with pytest.raises(esgraph.UnsupportedError, match=r"pad x1 \(reflect or edge padding of a rank-0 tensor"):
        esgraph.compile(graph_of(lambda a: ops.pad(a, [], mode=mode) * 2.0, ()), backend="ascend-sim")


def test_large_generators_run_on_aclnn(acl_log):
    """fill and range fold into constants up to 65,536 elements; larger ones are made on the
    device, by aclnnInplaceFillScalar and aclnnArange."""
    n = 70000
    x = np.random.default_rng(16).standard_normal(n).astype(np.float32)
    with esgraph.GraphBuilder("generators") as b:
        xi = b.input("x", esgraph.f32, [n])
        g = b.build([xi * ops.fill([n], value=2.5), ops.range(n * 0.5, start=-3.0, step=0.5),
                     ops.range(n, dtype=esgraph.i32) + ops.fill([n], value=7, dtype=esgraph.i32)])
    check_same(g, [x])
    log = acl_log()
    assert len(calls(log, "aclnnInplaceFillScalarGetWorkspaceSize")) == 2 and len(calls(log, "aclnnArangeGetWorkspaceSize")) == 2


@pytest.mark.parametrize("reduction", ["none", "add", "mul"])
def test_scatters_run_on_aclnn(reduction, acl_log):
    """scatter_elements as aclnnScatter (its reduction as CANN's reduce), scatter_nd as
    aclnnScatterNd (replacing only); negative indices, from an input or a constant, are wrapped
    first, as for gather."""
    rng = np.random.default_rng(15)
    data = rng.standard_normal((4, 6)).astype(np.float32)
    updates = rng.standard_normal((3, 6)).astype(np.float32)
    # Distinct positions per column: which of several updates wins is undocumented for CANN.
    indices = np.array([[0, -1, 2, 3, -4, 1], [1, 0, -1, 2, 3, 3], [3, 2, 0, -1, 1, 0]], np.int64)
    with esgraph.GraphBuilder("elements") as b:
        d, i, u = b.input("d", esgraph.f32, [4, 6]), b.input("i", esgraph.i64, [3, 6]), b.input("u", esgraph.f32, [3, 6])
        g = b.build([ops.scatter_elements(d, i, u, axis=0, reduction=reduction) * 2.0])
    check_same(g, [data, indices, updates])
    with esgraph.GraphBuilder("constant") as b:
        d, u = b.input("d", esgraph.f32, [4, 6]), b.input("u", esgraph.f32, [4, 2])
        g = b.build([ops.scatter_elements(d, esgraph.constant(np.array([[-1, 0]] * 4, np.int32)), u, axis=-1, reduction=reduction)])
    check_same(g, [data, rng.standard_normal((4, 2)).astype(np.float32)])
    assert len(calls(acl_log(), "aclnnScatterGetWorkspaceSize")) == 2
    with esgraph.GraphBuilder("nd") as b:
        d, i, u = b.input("d", esgraph.f32, [4, 6]), b.input("i", esgraph.i64, [2, 1]), b.input("u", esgraph.f32, [2, 6])
        g = b.build([ops.scatter_nd(d, i, u, reduction=reduction)])
    if reduction != "none":
        with pytest.raises(esgraph.UnsupportedError, match=r"scatter_nd x1 \(a reduction \(aclnnScatterNd replaces\)"):
            esgraph.compile(g, backend="ascend-sim")
        return
    check_same(g, [data, np.array([[-1], [1]], np.int64), updates[:2].copy()])
    assert len(calls(acl_log(), "aclnnScatterNdGetWorkspaceSize")) == 1


def test_an_mlp_matches_the_cpu():
    rng = np.random.default_rng(7)
    weights = [(rng.standard_normal((m, n)) * 0.1).astype(np.float32) for m, n in ((64, 128), (128, 128), (128, 10))]
    biases = [(rng.standard_normal(n) * 0.1).astype(np.float32) for n in (128, 128, 10)]

    def mlp(x):
        for i, (w, bias) in enumerate(zip(weights, biases)):
            x = x @ w + bias
            x = ops.relu(x) if i < 2 else ops.softmax(x)
        return x
    x = rng.standard_normal((32, 64)).astype(np.float32)
    check_same(graph_of(mlp, x.shape), [x])


def test_the_transformer_sample_matches_the_cpu(monkeypatch):
    # samples/transformer_block.py, as its authors wrote it: attention, layer norm, GELU.
    import runpy
    monkeypatch.setattr("sys.argv", ["transformer_block.py"])
    sample = runpy.run_path(str(Path(__file__).resolve().parents[2] / "samples/transformer_block.py"))
    graph = sample["graph"]
    x = np.random.default_rng(8).standard_normal((2, 128, 512)).astype(np.float32)
    cpu = esgraph.compile(graph, shapes={"batch": 2})(x)
    model = esgraph.compile(graph, backend="ascend-sim", shapes={"batch": 2})
    np.testing.assert_allclose(model(x), cpu, rtol=1e-4, atol=1e-4)
    stats = model.stats()
    functions = {c["function"] for c in stats["aclnn_calls"]}
    assert "aclnnMatmul" in functions and not {"aclnnLayerNorm", "aclnnSoftmax"} & functions
    rows = [k["ops"] for k in stats["kernels"] if k["rows"]]
    assert rows.count("layer_norm") == 1 and rows.count("softmax") == 1  # one binary each


def test_without_stream_capture_runs_replay_and_plan_again(acl_log, monkeypatch):
    monkeypatch.setenv("ACLSIM_NO_CAPTURE", "1")
    rng = np.random.default_rng(9)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    g = graph_of(lambda t: ops.softmax(ops.relu(t @ w)), x.shape)
    model = esgraph.compile(g, backend="ascend-sim")
    assert model.stats()["captured"] == 0
    built = len(acl_log())
    want = esgraph.compile(g)(x)
    for _ in range(3):
        np.testing.assert_allclose(model(x), want, rtol=RTOL, atol=ATOL)
    runs = acl_log()[built:]
    plans = [line for line in runs if line.startswith("aclnnMatmulGetWorkspaceSize")]
    assert len(plans) == 2  # the executors planned at build serve the first run; later runs plan anew
    assert len(calls(runs, "aclrtLaunchKernelWithConfig")) == 6 and len(calls(runs, "aclrtSynchronizeStream")) == 3  # relu, softmax
    log = acl_log()
    assert len(calls(log, "aclrtMallocAlign32")) == 2  # the arena, and matmul's workspace
    assert model.stats()["workspace_bytes"] == 1024  # a second allocation


# ---- the launch protocol, from the call log --------------------------------------------------------
def calls(lines, name):
    """The successful calls of `name` in the log."""
    return [line for line in lines if line.split(" ")[0] == name and " FAILED " not in line]


def test_protocol_of_a_single_stream_model(acl_log):
    x = np.random.default_rng(4).standard_normal(5000).astype(np.float32)
    g = graph_of(lambda a: ops.tanh(ops.exp(a) - 1.0), x.shape)
    model = esgraph.compile(g, backend="ascend-sim")
    built = len(acl_log())
    for _ in range(3):
        np.testing.assert_allclose(model(x), np.tanh(np.exp(x) - 1.0), rtol=RTOL, atol=ATOL)
    log = acl_log()
    runs = log[built:]
    assert len(calls(log, "aclrtMallocAlign32")) == 1  # one device allocation per model
    # Model sinking: each run is inputs in, one replay of the captured launches, outputs out,
    # and the only host wait at its end.
    assert [line.split(" ")[0] for line in runs] == ["aclrtSetCurrentContext", "aclrtMemcpyAsync", "aclmdlRIExecuteAsync",
                                                     "aclrtMemcpyAsync", "aclrtSynchronizeStream"] * 3
    assert model.stats()["captured"] == 1
    del model
    log = acl_log()
    for create, destroy in (("aclrtCreateStream", "aclrtDestroyStream"), ("aclrtMallocAlign32", "aclrtFree"),
                            ("aclrtCreateContext", "aclrtDestroyContext"), ("aclrtSetDevice", "aclrtResetDevice"),
                            ("aclrtBinaryLoadFromFile", "aclrtBinaryUnLoad"), ("aclmdlRICaptureEnd", "aclmdlRIDestroy"),
                            ("aclrtMallocHost", "aclrtFreeHost")):
        assert len(calls(log, create)) == len(calls(log, destroy)) >= 1, create
    assert not any("FAILED" in line for line in log)


def two_stream_model():
    x = np.random.default_rng(5).standard_normal((4, 256)).astype(np.float32)
    g = graph_of(lambda a, b: (ops.tanh(ops.exp(a) * 2.0), ops.sigmoid(ops.log(ops.abs(b) + 1.0))), x.shape, x.shape)
    want = esgraph.compile(g, streams=2).run([x, x])
    model = esgraph.compile(g, backend="ascend-sim", streams=2, fusion=False)
    for _ in range(3):
        for c, s in zip(want, model.run([x, x])):
            np.testing.assert_allclose(s, c, rtol=RTOL, atol=ATOL)
    assert model.stats()["streams"] == 2
    return model


def check_event_order(lines):
    """Every wait is for an event already recorded."""
    recorded = set()
    for line in lines:
        event = re.search(r"event#\d+", line)
        if line.startswith("aclrtRecordEvent"):
            recorded.add(event.group(0))
        elif line.startswith("aclrtStreamWaitEvent"):
            assert event.group(0) in recorded, line


def test_protocol_of_a_two_stream_model(acl_log):
    """Model sinking across streams: stream 1 joins the capture of stream 0 by waiting on the
    event stream 0 records first, and merges back at the end (CANN's cross-stream capture, its
    events made with ACL_EVENT_SYNC); a run is one replay and one wait on stream 0."""
    x = np.random.default_rng(5).standard_normal((4, 256)).astype(np.float32)

    def branches(a):
        parts = [ops.exp(ops.slice(a, [i], [i + 1], axes=[0]) * float(i + 1)) for i in range(4)]
        return ops.concat([ops.tanh(p) for p in parts], axis=0)
    # The slices and the concat on aclnn, the branches' kernels generated, over two streams.
    check_same(graph_of(branches, x.shape), [x], streams=2)
    before = len(acl_log())
    model = two_stream_model()
    assert (model.stats()["captured"], model.stats()["streams"]) == (1, 2)
    log = acl_log()[before:]
    assert calls(log, "aclrtCreateEventExWithFlag") and not calls(log, "aclrtCreateEvent")
    assert all(line.endswith("flag=1") for line in calls(log, "aclrtCreateEventExWithFlag"))
    begin = next(i for i, line in enumerate(log) if line.startswith("aclmdlRICaptureBegin"))
    end = next(i for i, line in enumerate(log) if line.startswith("aclmdlRICaptureEnd"))
    captured = log[begin:end + 1]
    assert captured[-1].endswith("streams=2")
    streams = {re.search(r"stream#\d+", line).group(0) for line in calls(captured, "aclrtLaunchKernelWithConfig")}
    assert len(streams) == 2
    assert sum("(joins the capture)" in line for line in captured) == 1
    check_event_order(captured)
    runs = log[end + 1:]
    assert [line.split(" ")[0] for line in runs] == ["aclrtSetCurrentContext", "aclrtMemcpyAsync", "aclrtMemcpyAsync", "aclmdlRIExecuteAsync",
                                                     "aclrtMemcpyAsync", "aclrtMemcpyAsync", "aclrtSynchronizeStream"] * 3


def test_protocol_of_a_replayed_two_stream_model(acl_log, monkeypatch):
    """Without capture the launch list is replayed on both streams: events recorded before they
    are waited on, every stream synchronized once, after the outputs' copies are queued."""
    monkeypatch.setenv("ACLSIM_NO_CAPTURE", "1")
    model = two_stream_model()  # kept alive: its teardown would end the log
    assert model.stats()["captured"] == 0
    log = acl_log()
    run_start = max(i for i, line in enumerate(log) if line.startswith("aclrtSetCurrentContext"))
    run = log[run_start:]
    stream_of_launch = [re.search(r"stream#\d+", line).group(0) for line in calls(run, "aclrtLaunchKernelWithConfig")]
    assert len(set(stream_of_launch)) == 2
    check_event_order(run)
    names = [line.split(" ")[0] for line in run]
    first_sync = names.index("aclrtSynchronizeStream")
    assert set(names[first_sync:]) == {"aclrtSynchronizeStream"} and len(names[first_sync:]) == 2
    assert "aclrtMemcpyAsync" in names[:first_sync] and names[first_sync - 1] == "aclrtMemcpyAsync"


def ladder(a, b, steps=6):
    """Two chains that read each other at every step: a cross-stream event per rung."""
    for _ in range(steps):
        a, b = ops.tanh(a * 0.5) + ops.sigmoid(b), ops.sigmoid(b) * ops.abs(a)
    return a, b


def test_events_beyond_the_device_limit_are_reset_and_reused(acl_log, monkeypatch):
    x, y = np.random.default_rng(10).standard_normal((2, 300)).astype(np.float32)
    g = graph_of(ladder, x.shape, y.shape)
    want = esgraph.compile(g, streams=2, fusion=False).run([x, y])
    plenty = esgraph.compile(g, backend="ascend-sim", streams=2, fusion=False)
    events = plenty.stats()["device_events"]
    assert events >= 4
    monkeypatch.setenv("ESG_ASCEND_MAX_EVENTS", "4")  # 2 for the streams' start and join, 2 to share
    before = len(acl_log())
    few = esgraph.compile(g, backend="ascend-sim", streams=2, fusion=False)
    assert few.stats()["device_events"] == 2
    assert few.stats()["captured"] == 0  # events reused beyond the limit: CANN documents no reset under capture
    for _ in range(2):
        for got, w in zip(few.run([x, y]), want):
            np.testing.assert_allclose(got, w, rtol=RTOL, atol=ATOL)
    log = acl_log()[before:]
    assert len(calls(log, "aclrtCreateEvent")) == 4
    # A reused event is reset by the stream that waited for it, before that stream records it again.
    last_reset = {}
    for line in log:
        if line.startswith("aclrtSetCurrentContext"):  # a run starts: the last one ended with every stream synchronized
            last_reset = {}
        event = re.search(r"event#\d+", line)
        stream = re.search(r"stream#\d+", line)
        if line.startswith("aclrtResetEvent"):
            last_reset[event.group(0)] = stream.group(0)
        elif line.startswith("aclrtRecordEvent") and event.group(0) in last_reset:
            assert last_reset.pop(event.group(0)) == stream.group(0), line
    assert calls(log, "aclrtResetEvent")
    monkeypatch.setenv("ESG_ASCEND_MAX_EVENTS", "3")
    with pytest.raises(esgraph.UnsupportedError, match="needs more than 1 events at once"):
        esgraph.compile(g, backend="ascend-sim", streams=2, fusion=False)


def test_a_recompile_hits_the_kernel_cache():
    g = graph_of(lambda a: ops.softplus(a) * 3.0 + ops.rsqrt(ops.abs(a) + 1.0), (10,))
    first = esgraph.compile(g, backend="ascend-sim").stats()
    again = esgraph.compile(g, backend="ascend-sim").stats()
    assert (first["device_kernels"], first["device_kernels_cached"]) == (1, 0)
    assert (again["device_kernels"], again["device_kernels_cached"]) == (1, 1)


# ---- errors ------------------------------------------------------------------------------------------
def test_real_ascend_without_cann_says_where_it_looked(monkeypatch):
    monkeypatch.setenv("ASCEND_HOME_PATH", "/nonexistent/cann")
    g = graph_of(lambda a: a + 1.0, (3,))
    with pytest.raises(esgraph.BackendError) as info:
        esgraph.compile(g, backend="ascend")
    message = str(info.value)
    assert "CANN's kernel compiler (ccec or bisheng)" in message or "cannot load AscendCL" in message
    assert "/nonexistent/cann" in message


def test_a_missing_library_and_a_missing_symbol(monkeypatch, tmp_path):
    g = graph_of(lambda a: a * 2.0, (3,))
    monkeypatch.setenv("ESG_ASCEND_SIM_LIBRARY", str(tmp_path / "libascendcl.so"))
    with pytest.raises(esgraph.BackendError, match=r"cannot load AscendCL .*libascendcl.so"):
        esgraph.compile(g, backend="ascend-sim")
    libz = next(p for p in ("/usr/lib/x86_64-linux-gnu/libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1") if os.path.exists(p))
    monkeypatch.setenv("ESG_ASCEND_SIM_LIBRARY", libz)
    with pytest.raises(esgraph.BackendError, match=r"libz.so.1 lacks aclInit, aclFinalize, .*aclGetRecentErrMsg"):
        esgraph.compile(g, backend="ascend-sim")


def test_an_operator_library_without_an_op_refuses_only_the_models_that_use_it(monkeypatch, tmp_path):
    """CANN versions differ in their aclnn ops: a libopapi.so without aclnnTopk (built by
    tests/ascend_sim) still runs a matmul; a model with top_k is refused by name."""
    sim = Path(esgraph.__file__).resolve().parents[2] / "ascend_sim"
    for name, where in (("libascendcl.so", sim), ("libnnopbase.so", sim), ("libopapi.so", sim / "without_topk")):
        (tmp_path / name).symlink_to(where / name)
    monkeypatch.setenv("ESG_ASCEND_SIM_LIBRARY", str(tmp_path / "libascendcl.so"))
    a = np.random.default_rng(15).standard_normal((4, 5)).astype(np.float32)
    check_same(graph_of(lambda x: ops.matmul(x, x, transpose_b=True) + 1.0, a.shape), [a])
    with pytest.raises(esgraph.UnsupportedError, match=r"top_k runs as aclnnTopk, and CANN's operator library in .* lacks "
                                                       r"aclnnTopkGetWorkspaceSize and aclnnTopk"):
        esgraph.compile(graph_of(lambda x: ops.top_k(x, k=2)[0] * 2.0, a.shape), backend="ascend-sim")


def test_an_operator_library_split_by_repository_is_searched_function_by_function(monkeypatch, tmp_path):
    """From CANN 8.5 the aclnn ops come in one library per operator repository (libopapi_math.so,
    libopapi_nn.so, ...) and no libopapi.so: each function is taken from the first that has it.
    Here libopapi_math.so lacks aclnnTopk, which libopapi_nn.so has."""
    sim = Path(esgraph.__file__).resolve().parents[2] / "ascend_sim"
    for name, where in (("libascendcl.so", sim / "libascendcl.so"), ("libnnopbase.so", sim / "libnnopbase.so"),
                        ("libopapi_math.so", sim / "without_topk" / "libopapi.so"), ("libopapi_nn.so", sim / "libopapi.so")):
        (tmp_path / name).symlink_to(where)
    monkeypatch.setenv("ESG_ASCEND_SIM_LIBRARY", str(tmp_path / "libascendcl.so"))
    a = np.random.default_rng(25).standard_normal((4, 5)).astype(np.float32)
    check_same(graph_of(lambda x: ops.matmul(x, x, transpose_b=True) + 1.0, a.shape), [a])
    check_same(graph_of(lambda x: ops.top_k(x, k=2)[0] * 2.0, a.shape), [a])


@pytest.mark.parametrize("call", ["aclrtMallocAlign32", "aclrtMallocHost", "aclrtCreateStream", "aclrtBinaryLoadFromFile"])
def test_a_failing_acl_call_is_an_error_and_leaves_nothing_behind(call, acl_log, monkeypatch):
    g = graph_of(lambda a: ops.exp(a) + 1.0, (100,))
    esgraph.compile(g, backend="ascend-sim")  # the kernel is built: the failure below is the device's
    monkeypatch.setenv("ACLSIM_FAIL", call)
    before = len(acl_log())
    with pytest.raises(esgraph.BackendError, match=rf"ascend: {call} failed with AscendCL error 500000: .*injected"):
        esgraph.compile(g, backend="ascend-sim")
    log = acl_log()[before:]
    for create, destroy in (("aclrtCreateStream", "aclrtDestroyStream"), ("aclrtMallocAlign32", "aclrtFree"),
                            ("aclrtCreateContext", "aclrtDestroyContext"), ("aclrtSetDevice", "aclrtResetDevice"),
                            ("aclrtMallocHost", "aclrtFreeHost")):
        assert len(calls(log, create)) == len(calls(log, destroy)), (call, create)
    monkeypatch.delenv("ACLSIM_FAIL")
    x = np.ones(100, np.float32)
    np.testing.assert_allclose(esgraph.compile(g, backend="ascend-sim")(x), np.exp(x) + 1.0, rtol=RTOL)


def test_out_of_device_memory(monkeypatch):
    monkeypatch.setenv("ACLSIM_DEVICE_MEMORY", "1024")
    g = graph_of(lambda a: ops.exp(a), (100000,))
    with pytest.raises(esgraph.BackendError, match="aclrtMallocAlign32 failed with AscendCL error 200000: .*out of device memory"):
        esgraph.compile(g, backend="ascend-sim")


def host_fallback_graph():
    """An if, integer division, f64 arithmetic and atanh (inside a group): none has a device lowering."""
    with esgraph.GraphBuilder("host") as b:
        p = b.input("p", esgraph.bool_, [])
        x, k, d = b.input("x", esgraph.f32, [4, 6]), b.input("k", esgraph.i32, [4, 6]), b.input("d", esgraph.i32, [4, 6])
        h = ops.exp(x) * 2.0
        branch = ops.if_(p, lambda: ops.tanh(h), lambda: -h)
        wide = ops.cast(ops.cast(x, esgraph.f64) * 3.0, esgraph.f32)
        return b.build([branch + ops.cast(k / d, esgraph.f32), ops.atanh(x * 0.5) + 1.0, wide * h])


def host_fallback_inputs(rng, take):
    return [np.array(take), (rng.standard_normal((4, 6)) * 0.5).astype(np.float32), rng.integers(-50, 50, (4, 6)).astype(np.int32),
            np.where(rng.random((4, 6)) > 0.5, 3, -7).astype(np.int32)]


@pytest.mark.parametrize("streams", [1, 2])
def test_host_fallback_runs_what_the_device_cannot(streams, acl_log):
    """With host_fallback, ops with no device lowering run on the host between synchronous copies
    (their stream synchronized first); the rest stays on the device, and the run is replayed, not
    captured. Values are the CPU's: integer division truncates, both branches of the if."""
    g = host_fallback_graph()
    rng = np.random.default_rng(18)
    model = esgraph.compile(g, backend="ascend-sim", host_fallback=True, streams=streams)
    built = len(acl_log())
    for take in (True, False, True):
        args = host_fallback_inputs(rng, take)
        for got, want in zip(model.run(args), esgraph.compile(g).run(args)):
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    stats = model.stats()
    assert (stats["host_launches"], stats["captured"]) == (6, 0)
    host = {h["op"]: (h["count"], h["reason"]) for h in stats["host_ops"]}  # each synchronizes its stream
    assert list(host) == ["cast", "div", "if", "mul", "the group mul atanh add"]
    assert [count for count, _ in host.values()] == [2, 1, 1, 1, 1]
    assert host["cast"][1].startswith("f64") and host["div"][1].startswith("integer division") and host["if"][1] == "no aclnn mapping"
    assert host["mul"][1].startswith("f64") and host["the group mul atanh add"][1].startswith("ascend: atanh")
    runs = acl_log()[built:]
    assert not calls(runs, "aclmdlRIExecuteAsync")
    assert len(calls(runs, "aclrtMemcpy")) >= 3 * 6 * 2  # each host launch copies its operands off and its results back, each run
    with pytest.raises(esgraph.UnsupportedError, match=r"no device lowering yet for cast x2 .*the option host_fallback runs the rest on the host"):
        esgraph.compile(g, backend="ascend-sim")


def test_bad_options_and_ops_without_a_lowering():
    g = graph_of(lambda a: a + 1.0, (3,))
    with pytest.raises(esgraph.InvalidArgumentError, match="backend 'tpu'; valid: 'cpu', 'ascend', 'ascend-sim'"):
        esgraph.compile(g, backend="tpu")
    with pytest.raises(esgraph.InvalidArgumentError, match="ai_cores -1"):
        esgraph.compile(g, backend="ascend-sim", ai_cores=-1)
    # Each backend takes the options it declares, by keyword or by name in backend_options.
    with pytest.raises(esgraph.InvalidArgumentError, match=r"backend 'cpu' has no option `ai_cores` \(it takes channel_block\)"):
        esgraph.compile(g, ai_cores=2)
    with pytest.raises(esgraph.InvalidArgumentError, match=r"no option `cores` \(it takes device, ai_cores, host_fallback\)"):
        esgraph.compile(g, backend="ascend-sim", backend_options={"cores": 2})
    with pytest.raises(esgraph.InvalidArgumentError, match=r"host_fallback 2 \(0 \.\. 1\)"):
        esgraph.compile(g, backend="ascend-sim", backend_options={"host_fallback": 2})
    narrow = graph_of(lambda a: ops.atanh(a) * 2.0, (3,))
    assert esgraph.compile(narrow, backend="ascend-sim", backend_options={"host_fallback": 1}).stats()["host_launches"] == 1
    with pytest.raises(esgraph.BackendError, match="device 3 does not exist"):
        esgraph.compile(g, backend="ascend-sim", device=3)
    # Integer values leave the generated kernels for CANN's library (test_integer_elementwise_ops…).
    check_same(graph_of(lambda a: ops.cast(ops.cast(a * 4.0, esgraph.i32), esgraph.f32), (3,)), [np.array([-1.3, 0.4, 2.6], np.float32)])
    with pytest.raises(esgraph.UnsupportedError, match=r"atanh: `atanh\(x\)`: Ascend C's Atanh is documented as invalid"):
        esgraph.compile(graph_of(lambda a: ops.atanh(a) * 2.0, (3,)), backend="ascend-sim")
    with pytest.raises(esgraph.UnsupportedError, match="profile: the Ascend backend records no per-launch times yet"):
        esgraph.compile(g, backend="ascend-sim").profile(np.ones(3, np.float32), path="/tmp/never.json")


def test_a_model_cut_before_a_sized_op_runs_its_stages_on_the_device():
    # The rows whose largest element passes 0.5: the nonzero runs on the host between the two
    # device programs; the second binds its symbolic plan to each count.
    def rows(x):
        keep = ops.squeeze(ops.nonzero(ops.reduce_max(x, axes=[1]) > 0.5), axes=[0])
        return ops.softmax(ops.gather(x, keep) * 2.0, axis=-1), keep
    graph = graph_of(rows, ["n", 8])
    sim = esgraph.compile(graph, backend="ascend-sim", host_fallback=True)
    for n in [3, 9, 5]:
        x = np.random.default_rng(n).random((n, 8)).astype(np.float32)
        cpu = esgraph.compile(graph).run([x])
        got = sim.run([x])
        np.testing.assert_array_equal(got[1], cpu[1])
        np.testing.assert_allclose(got[0], cpu[0], rtol=RTOL, atol=ATOL)
    stats = sim.stats()
    assert stats["stages"] == 2 and stats["sized_ops"] == 1 and stats["captured"] == 0


def esgraph_cli(*args, **env):
    return subprocess.run([sys.executable, "-m", "esgraph", *args], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **env))


def test_ascend_check_prints_the_smoke_set_against_the_cpu():
    """`python3 -m esgraph ascend-check`: the table a first user with hardware sends back (here on
    the simulated device), each case against the CPU; exit 1 when a case fails, 2 with what is
    missing when the device cannot start."""
    r = esgraph_cli("ascend-check", "--simulated")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ascend (simulated device): device 0 (Ascend910B1), CANN 8.5.0" in r.stdout
    for case in ("elementwise kernel, f32", "elementwise kernel, f16", "elementwise kernel, bf16", "row kernel, rows longer",
                 "matmul (aclnnMatmul)", "conv2d (aclnnConvolution, NCHW)", "gather with negative indices",
                 "two streams, captured", "host_fallback"):
        assert f"pass  {case}" in r.stdout
    assert r.stdout.endswith("9 of 9 passed\n")
    check = esgraph._C.ascend_check("ascend-sim")
    assert check["passed"] and [c["name"] for c in check["cases"]][-1].startswith("host_fallback")
    r = esgraph_cli("ascend-check", "--simulated", ACLSIM_SOC="Ascend910A")
    assert r.returncode == 1 and "FAIL  elementwise kernel, f32" in r.stdout and "builds no kernels for its core version" in r.stdout
    r = esgraph_cli("ascend-check", "--simulated", ESG_ASCEND_SIM_LIBRARY="/nonexistent/libascendcl.so")
    assert r.returncode == 2 and "the ascend-sim backend cannot start" in r.stderr and "cannot load AscendCL" in r.stderr


def test_max_memory_bytes_caps_the_device_memory():
    """max_memory_bytes caps what the device allocates, constants included (the CPU's check counts
    working memory and outputs), before anything is allocated: a LimitError naming it."""
    w = np.random.default_rng(27).standard_normal((256, 512)).astype(np.float32)  # 512 KiB of constant
    g = graph_of(lambda x: ops.tanh(ops.matmul(x, w)), (4, 256))
    esgraph.compile(g, max_memory_bytes=256 << 10)  # on the CPU the weight is not working memory
    with pytest.raises(esgraph.LimitError, match=r"ascend: the device allocation \(arena, inputs, outputs, constants, tilings\) "
                                                 r"takes \d+ bytes, more than max_memory_bytes \(262144\)"):
        esgraph.compile(g, backend="ascend-sim", max_memory_bytes=256 << 10)
    x = np.ones((4, 256), np.float32)
    check_same(g, [x], max_memory_bytes=1 << 20)
