"""Every ATen converter against eager PyTorch on the same inputs, edge cases included: each case
is a small function captured by torch.export and lowered to core ATen as the backend lowers
Dynamo's graphs, so the overloads tested are the ones the converters see. A converter no case
reaches fails the coverage test."""
import functools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import esgraph
import esgraph.torch as esg_torch
from esgraph.torch._aten.registry import overload_name
from esgraph.torch._backend import decompositions


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def ints(*shape, low=-5, high=6, dtype=torch.int64):
    return torch.randint(low, high, shape, dtype=dtype)


torch.manual_seed(0)
# name: (function, inputs, tolerance relative to the output's largest magnitude)
CASES = {
    # one op each, from the op YAML's aten: keys, with ATen's type promotion
    "unary": (lambda x: [f(x) for f in (torch.abs, torch.neg, torch.exp, torch.sin, torch.cos, torch.tan, torch.tanh,
                                         torch.sigmoid, torch.relu, torch.erf, torch.floor, torch.ceil, torch.sign,
                                         torch.atan, torch.sinh, torch.cosh, torch.asinh, torch.round)], (randn(3, 4),), 1e-5),
    "unary_domains": (lambda x: [torch.log(x), torch.sqrt(x), torch.rsqrt(x), torch.reciprocal(x), torch.asin(x - 1),
                                 torch.acos(x - 1), torch.atanh(x - 1), torch.acosh(x + 1)], (torch.rand(3, 4) * 1.9 + 0.05,), 1e-5),
    "round_half_to_even": (torch.round, (torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5]),), 0),
    "nan_inf": (lambda x: [torch.isnan(x), torch.isinf(x), torch.logical_not(x > 0)],
                (torch.tensor([0.0, math.nan, math.inf, -math.inf, 1.0]),), 0),
    "activations": (lambda x: [F.silu(x), F.mish(x), F.hardswish(x), F.softplus(x), F.elu(x), F.gelu(x),
                               F.gelu(x, approximate="tanh"), F.leaky_relu(x, 0.2), F.hardsigmoid(x), F.relu6(x),
                               F.hardtanh(x, -0.5, 0.7)], (randn(4, 8) * 3,), 1e-5),
    "binary": (lambda a, b: [a + b, a - b, a * b, a / b, torch.maximum(a, b), torch.minimum(a, b), a ** 2, torch.pow(a.abs(), b),
                             a == b, a != b, a < b, a <= b, a > b, a >= b, torch.where(a > 0, a, b), torch.add(a, b, alpha=1)],
               (randn(2, 3, 4), randn(3, 1)), 1e-5),
    "scalars": (lambda a: [a + 2, a - 1.5, 3 * a, a / 4, a > 0.5, a == 1.0, 2 - a, 1 / (a.abs() + 1)], (randn(5),), 1e-6),
    "promotion": (lambda i, f: [i + f, i * 2.5, i / 2, i / i.clamp(min=1), (i > f), torch.where(i > 0, i, f)],
                  (ints(3, 4), randn(3, 4)), 1e-6),
    "integers": (lambda i, j: [i + j, i * j, i - j, torch.maximum(i, j), i // j.clamp(min=1), torch.div(i, 3, rounding_mode="floor"),
                               torch.div(i, 3, rounding_mode="trunc"), torch.div(-i, j.clamp(min=1), rounding_mode="floor")],
                 (ints(4, 5), ints(4, 5)), 0),
    "logical": (lambda a, b: [torch.logical_and(a, b), torch.logical_or(a, b), torch.logical_not(a)],
                (torch.rand(6) > 0.5, torch.rand(6) > 0.5), 0),
    "float_div_modes": (lambda a, b: [torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc")],
                        (randn(6) * 4, randn(6)), 1e-6),
    # products and layers
    "products": (lambda a, b, v: [a @ b, torch.bmm(a, b), v @ b[0], a[0] @ v[:4], torch.addmm(b[0][0], a[0], b[0]),
                                  torch.baddbmm(v[:1, None, None].expand(1, 3, 5), a, b, beta=0.5, alpha=2.0)],
                 (randn(2, 3, 4), randn(2, 4, 5), randn(4)), 1e-5),
    "linear": (lambda x, w, b: F.linear(x, w, b), (randn(2, 3, 8), randn(6, 8), randn(6)), 1e-5),
    "conv2d": (lambda x, w, b: [F.conv2d(x, w, b, stride=2, padding=1), F.conv2d(x, w, None, dilation=2),
                                F.conv2d(x, w[:, :2], b, groups=2, padding=(0, 1))],
               (randn(1, 4, 9, 9), randn(6, 4, 3, 3), randn(6)), 1e-5),
    "conv1d_3d_transposed": (lambda x1, w1, x3, w3, xt, wt: [F.conv1d(x1, w1, padding=2), F.conv3d(x3, w3, padding=1),
                                                            F.conv_transpose2d(xt, wt, stride=2, padding=1, output_padding=1)],
                             (randn(2, 3, 10), randn(4, 3, 5), randn(1, 2, 4, 5, 6), randn(3, 2, 3, 3, 3), randn(1, 3, 4, 4),
                              randn(3, 2, 3, 3)), 1e-5),
    "pools": (lambda x: [F.max_pool2d(x, 3, 2, 1), F.max_pool2d(x, 2, ceil_mode=True), F.avg_pool2d(x, 3, 2, 1),
                         F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), F.avg_pool2d(x, 2, ceil_mode=True),
                         F.adaptive_avg_pool2d(x, 1), F.adaptive_avg_pool2d(x[..., :8, :8], (2, 4))], (randn(2, 3, 9, 9),), 1e-5),
    "norms": (lambda x, w, b: [F.layer_norm(x, (8,), w, b), F.layer_norm(x, (4, 8)), F.group_norm(x.transpose(1, 2), 2, w, b),
                               F.batch_norm(x.transpose(1, 2), b, w.abs(), w, b, False, 0.1, 1e-3)],
              (randn(3, 4, 8), randn(8), randn(8)), 1e-5),
    "softmax": (lambda x: [F.softmax(x, -1), F.log_softmax(x, 1), F.softmax(x.double(), 0), F.softmax(x, -1, dtype=torch.float64),
                           F.log_softmax(x, 0, dtype=torch.float64)], (randn(3, 5, 7) * 4,), 1e-5),
    "attention": (lambda q, k, v, m: [F.scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                      F.scaled_dot_product_attention(q, k, v, attn_mask=m), F.scaled_dot_product_attention(q, k, v, scale=0.3),
                                      F.scaled_dot_product_attention(q, k, v, attn_mask=m > 0),
                                      F.scaled_dot_product_attention(q[:, :, :3], k, v, is_causal=True),  # top-left aligned
                                      F.scaled_dot_product_attention(q, k[:, :1], v[:, :1], enable_gqa=True)],  # grouped queries
                  (randn(2, 3, 5, 8), randn(2, 3, 5, 8), randn(2, 3, 5, 4), randn(5, 5)), 1e-5),
    "resize": (lambda x: [F.interpolate(x, scale_factor=2, mode="nearest"), F.interpolate(x, size=(5, 7), mode="nearest"),
                          F.interpolate(x, scale_factor=2, mode="bilinear"), F.interpolate(x, size=(6, 9), mode="bilinear", align_corners=True)],
               (randn(1, 2, 4, 5),), 1e-5),
    # views, copies, joins
    "views": (lambda x: [x.view(6, 4), x.reshape(-1), x.permute(2, 0, 1), x.transpose(0, 2), x.t() if x.ndim == 2 else x[0].t(),
                         x.unsqueeze(1), x[:, :1].squeeze(1), x[:, :1].squeeze(), x.expand(2, 2, 3, 4), x.flatten(1), x.flip(0, 2)],
              (randn(2, 3, 4),), 0),
    "slices": (lambda x: [x[1:], x[:, ::2], x[..., -2:], x[0], x[:, 1], x[-1, -1], x.narrow(2, 1, 2), x[1:2, :, 3]], (randn(3, 4, 5),), 0),
    "cat_split": (lambda a, b: [torch.cat([a, b], 1), torch.cat([a, b.int()], 0), *torch.split(a, [1, 2], 1), *torch.chunk(b, 3, 1),
                                torch.stack([a, b]), *torch.unbind(a, 0)], (randn(2, 3), randn(2, 3)), 0),
    "pad_repeat": (lambda x: [F.pad(x, (1, 2)), F.pad(x, (1, 1, 2, 0), value=3.0), F.pad(x, (-1, 1)), x.repeat(2, 1, 3), x.repeat(1, 2)],
                   (randn(3, 4),), 0),
    "casts": (lambda x, i: [x.int(), x.double(), i.float(), (x > 0).long(), x.half(), x.to(torch.bfloat16), x.clone(), x.detach(),
                            x.contiguous()], (randn(3, 4) * 10, ints(3, 4)), 1e-2),
    "fills": (lambda x: [torch.zeros_like(x), torch.ones_like(x), torch.full_like(x, 7.0), torch.full((2, 3), 1.5), x + torch.arange(4),
                         torch.arange(2, 11, 3), x.new_full((2,), 4.0), torch.scalar_tensor(3.0) + x, torch.arange(0.5, 3),
                         torch.arange(0, 1, 0.25)], (randn(3, 4),), 0),
    "indexing": (lambda w, i, x: [F.embedding(i, w), torch.index_select(x, 1, i[0]), x[:, i[0]], x[i[1]]],
                 (randn(10, 4), torch.tensor([[1, 3], [0, 2]]), randn(3, 5)), 0),
    "as_strided": (lambda x: [x.as_strided((2, 2), (1, 4)), x.as_strided((3,), (5,), 2)], (randn(4, 4),), 0),
    "clamps": (lambda x, i: [x.clamp(-0.5, 0.5), x.clamp(min=0), x.clamp(max=0.2), i.clamp(-2, 3), i.clamp(min=0),
                             i.clamp(min=1.5), torch.ops.aten.hardtanh.default(x)],
               (randn(4, 5), ints(4, 5)), 0),
    # reductions
    "reductions": (lambda x: [x.sum(), x.sum(1), x.sum((0, 2), keepdim=True), x.mean(), x.mean(-1), x.amax(1), x.amin((0, 1)),
                              x.argmax(1), x.argmin(), x.argmax(), x.max(2).values, x.max(2).indices, x.min(0).values,
                              x.prod(1), x.var(1), x.var(2, correction=0), x.std(0), (x > 1).any(), (x > 1).any(2)],
                   (randn(3, 4, 5),), 1e-5),
    # overloads PyTorch's own code rarely writes, called by name
    "scalar_overloads": (lambda x, i: [torch.ops.aten.add.Scalar(x, 2), torch.ops.aten.sub.Scalar(x, 1.5), torch.ops.aten.mul.Scalar(x, 3),
                                       torch.ops.aten.div.Scalar(x, 4), torch.ops.aten.div.Scalar_mode(i, 3, rounding_mode="floor"),
                                       torch.ops.aten.ne.Scalar(x, 0), torch.ops.aten.lt.Scalar(x, 0), torch.ops.aten.le.Scalar(i, 1),
                                       torch.ops.aten.ge.Scalar(i, 0), torch.ops.aten.clamp_min.default(x, 0),
                                       torch.ops.aten.clamp_max.default(i, 2)], (randn(3, 4), ints(3, 4)), 1e-6),
    "view_overloads": (lambda x: [torch.ops.aten.alias.default(x), torch.ops.aten.squeeze.dims(x[:, :1], [1]),
                                  torch.ops.aten._unsafe_view.default(x, [2, 6]),
                                  torch.ops.aten.any.dims(x > 0, [0, 1]), torch.ops.aten.arange.start(2, 7)], (randn(3, 4),), 0),
    "resize_overloads": (lambda x: [torch.ops.aten.upsample_nearest2d.default(x, [6, 10]),
                                    torch.ops.aten.upsample_nearest2d.default(x, [9, 10], 3.0, 2.0)], (randn(1, 2, 3, 5),), 1e-5),
    "bitwise_masks": (lambda a, b: [a & b, a | b, ~a], (torch.rand(7) > 0.5, torch.rand(7) > 0.5), 0),
    "gather_topk": (lambda x, i: [torch.gather(x, 1, i), *torch.topk(x, 2), *torch.topk(x, 2, dim=0, largest=False), x.max(), x.min(),
                                  torch.log2(x.abs() + 1), torch.true_divide(x, 3)],
                    (randn(4, 5), torch.tensor([[0, 4], [1, 1], [3, 4], [2, 0]])), 1e-6),
    "constants_and_copies": (lambda x: [x + torch.tensor([1.0, 2.0, 3.0, 4.0]),
                                        torch.ops.aten.copy.default(torch.ops.aten.empty.memory_format([3, 4]), x),
                                        torch.ops.aten.copy.default(torch.ops.aten.empty_like.default(x), x[0]),
                                        torch.ops.aten.lift_fresh_copy.default(x),
                                        torch.ops.prims.convert_element_type.default(x, torch.float64)], (randn(3, 4),), 0),
    # torch.cond as esgraph's if_, the branch picked when the graph runs
    "cond_true": (lambda x: torch.cond(x.sum() > 0, lambda x: (x.sin() * 2, x + 1), lambda x: (x.cos(), x - 1), (x,)),
                  (torch.rand(3, 4) + 0.1,), 1e-6),
    "cond_false": (lambda x, y: torch.cond(x.sum() > 0, lambda x, y: x @ y, lambda x, y: x @ y.flip(0) - 1, (x, y)),
                   (-torch.rand(3, 4) - 0.1, randn(4, 2)), 1e-6),
    "integer_sums": (lambda i, b: [i.sum(1), b.sum(), i.int().sum(0), i.to(torch.uint8).sum()], (ints(4, 6, low=0), torch.rand(5) > 0.3), 0),
}


