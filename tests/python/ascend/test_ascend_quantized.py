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


def test_what_cann_has_no_op_for_is_refused_by_name_and_runs_on_the_host_on_request():
    rng = np.random.default_rng(8)
    x = rng.integers(0, 256, (1, 3, 8, 8), dtype=np.uint8)
    w = rng.integers(-128, 128, (4, 3, 3, 3), dtype=np.int8)

    def conv(b, x):
        f = lambda v: b.constant(np.float32(v))  # noqa: E731
        return ops.quantized_conv2d(x, f(0.1), b.constant(np.uint8(100)), b.constant(w), f(0.01), b.constant(np.int8(0)),
                                    f(0.2), b.constant(np.uint8(3)), pads=[1, 1, 1, 1])
    g = graph(conv, (esgraph.u8, x.shape))
    with pytest.raises(esgraph.UnsupportedError, match=r"quantized_conv2d .*aclnnQuantConvolution on Atlas A2 gives a FLOAT16"):
        esgraph.compile(g, backend="ascend-sim")
    check_exact(g, [x], host_fallback=True)

    offset = graph(lambda b, a: ops.matmul_integer(a, b.constant(w.reshape(27, 4)), b.constant(np.int8(0)), b.constant(np.int8(1))),
                   (esgraph.i8, (5, 27)))
    with pytest.raises(esgraph.UnsupportedError, match=r"matmul_integer .*a zero point other than a constant 0"):
        esgraph.compile(offset, backend="ascend-sim")


def simulated_operator_library():
    """The simulator's libnnopbase.so and libopapi.so (AscendCL's first: they use its hooks)."""
    sim = Path(esgraph.__file__).resolve().parents[2] / "ascend_sim"
    acl = ctypes.CDLL(str(sim / "libascendcl.so"), mode=ctypes.RTLD_GLOBAL)
    base = ctypes.CDLL(str(sim / "libnnopbase.so"), mode=ctypes.RTLD_GLOBAL)
    return acl, base, ctypes.CDLL(str(sim / "libopapi.so"))


@pytest.mark.parametrize("case, why", [
    ("uint8 x1", "x1 and x2 must be INT8"),
    ("x1 offset", "x1Offset must be null"),
    ("float32 out", "never FLOAT32"),
    ("no x2 scale", "x1, x2, x2Scale and out are required"),
    ("x2 scale of k", "x2Scale must be FLOAT32 or BFLOAT16 of shape (1,) or (n,)"),
])
def test_the_simulator_enforces_quant_matmul_v5s_rules_for_atlas_a2(case, why):
    acl, base, opapi = simulated_operator_library()
    base.aclCreateTensor.restype = ctypes.c_void_p
    acl.aclGetRecentErrMsg.restype = ctypes.c_char_p
    INT8, UINT8, FLOAT, INT32, ND = 2, 4, 0, 3, 2

    def tensor(dims, dtype):
        d = (ctypes.c_int64 * len(dims))(*dims)
        strides = (ctypes.c_int64 * len(dims))(*[int(np.prod(dims[i + 1:])) for i in range(len(dims))])
        return ctypes.c_void_p(base.aclCreateTensor(d, ctypes.c_uint64(len(dims)), ctypes.c_int32(dtype), strides, ctypes.c_int64(0),
                                                    ctypes.c_int32(ND), d, ctypes.c_uint64(len(dims)), None))
    x1 = tensor([4, 16], UINT8 if case == "uint8 x1" else INT8)
    x2 = tensor([16, 8], INT8)
    scale = None if case == "no x2 scale" else tensor([16] if case == "x2 scale of k" else [1], FLOAT)
    offset = tensor([1], FLOAT) if case == "x1 offset" else None
    out = tensor([4, 8], FLOAT if case == "float32 out" else INT32)
    workspace, executor = ctypes.c_uint64(), ctypes.c_void_p()
    status = opapi.aclnnQuantMatmulV5GetWorkspaceSize(x1, x2, None, scale, None, offset, None, None, None, ctypes.c_bool(False),
                                                      ctypes.c_bool(False), ctypes.c_int64(0), out, ctypes.byref(workspace),
                                                      ctypes.byref(executor))
    assert status in (161001, 161002) and not executor.value
    message = acl.aclGetRecentErrMsg().decode()
    assert why in message, message
