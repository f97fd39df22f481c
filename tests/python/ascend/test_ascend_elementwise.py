"""The Ascend backend on the simulated device (conftest.py says how these tests run): every elementwise
op with an Ascend C lowering, against the CPU, and fused groups: one kernel per group, over tiles
and the device's AI cores, with broadcasts read in place or expanded first."""
import re

import numpy as np
import pytest

import esgraph
from esgraph import ops

from esgraph_op_set import OP_SET, py_name

from esgraph_codegen import compute

from ascend_device import RTOL, ATOL, graph_of, check_same, calls


# ---- every elementwise op with an Ascend C lowering -------------------------------------------
def _takes_floats(op, type_name):
    """Whether a value of this type may be a float or bool, the dtypes the kernels take (not the
    8-bit integers of quantize_linear and dequantize_linear, which the device runs on the host)."""
    var = op.type_var(type_name)
    dtypes = var.dtypes if var else (type_name,)
    return any(d in ("float", "numeric", "all", "f32", "f16", "bf16", "f64", "bool") for d in dtypes)


def lowered_ops():
    """Ops whose YAML expression lowers to Ascend C and whose inputs and result may be float."""
    found = []
    for op in OP_SET.ops:
        if not op.compute or any(i.optional or i.variadic for i in op.inputs):
            continue
        if not all(_takes_floats(op, t) for t in [i.type for i in op.inputs] + [op.outputs[0].type]):
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


# ---- the vector unit's math, as the devkit computes it ------------------------------------------
def devkit_tanh(x):
    """asc-devkit's Tanh in f32, one instruction a step: clip to ±8.8, (e^2x - 1) / (e^2x + 1).
    (Exp rounded from f64: the simulator's is the C library's expf, within about half an ulp.)"""
    f = np.float32
    e = np.exp((f(2) * np.clip(x, f(-8.8), f(8.8))).astype(np.float64)).astype(f)
    return ((e - f(1)) / (e + f(1))).astype(f)


def devkit_erf(x):
    """asc-devkit's Erf in f32: x clipped to ±3.92, then the ratio of its two polynomials in x²."""
    f = np.float32
    c = np.clip(x, f(-3.92), f(3.92))
    x2 = c * c
    p = x2 * f(0.053443748819)
    for k in (7.5517016694, 101.62808918, 1393.8061484, 5063.7915060):
        p = x2 * (p + f(k))
    p = c * (p + f(29639.384698))
    q = x2 + f(31.212858877)
    for k in (398.56963806, 3023.1248150, 13243.365831, 26267.224157):
        q = x2 * q + f(k)
    return p / q


def test_tanh_and_erf_carry_the_devkits_error_not_libms():
    """The simulated Tanh and Erf are the devkit's formulas (CANN states no error bound), so what
    the tests and ascend-check tolerate is their error: near 0, Tanh's e^2x - 1 cancels."""
    x = np.array([1e-4, -3e-4, 0.01, 0.5, -2.0, 9.5, -40.0, 3.9, 4.5, -0.7], np.float32)
    for fn, formula, exact in ((ops.tanh, devkit_tanh, np.tanh), (ops.erf, devkit_erf, None)):
        got = esgraph.compile(graph_of(fn, x.shape), backend="ascend-sim")(x)
        np.testing.assert_array_equal(got, formula(x))
        if exact is not None:
            assert abs(got[0] - exact(x[0])) > 1e-5 * abs(exact(x[0]))  # libm's would be within an ulp