def flat(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def ops_of(gm):
    return {overload_name(n.target) for n in gm.graph.nodes if n.op == "call_function"}


def compare(got, want, rtol, how):
    assert len(got) == len(want), how
    for k, (g, w) in enumerate(zip(got, want)):
        if isinstance(g, torch.Tensor):
            g = g.float().numpy() if g.dtype == torch.bfloat16 else g.numpy()
        elif g.dtype == np.uint16:  # bf16 from a Model: its bits
            g = torch.from_numpy(g.view(np.int16)).view(torch.bfloat16).float().numpy()
        assert str(g.dtype) == str(w.float().numpy().dtype if w.dtype == torch.bfloat16 else w.numpy().dtype), (how, k, g.dtype, w.dtype)
        w = w.float().numpy() if w.dtype == torch.bfloat16 else w.numpy()
        assert g.shape == w.shape, (how, k, g.shape, w.shape)
        if w.dtype == np.bool_ or rtol == 0:
            np.testing.assert_array_equal(g, w, err_msg=f"{how}: output {k}")
        else:
            scale = max(float(np.abs(w).max()), 1e-6) if w.size else 1
            assert float(np.abs(g.astype(np.float64) - w).max(initial=0)) <= rtol * scale, f"{how}: output {k}"


def check(fn, inputs, rtol):
    """fn against eager, through torch.export and through torch.compile; the ATen overloads the
    two paths lowered it to (export keeps ops PyTorch writes as compositions, aot_autograd
    takes them apart)."""
    module = Fn(fn).eval()
    with torch.no_grad():
        want = flat(module(*inputs))
    program = torch.export.export(module, inputs)
    compare(esgraph.compile(esg_torch.load(program)).run([x.numpy() for x in inputs]), want, rtol, "torch.export")
    torch._dynamo.reset()
    with torch.no_grad():
        compare(flat(torch.compile(module, backend="esgraph")(*inputs)), want, rtol, "torch.compile")
    seen = ops_of(program.run_decompositions(decompositions()).graph_module)
    for compiled in esg_torch.compiled_functions():
        seen |= ops_of(compiled.gm)
    torch._dynamo.reset()
    return seen


@functools.lru_cache(maxsize=None)
def checked(name):
    """check() of a case, once per session: the coverage test reads what the cases saw."""
    return frozenset(check(*CASES[name]))


@pytest.mark.parametrize("name", CASES)
def test_matches_eager(name):
    checked(name)


def test_every_converter_is_reached_by_a_case():
    seen = set().union(*(checked(name) for name in CASES))
    vision = {name for name in esg_torch.supported() if name.startswith("torchvision.")}  # test_models.py
    assertions = {"aten._assert_tensor_metadata.default", "aten._assert_scalar.default", "aten.sym_constrain_range_for_size.default",
                  "aten.sym_constrain_range.default"}  # no values: nothing to compare
    assert sorted(set(esg_torch.supported()) - seen - vision - assertions) == []
