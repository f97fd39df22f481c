"""Quantized graphs on the simulated device: int8 products on aclnnQuantMatmulV5, quantize,
dequantize and quantized sums as f32 arithmetic between aclnnCasts, u8 activations shifted into
int8, and what CANN has no op for refused by name. Values are checked against the CPU backend
bit for bit (itself checked against numpy and ONNX Runtime in test_quantized_ops.py) and against
numpy's integer arithmetic; the simulator's own rules for aclnnQuantMatmulV5 are called directly."""
import ctypes
from pathlib import Path

import numpy as np
import pytest

import esgraph
from esgraph import ops

from ascend_device import both, calls


def graph(fn, *inputs):
    """A graph of fn over inputs given as (dtype, shape) pairs."""
    with esgraph.GraphBuilder("q") as b:
        xs = [b.input(f"x{i}", dtype, list(shape)) for i, (dtype, shape) in enumerate(inputs)]
        out = fn(b, *xs)
        return b.build(list(out) if isinstance(out, (tuple, list)) else [out])


def check_exact(g, arrays, **options):
    cpu, sim = both(g, arrays, **options)
    for c, s in zip(cpu, sim):
        assert s.dtype == c.dtype and s.shape == c.shape
        np.testing.assert_array_equal(s, c)
    return sim


def quantize_ref(x, scale, zero_point):
    info = np.iinfo(zero_point.dtype)
    q = np.rint((x / scale).astype(np.float32)) + zero_point.astype(np.float32)
    return np.nan_to_num(np.clip(q, info.min, info.max), nan=0).astype(zero_point.dtype)


TIES = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 1e9, -1e9, np.nan, np.inf, -np.inf], np.float32)


@pytest.mark.parametrize("dtype, zero_point", [(np.uint8, 128), (np.int8, 0), (np.int8, -3)])
def test_quantize_and_dequantize_are_the_cpus_bit_for_bit(dtype, zero_point, acl_log):
    """Ties round half to even, beyond the range saturates, NaN gives 0, per channel broadcasts: the same f32
    steps as the CPU, the 8-bit values made and read by aclnnCast."""
    rng = np.random.default_rng(3)
    x = np.concatenate([TIES, rng.normal(size=36).astype(np.float32) * 40]).reshape(2, 3, 8)
    scale = np.array([[0.5], [1.0], [0.25]], np.float32)  # one per channel of axis 1

    def fn(b, x):
        zp = b.constant(np.array(zero_point, dtype))
        q = ops.quantize_linear(x, b.constant(scale), zp)
        return q, ops.dequantize_linear(q, b.constant(scale), zp)
    q, d = check_exact(graph(fn, (esgraph.f32, x.shape)), [x])
    np.testing.assert_array_equal(q, quantize_ref(x, scale, np.array(zero_point, dtype)))
    np.testing.assert_array_equal(d, (q.astype(np.float32) - np.float32(zero_point)) * scale)
    log = acl_log()
    assert len(calls(log, "aclnnCast")) == 2  # f32 to the integers, and back
    assert calls(log, "aclrtLaunchKernelWithConfig")  # the arithmetic: generated kernels


def test_int8_products_run_on_quant_matmul_v5(acl_log):
    """Symmetric int8 operands (esgraph.quantize(..., symmetric=True)): one aclnnQuantMatmulV5
    with an INT32 result, exact; leading axes of a are more rows."""
    rng = np.random.default_rng(4)
    a = rng.integers(-128, 128, (2, 5, 96), dtype=np.int8)
    w = rng.integers(-128, 128, (96, 40), dtype=np.int8)

    def fn(b, a):
        zero = b.constant(np.int8(0))
        return ops.matmul_integer(a, b.constant(w), zero, zero)
    (sums,) = check_exact(graph(fn, (esgraph.i8, a.shape)), [a])
    np.testing.assert_array_equal(sums, a.astype(np.int32) @ w.astype(np.int32))
    assert len(calls(acl_log(), "aclnnQuantMatmulV5")) == 1


@pytest.mark.parametrize("constant_zero_point", [True, False])
def test_u8_activations_are_shifted_into_int8(constant_zero_point, acl_log):
    """CANN takes no UINT8 x1 and no x1 offset: (a - zp) · w runs as (a - 128) · w plus
    (128 - zp) times w's column sums, folded when the zero point is a constant, the dynamic
    quantization's zero point (a graph value) computed on the device."""
    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, (7, 64), dtype=np.uint8)
    w = rng.integers(-128, 128, (64, 24), dtype=np.int8)
    zp = np.uint8(131)
    inputs = [(esgraph.u8, a.shape)] + ([] if constant_zero_point else [(esgraph.u8, [])])

    def fn(b, a, *z):
        return ops.matmul_integer(a, b.constant(w), b.constant(zp) if constant_zero_point else z[0], b.constant(np.int8(0)))
    arrays = [a] + ([] if constant_zero_point else [np.array(zp)])
    (sums,) = check_exact(graph(fn, *inputs), arrays)
    np.testing.assert_array_equal(sums, (a.astype(np.int32) - int(zp)) @ w.astype(np.int32))
    assert len(calls(acl_log(), "aclnnQuantMatmulV5")) == 1


def test_quantized_sums_and_8_bit_max_pools(acl_log):
    """quantized_add is its f32 steps (a Relu folded into its bounds), max_pool2d of u8 runs on
    f16, which holds every 8-bit integer."""
    rng = np.random.default_rng(6)
    a = rng.integers(0, 256, (1, 4, 6, 6), dtype=np.uint8)
    c = rng.integers(-128, 128, (1, 4, 6, 6), dtype=np.int8)

    def fn(b, a, c):
        s = ops.quantized_add(a, b.constant(np.float32(0.02)), b.constant(np.uint8(120)), c, b.constant(np.float32(0.03)),
                              b.constant(np.int8(2)), b.constant(np.float32(0.04)), b.constant(np.uint8(7)), min=0.0)
        return s, ops.max_pool2d(s, kernel=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1])
    check_exact(graph(fn, (esgraph.u8, a.shape), (esgraph.i8, c.shape)), [a, c])
    log = acl_log()
    assert len(calls(log, "aclnnMaxPool")) == 1 and not calls(log, "aclnnQuantMatmulV5")


def mlp(rng):
    with esgraph.GraphBuilder("mlp") as b:
        x = b.input("x", esgraph.f32, [8, 64])
        w1 = b.constant(rng.normal(size=(64, 128)).astype(np.float32) * 0.1)
        h = ops.relu(ops.matmul(x, w1) + b.constant(rng.normal(size=128).astype(np.float32)))
        y = ops.matmul(h, b.constant(rng.normal(size=(128, 16)).astype(np.float32) * 0.1))
        return b.build([y])


@pytest.mark.parametrize("symmetric", [False, True])
def test_a_model_esgraph_quantized_runs_whole_on_the_device(symmetric, acl_log):
    """esgraph.quantize's QDQ graph: no launch on the host, the CPU's values exactly."""
    rng = np.random.default_rng(7)
    batches = [[rng.normal(size=(8, 64)).astype(np.float32)] for _ in range(3)]
    quantized = esgraph.quantize(mlp(rng), batches, symmetric=symmetric).graph
    cpu = esgraph.compile(quantized).run(batches[0])
    model = esgraph.compile(quantized, backend="ascend-sim")
    np.testing.assert_array_equal(model.run(batches[0])[0], cpu[0])
    assert model.stats()["host_launches"] == 0
    assert len(calls(acl_log(), "aclnnQuantMatmulV5")) == 2


def quantized_convolution(b, x, w, zero_point, y_zero_point, **attrs):
    f = lambda v: b.constant(np.float32(v))  # noqa: E731
    channels = w.shape[0]
    w_scale = b.constant(np.linspace(0.002, 0.01, channels, dtype=np.float32))
    bias = b.constant(np.arange(-channels, channels, 2, dtype=np.int32) * 50)
    return ops.quantized_conv2d(x, f(0.05), b.constant(zero_point), b.constant(w), w_scale, b.constant(np.zeros(channels, np.int8)),
                                f(0.2), b.constant(y_zero_point), bias=bias, **attrs)


def within_one_step(cpu, sim):
    """Every value within one quantization step of the CPU's: CANN's convolution gives FLOAT16,
    which holds a value between 128 and 256 to 1/8, so one that close to a tie rounds the other
    way. Most are exact."""
    off = np.abs(cpu.astype(np.int64) - sim.astype(np.int64))
    assert off.max() <= 1 and np.count_nonzero(off) <= off.size // 10, (off.max(), np.count_nonzero(off))


@pytest.mark.parametrize("activations, zero_point", [(np.int8, 0), (np.uint8, 117)])
@pytest.mark.parametrize("result, y_zero_point", [(np.uint8, 9), (np.int8, -4)])
def test_int8_convolutions_run_on_quant_convolution(activations, zero_point, result, y_zero_point, acl_log):
    """One aclnnQuantConvolution (depth 1, NCDHW) gives the result in the output's units in f16;
    the rounding, the clamp (a Relu folded) and the cast follow. u8 images are padded with their
    zero point and shifted into int8 first."""
    rng = np.random.default_rng(9)
    info = np.iinfo(activations)
    x = rng.integers(info.min, info.max + 1, (2, 5, 11, 9), dtype=activations)
    w = rng.integers(-128, 128, (6, 5, 3, 3), dtype=np.int8)
    g = graph(lambda b, x: quantized_convolution(b, x, w, activations(zero_point), result(y_zero_point), pads=[1, 2, 1, 2],
                                                 strides=[2, 1], min=0.0), (esgraph.u8 if activations == np.uint8 else esgraph.i8, x.shape))
    cpu, sim = both(g, [x])
    assert sim[0].dtype == result
    within_one_step(cpu[0], sim[0])
    log = acl_log()
    assert len(calls(log, "aclnnQuantConvolution")) == 1
    assert len(calls(log, "aclnnConstantPadNd")) == (activations == np.uint8)


def test_a_float_result_is_the_convolution_alone(acl_log):
    rng = np.random.default_rng(10)
    x = rng.integers(-128, 128, (1, 4, 7, 7), dtype=np.int8)
    w = rng.integers(-128, 128, (3, 4, 3, 3), dtype=np.int8)
    g = graph(lambda b, x: quantized_convolution(b, x, w, np.int8(0), np.array(0.5, np.float16)), (esgraph.i8, x.shape))
    cpu, sim = both(g, [x])
    assert sim[0].dtype == np.float16
    np.testing.assert_allclose(sim[0].astype(np.float32), cpu[0].astype(np.float32), rtol=2e-3)
    assert len(calls(acl_log(), "aclnnQuantConvolution")) == 1 and not calls(acl_log(), "aclnnCast")


def cnn(rng):
    with esgraph.GraphBuilder("cnn") as b:
        x = b.input("x", esgraph.f32, [2, 3, 16, 16])
        c = lambda *s: b.constant((rng.normal(size=s) * 0.3).astype(np.float32))  # noqa: E731
        h = ops.max_pool2d(ops.relu(ops.conv2d(x, c(8, 3, 3, 3), bias=c(8), pads=[1, 1, 1, 1])), kernel=[2, 2], strides=[2, 2])
        r = ops.relu(ops.conv2d(h, c(8, 8, 3, 3), bias=c(8), pads=[1, 1, 1, 1]))
        h = ops.relu(ops.conv2d(r, c(8, 8, 3, 3), bias=c(8), pads=[1, 1, 1, 1]) + h)
        return b.build([ops.matmul(ops.reshape(h, [2, 512]), c(512, 10))])


@pytest.mark.parametrize("symmetric", [False, True])
def test_a_quantized_cnn_runs_whole_on_the_device(symmetric, acl_log):
    """esgraph.quantize's convolutions, pools, residual sum and product all on the device; the
    output within a few of its quantization steps of the CPU's (a step one layer rounds apart
    travels on)."""
    rng = np.random.default_rng(11)
    batches = [[rng.normal(size=(2, 3, 16, 16)).astype(np.float32)] for _ in range(3)]
    quantized = esgraph.quantize(cnn(rng), batches, symmetric=symmetric)
    cpu = esgraph.compile(quantized.graph).run(batches[0])[0]
    model = esgraph.compile(quantized.graph, backend="ascend-sim")
    sim = model.run(batches[0])[0]
    assert model.stats()["host_launches"] == 0
    step = (cpu.max() - cpu.min()) / (127 if symmetric else 255)
    assert np.abs(sim - cpu).max() <= 4 * step
    log = acl_log()
    assert len(calls(log, "aclnnQuantConvolution")) == 3 and len(calls(log, "aclnnQuantMatmulV5")) == 1


def packed_codes(codes, bits, block_size):
    """matmul_nbits's b: each column's codes along K in blocks, low bits first."""
    n, k = codes.shape
    per_byte = 8 // bits
    blocks = codes.reshape(n, k // block_size, block_size // per_byte, per_byte).astype(np.uint8)
    return np.bitwise_or.reduce(blocks << (bits * np.arange(per_byte, dtype=np.uint8)), axis=-1).astype(np.uint8)


@pytest.mark.parametrize("bits, block_size", [(4, 32), (8, 64), (4, 128)])
@pytest.mark.parametrize("zero_points", [True, False])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_weight_only_products_run_on_weight_quant_batch_matmul_v2(bits, block_size, zero_points, dtype, acl_log):
    """f16 and bf16 activations times 4- or 8-bit codes: one aclnnWeightQuantBatchMatmulV2, per
    group (per column when one block spans K), the codes shifted into signed ints and the zero
    points into offsets by the lowering; against numpy's product of the dequantized weights."""
    rng = np.random.default_rng(12)
    k, n = 128, 40
    codes = rng.integers(0, 2 ** bits, (n, k))
    scales = rng.uniform(0.01, 0.05, (n, k // block_size)).astype(np.float32)
    zp = rng.integers(0, 2 ** bits, scales.shape).astype(np.uint8)
    esg_type = getattr(esgraph, dtype)

    def fn(b, a):
        extra = {"zero_points": b.constant(zp)} if zero_points else {}
        y = ops.matmul_nbits(ops.cast(a, esg_type), b.constant(packed_codes(codes, bits, block_size)), b.constant(scales),
                             bits=bits, block_size=block_size, **extra)
        return ops.cast(y, esgraph.f32)
    a = rng.normal(size=(3, k)).astype(np.float32)
    cpu, sim = both(graph(fn, (esgraph.f32, a.shape)), [a])
    w = (codes - (np.repeat(zp, block_size, 1) if zero_points else 2 ** (bits - 1))) * np.repeat(scales, block_size, 1)
    wanted = a.astype(np.float64) @ w.T
    # Both round the activations and the result to the type: f16 keeps 11 bits, bf16 8.
    tolerance = (2e-3 if dtype == "f16" else 1.6e-2) * np.abs(wanted).max()
    np.testing.assert_allclose(sim[0], cpu[0], atol=tolerance)
    np.testing.assert_allclose(sim[0], wanted, atol=2 * tolerance)
    assert len(calls(acl_log(), "aclnnWeightQuantBatchMatmulV2")) == 1


def test_the_codes_reach_the_device_once():
    """The lowering's signed codes stand for the graph's: only they are uploaded."""
    rng = np.random.default_rng(13)
    codes = rng.integers(0, 256, (256, 4, 128), dtype=np.uint8)  # 4-bit codes of 256 x 1024 weights
    g = graph(lambda b, a: ops.matmul_nbits(a, b.constant(codes), b.constant(np.ones((256, 4), np.float32)), bits=4, block_size=256),
              (esgraph.f16, (2, 1024)))
    assert esgraph.compile(g, backend="ascend-sim").stats()["device_bytes"] < 1.5 * codes.nbytes


def test_what_cann_has_no_op_for_is_refused_by_name_and_runs_on_the_host_on_request():
    rng = np.random.default_rng(8)
    x = rng.integers(-128, 128, (1, 4, 8, 8), dtype=np.int8)
    w = rng.integers(-128, 128, (4, 1, 3, 3), dtype=np.int8)
    depthwise = graph(lambda b, x: quantized_convolution(b, x, w, np.int8(0), np.uint8(3), groups=4), (esgraph.i8, x.shape))
    with pytest.raises(esgraph.UnsupportedError, match=r"quantized_conv2d .*groups other than 1 \(aclnnQuantConvolution takes 1"):
        esgraph.compile(depthwise, backend="ascend-sim")
    check_exact(depthwise, [x], host_fallback=True)  # the 8-bit op itself, on the host

    codes = rng.integers(0, 256, (4, 2, 8), dtype=np.uint8)
    two_bits = graph(lambda b, a: ops.matmul_nbits(a, b.constant(codes), b.constant(np.ones((4, 2), np.float32)), bits=2, block_size=32),
                     (esgraph.f16, (3, 64)))
    with pytest.raises(esgraph.UnsupportedError, match=r"matmul_nbits .*2-bit codes \(aclnnWeightQuantBatchMatmulV2 takes INT8 and INT4"):
        esgraph.compile(two_bits, backend="ascend-sim")

    offset = graph(lambda b, a: ops.matmul_integer(a, b.constant(w.reshape(9, 4)), b.constant(np.int8(0)), b.constant(np.int8(1))),
                   (esgraph.i8, (5, 9)))
    with pytest.raises(esgraph.UnsupportedError, match=r"matmul_integer .*a zero point other than a constant 0"):
        esgraph.compile(offset, backend="ascend-sim")


class SimulatedLibrary:
    """The simulator's operator library called directly (libnnopbase.so and libopapi.so, AscendCL's
    first: they use its hooks): descriptors over no memory, since planning reads none."""
    INT8, UINT8, FLOAT, FLOAT16, INT32, ND, NCHW, NCDHW = 2, 4, 0, 1, 3, 2, 0, 30

    def __init__(self):
        sim = Path(esgraph.__file__).resolve().parents[2] / "ascend_sim"
        self.acl = ctypes.CDLL(str(sim / "libascendcl.so"), mode=ctypes.RTLD_GLOBAL)
        self.base = ctypes.CDLL(str(sim / "libnnopbase.so"), mode=ctypes.RTLD_GLOBAL)
        self.opapi = ctypes.CDLL(str(sim / "libopapi.so"))
        self.base.aclCreateTensor.restype = ctypes.c_void_p
        self.base.aclCreateIntArray.restype = ctypes.c_void_p
        self.acl.aclGetRecentErrMsg.restype = ctypes.c_char_p

    def tensor(self, dims, dtype, layout=None):
        layout = self.ND if layout is None else layout
        d = (ctypes.c_int64 * len(dims))(*dims)
        strides = (ctypes.c_int64 * len(dims))(*[int(np.prod(dims[i + 1:])) for i in range(len(dims))])
        return ctypes.c_void_p(self.base.aclCreateTensor(d, ctypes.c_uint64(len(dims)), ctypes.c_int32(dtype), strides,
                                                         ctypes.c_int64(0), ctypes.c_int32(layout), d, ctypes.c_uint64(len(dims)), None))

    def ints(self, values):
        return ctypes.c_void_p(self.base.aclCreateIntArray((ctypes.c_int64 * len(values))(*values), ctypes.c_uint64(len(values))))

    def refusal(self, plan, *args):
        """Why `plan` (an aclnnXxxGetWorkspaceSize) refused its arguments; it must."""
        workspace, executor = ctypes.c_uint64(), ctypes.c_void_p()
        status = getattr(self.opapi, plan)(*args, ctypes.byref(workspace), ctypes.byref(executor))
        assert status in (161001, 161002) and not executor.value
        return self.acl.aclGetRecentErrMsg().decode()


@pytest.mark.parametrize("case, why", [
    ("uint8 x1", "x1 and x2 must be INT8"),
    ("x1 offset", "x1Offset must be null"),
    ("float32 out", "never FLOAT32"),
    ("no x2 scale", "x1, x2, x2Scale and out are required"),
    ("x2 scale of k", "x2Scale must be FLOAT32 or BFLOAT16 of shape (1,) or (n,)"),
])
def test_the_simulator_enforces_quant_matmul_v5s_rules_for_atlas_a2(case, why):
    lib = SimulatedLibrary()
    x1 = lib.tensor([4, 16], lib.UINT8 if case == "uint8 x1" else lib.INT8)
    scale = None if case == "no x2 scale" else lib.tensor([16] if case == "x2 scale of k" else [1], lib.FLOAT)
    offset = lib.tensor([1], lib.FLOAT) if case == "x1 offset" else None
    out = lib.tensor([4, 8], lib.FLOAT if case == "float32 out" else lib.INT32)
    assert why in lib.refusal("aclnnQuantMatmulV5GetWorkspaceSize", x1, lib.tensor([16, 8], lib.INT8), None, scale, None, offset, None,
                              None, None, ctypes.c_bool(False), ctypes.c_bool(False), ctypes.c_int64(0), out)


@pytest.mark.parametrize("case, why", [
    ("int32 bias", "bias is FLOAT, FLOAT16 or BFLOAT16 of (Cout) on Atlas A2 (not INT32)"),
    ("groups 2", "groups must be 1 on Atlas A2"),
    ("2-D", "Atlas A2 runs 3-D convolutions only"),
    ("float32 output", "output is FLOAT16 or BFLOAT16 on Atlas A2"),
    ("offsetx", "offset, offsetx, roundMode, transposed and outputPadding are not supported"),
    ("stride 64", "H and W strides in [1, 63]"),
])
def test_the_simulator_enforces_quant_convolutions_rules_for_atlas_a2(case, why):
    lib = SimulatedLibrary()
    image = (lambda dims: lib.tensor(dims, lib.INT8, lib.NCHW)) if case == "2-D" else (lambda dims: lib.tensor(dims, lib.INT8, lib.NCDHW))
    flat = (lambda dims: dims[:2] + dims[3:]) if case == "2-D" else (lambda dims: dims)
    bias = lib.tensor([4], lib.INT32 if case == "int32 bias" else lib.FLOAT)
    out = lib.tensor(flat([1, 4, 1, 6, 6]), lib.FLOAT if case == "float32 output" else lib.FLOAT16,
                     lib.NCHW if case == "2-D" else lib.NCDHW)
    stride = lib.ints([1, 64 if case == "stride 64" else 1, 1])
    assert why in lib.refusal("aclnnQuantConvolutionGetWorkspaceSize", image(flat([1, 3, 1, 8, 8])), image(flat([4, 3, 1, 3, 3])), bias,
                              lib.tensor([4], lib.FLOAT), None, stride, lib.ints([0, 0, 0]), lib.ints([1, 1, 1]), ctypes.c_bool(False),
                              None, ctypes.c_int64(2 if case == "groups 2" else 1), ctypes.c_int32(5 if case == "offsetx" else 0), None,
                              out)


@pytest.mark.parametrize("case, why", [
    ("float32 x", "x is FLOAT16 or BFLOAT16"),
    ("groups of 16", "antiquantGroupSize is 0, or a multiple of 32 in [32, k - 1]"),
    ("float32 scale", "antiquantScale is x's dtype"),
    ("offset of another shape", "antiquantOffset is antiquantScale's dtype and shape"),
    ("k beyond 65535", "k and n are in [1, 65535]"),
])
def test_the_simulator_enforces_weight_quant_batch_matmul_v2s_rules_for_atlas_a2(case, why):
    lib = SimulatedLibrary()
    k = 65536 if case == "k beyond 65535" else 128
    group = 16 if case == "groups of 16" else 32
    x_type = lib.FLOAT if case == "float32 x" else lib.FLOAT16
    x = lib.tensor([2, k], x_type)
    weight = lib.tensor([k, 8], lib.INT8)
    scale = lib.tensor([k // group, 8], lib.FLOAT if case == "float32 scale" else lib.FLOAT16)
    offset = lib.tensor([8] if case == "offset of another shape" else [k // group, 8], lib.FLOAT16)
    assert why in lib.refusal("aclnnWeightQuantBatchMatmulV2GetWorkspaceSize", x, weight, scale, offset, None, None, None,
                              ctypes.c_int(group), lib.tensor([2, 8], x_type))
