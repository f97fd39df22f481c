"""Post-training quantization (esgraph.quantize) against independent references.

Small networks are built with torch.nn, exported with torch.onnx.export (opset 17) and loaded
with esgraph.onnx.load (or built with esgraph's builder), quantized on a few calibration
batches, and checked against what numpy, torch and ONNX Runtime compute on their own:
- calibration: each activation's scale and zero point against numpy's formulas over the float
  results torch computes (min-max exactly; percentile within a histogram bin of the sorted
  values' quantile; entropy against a numpy implementation of the KL-divergence threshold search
  written here), and outliers that min-max spreads the codes over and the others clip;
- the quantized graph on the int8 kernels (oneDNN's int8 convolutions, the integer GEMM, no
  reference kernel) close to torch's float model, a classifier's top-1 kept;
- the QDQ file the ONNX exporter writes, run by ONNX Runtime (2 threads, its graph optimizations
  off: the QDQ graph's own f32 semantics, not its int8 kernels, which saturate 16-bit pairs on
  CPUs without VNNI), within a quantization step of esgraph's int8 run; its weights' codes,
  scales and biases against numpy's quantization of torch's weights;
- the per-layer report: one layer per site, named as the caller's graph names its nodes, the
  float results' ranges against torch's, max error and SQNR against ONNX Runtime's run of the
  exported file's intermediate values;
- the options (per-tensor weights, symmetric activations, keep_float by node and by op name),
  batch norms folded before quantizing, residual sums, max pools, Gemm products;
- bad arguments as esgraph errors that leave the graph usable; the quantized graph saved, loaded
  and compiled to the same outputs.
The edges at the end each failed on the quantizer as first written."""

import gc
import io
import math
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from onnx import numpy_helper, shape_inference  # noqa: E402

import esgraph  # noqa: E402
import esgraph.onnx  # noqa: E402
from esgraph import ops  # noqa: E402

from numerics import rng_for  # noqa: E402

nn = torch.nn
F32 = np.float32
THREADS = 2


# ---- networks ----------------------------------------------------------------------------------
class TwoConvs(nn.Module):
    """conv1 (its result signed: it has no Relu) -> conv2 -> Relu -> 2x2 max pool. Two sites; the
    output, a max of conv2's dequantized codes, lies on conv2's grid."""

    def __init__(self, k1=3):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, k1, padding=k1 // 2)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2)

    def parts(self, x):
        h1 = self.conv1(x)
        h2 = torch.relu(self.conv2(h1))
        return h1, h2, self.pool(h2)

    def forward(self, x):
        return self.parts(x)[-1]


class SmallResNet(nn.Module):
    """A classifier: stem conv + Relu, a residual block (conv, Relu, conv, + identity, Relu),
    a 2x2 max pool, a global mean and a Linear head (a Gemm: matmul with transpose_b, + bias).
    Sites: three convolutions, the residual add, the head's matmul."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.c1 = nn.Conv2d(8, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(8, classes)

    def parts(self, x):
        """Each site's result as the report compares it: the stem's and c1's past their Relu,
        c2's own (the add reads it), the sum past its Relu, the head's product without its bias."""
        h = torch.relu(self.stem(x))
        a = torch.relu(self.c1(h))
        b = self.c2(a)
        s = torch.relu(b + h)
        pooled = self.pool(s).mean((2, 3))
        product = pooled @ self.head.weight.T
        return [h, a, b, s, product], product + self.head.bias

    def forward(self, x):
        return self.parts(x)[1]


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 10)

    def parts(self, x):
        p1 = x @ self.fc1.weight.T
        p2 = torch.relu(p1 + self.fc1.bias) @ self.fc2.weight.T
        return [p1, p2], p2 + self.fc2.bias

    def forward(self, x):
        return self.parts(x)[1]


def seeded(make, seed):
    """A module made with torch's generator seeded, in eval mode, without touching the caller's
    generator state."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return make().eval()


def export(module, example, **options):
    """The module as an ONNX file's bytes (torch.onnx.export, opset 17)."""
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, torch.from_numpy(example), buf, dynamo=False, opset_version=17, **options)
    return buf.getvalue()


def load(module, example, **options):
    return esgraph.onnx.load(export(module, example, **options))


def torch_values(fn, batches):
    """fn's results (a tensor or a list of them) on every batch, concatenated along the batch
    axis, as float64 numpy arrays."""
    outs = []
    with torch.no_grad():
        for b in batches:
            r = fn(torch.from_numpy(b))
            outs.append([r] if isinstance(r, torch.Tensor) else list(r))
    return [np.concatenate([o[i].numpy() for o in outs]).astype(np.float64) for i in range(len(outs[0]))]


def images(rng, n, shape, gains=None):
    """n batches of normal images; batch i scaled by gains[i] (so that extremes come from
    different batches)."""
    gains = gains or [1.0] * n
    return [(rng.standard_normal(shape) * g).astype(F32) for g in gains]


def conv_precisions(model):
    """Each oneDNN convolution's precision ('int8, filters in halves' counts as int8), one
    entry per launch."""
    out = []
    for c in model.stats().get("onednn_convolutions", []):
        out += [c["precision"].split(",")[0]] * c["count"]
    return sorted(out)


def ort_session(source):
    """ONNX Runtime on 2 threads with its graph optimizations off: the QDQ graph as written, in
    f32 (its fused int8 kernels saturate u8 x s8 pairs in 16 bits on CPUs without VNNI)."""
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = source.SerializeToString() if isinstance(source, onnx.ModelProto) else str(source)
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def ort_run(session, batches):
    name = session.get_inputs()[0].name
    return [session.run(None, {name: b}) for b in batches]


def constants(model):
    """The model's constant tensors by name: initializers, Constant nodes, and Reshapes of them
    (the form a quantization's scale may be written in)."""
    values = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant":
            values[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    for n in model.graph.node:
        if n.op_type == "Reshape" and n.input[0] in values and n.input[1] in values:
            values[n.output[0]] = values[n.input[0]].reshape(values[n.input[1]])
    return values


def weight_dequantizations(model):
    """(codes, scale, zero point, axis) of each DequantizeLinear of a constant int8 tensor of
    rank >= 2 (the weights), in node order."""
    values = constants(model)
    out = []
    for n in model.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[0] in values and values[n.input[0]].ndim >= 2:
            axis = [onnx.helper.get_attribute_value(a) for a in n.attribute if a.name == "axis"]
            out.append((values[n.input[0]], values[n.input[1]], values[n.input[2]], axis[0] if axis else 1))
    return out


def activation_quantizations(model):
    """(input name, scale, zero point) of each QuantizeLinear, in node order."""
    values = constants(model)
    return [(n.input[0], values[n.input[1]], values[n.input[2]]) for n in model.graph.node if n.op_type == "QuantizeLinear"]


def quantize_weights_ref(w, axis, per_channel=True):
    """numpy's symmetric s8 quantization of f32 weights: scale max|w| / 127 per index of `axis`
    (or one), codes round-half-even(w / scale) in [-127, 127]."""
    w = np.asarray(w, F32)
    if per_channel:
        others = tuple(i for i in range(w.ndim) if i != axis)
        top = np.abs(w).max(axis=others, keepdims=True)
    else:
        top = np.abs(w).max(keepdims=True)
    scale = np.where(top > 0, top / F32(127), F32(1)).astype(F32)
    codes = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    return codes, scale


def asymmetric_ref(lo, hi):
    """numpy's u8 quantization of [lo, hi] (0 included): scale (hi - lo) / 255 in f32, zero point
    round(-lo / scale) in [0, 255]."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = F32((hi - lo) / 255)
    return scale, int(np.clip(np.rint(-lo / float(scale)), 0, 255))


# ---- calibration: numpy references ---------------------------------------------------------
def histogram(a, bins):
    """Counts of |a| in `bins` bins of width max|a| / bins (the last one taking the top), and
    that width."""
    mag = np.abs(np.ravel(a))
    width = mag.max() / bins
    return np.bincount(np.minimum((mag / width).astype(np.int64), bins - 1), minlength=bins).astype(np.float64), width


def entropy_threshold_ref(a, bins, levels):
    """The TensorRT-style KL threshold for |a|, in numpy: over the histogram of |a| (exact zeros
    left out: the zero point holds them whatever the range), for each candidate i of levels..bins
    bins, the reference P is the first i bins with the mass of the rest added to bin i - 1; the
    candidate Q merges those i bins into `levels` groups and spreads each group's mass evenly over
    its non-empty bins; KL(P || Q) sums over the bins where P > 0, P normalized by the whole mass,
    Q by its own, Q floored at 1e-4 where it is empty. The threshold: i · width for the i of the
    smallest KL, ties (within 1e-9) to the larger i. A candidate whose i bins hold less than the
    mass past them (nothing at all, or most values saturated) is no candidate
    (test_entropy_of_values_away_from_zero_keeps_their_range)."""
    h, width = histogram(a, bins)
    h[0] -= np.count_nonzero(np.ravel(a) == 0)
    total = h.sum()
    above = np.concatenate([np.cumsum(h[::-1])[::-1], [0.0]])  # above[i]: the mass of bins i and up
    best, best_kl = bins, np.inf
    for i in range(levels, bins + 1):
        if h[:i].sum() == 0 or above[i] > h[:i].sum():
            continue
        p = h[:i].copy()
        p[i - 1] += above[i]
        group = np.repeat(np.arange(levels), np.diff(i * np.arange(levels + 1) // levels))
        mass = np.bincount(group, weights=h[:i], minlength=levels)
        filled = np.bincount(group, weights=(h[:i] > 0).astype(np.float64), minlength=levels)
        q = np.where(h[:i] > 0, (mass / np.maximum(filled, 1))[group], 0.0)
        kept = p > 0
        pk, qk = p[kept] / total, np.maximum(q[kept], 1e-4) / h[:i].sum()
        kl = float(np.sum(pk * np.log(pk / qk)))
        if kl <= best_kl + 1e-9:
            best, best_kl = i, min(kl, best_kl)
    return best * width, width


def quantile_bracket(a, share):
    """The order statistics around the `share` quantile of a (numpy's 'lower' and 'higher')."""
    return float(np.quantile(a, share, method="lower")), float(np.quantile(a, share, method="higher"))


@pytest.fixture(scope="module")
def two_convs():
    """TwoConvs exported and loaded, with 3 calibration batches of different gains (the extremes
    come from different batches) and torch's float results on them (conv1's, Relu(conv2)'s, the
    pooled output)."""
    net = seeded(TwoConvs, 1)
    rng = rng_for("two convs")
    batches = images(rng, 3, (2, 3, 16, 16), gains=[0.6, 1.0, 1.4])
    return net, load(net, batches[0]), batches, torch_values(net.parts, batches)


@pytest.fixture(scope="module")
def resnet():
    net = seeded(SmallResNet, 2)
    rng = rng_for("resnet")
    batches = images(rng, 4, (4, 3, 16, 16))
    return net, load(net, batches[0]), batches


# ---- 1. calibration methods ------------------------------------------------------------------
def test_minmax_scale_and_zero_point_are_numpys_over_all_batches(two_convs):
    net, g, batches, (h1, h2, _) = two_convs
    text = str(g)
    q = esgraph.quantize(g, batches, threads=THREADS)
    assert str(g) == text  # the caller's graph is left as it was
    assert [l.op for l in q.layers] == ["conv2d", "conv2d"]
    first, second = q.layers
    # conv1's result is signed: a zero point inside the u8 range
    scale, zero_point = asymmetric_ref(h1.min(), h1.max())
    assert 20 < zero_point < 235
    assert first.quantized_result
    np.testing.assert_allclose(first.scale, scale, rtol=1e-6)
    assert first.zero_point == zero_point
    # Relu(conv2): [0, max], zero point 0
    np.testing.assert_allclose(second.scale, h2.max() / 255, rtol=1e-6)
    assert second.zero_point == 0
    # the range is the union of every batch's: the first batch alone gives numpy's range of it
    alone = esgraph.quantize(g, batches[:1], threads=THREADS).layers[0]
    h1_first = h1[:batches[0].shape[0]]
    np.testing.assert_allclose(alone.scale, asymmetric_ref(h1_first.min(), h1_first.max())[0], rtol=1e-6)
    assert alone.scale < 0.8 * first.scale
    # symmetric: max(|lo|, |hi|) / 127 and zero point 0
    sym = esgraph.quantize(g, batches, symmetric=True, threads=THREADS).layers
    np.testing.assert_allclose(sym[0].scale, np.abs(h1).max() / 127, rtol=1e-6)
    np.testing.assert_allclose(sym[1].scale, h2.max() / 127, rtol=1e-6)
    assert [l.zero_point for l in sym] == [0, 0]


def test_percentile_100_is_minmax(two_convs):
    _, g, batches, _ = two_convs
    minmax = esgraph.quantize(g, batches, threads=THREADS).layers
    everything = esgraph.quantize(g, batches, method="percentile", percentile=100, threads=THREADS).layers
    assert [(l.scale, l.zero_point) for l in everything] == [(l.scale, l.zero_point) for l in minmax]


@pytest.mark.parametrize("percentile, bins", [(99.0, 2048), (99.9, 512)])
def test_percentile_range_is_numpys_quantile_within_a_bin(two_convs, percentile, bins):
    """Asymmetric: each side cut at its share (1 - p/100)/2 of all values: lo within a bin of
    numpy's (1 - p/100)/2 quantile, hi of its 1 - that (or 0 for a side with no values)."""
    _, g, batches, (h1, h2, _) = two_convs
    q = esgraph.quantize(g, batches, method="percentile", percentile=percentile, bins=bins, threads=THREADS)
    outside = (1 - percentile / 100) / 2
    for layer, h in zip(q.layers, (h1, h2)):
        width = np.abs(h).max() / bins
        lo_a, lo_b = quantile_bracket(h, outside) if h.min() < 0 else (0.0, 0.0)
        hi_a, hi_b = quantile_bracket(h, 1 - outside)
        lo_a, lo_b, hi_a, hi_b = lo_a - width, min(lo_b + width, 0.0), hi_a - width, hi_b + width
        span = layer.scale * 255
        assert hi_a - lo_b <= span * (1 + 1e-6) and span <= (hi_b - lo_a) * (1 + 1e-6), (span, lo_a, lo_b, hi_a, hi_b)
        assert math.floor(-lo_b / layer.scale) <= layer.zero_point <= math.ceil(-lo_a / layer.scale)
        # a real cut: narrower than min-max
        assert span < 0.95 * (max(h.max(), 0) - min(h.min(), 0))
    assert q.layers[1].zero_point == 0  # Relu: no negative side
    assert q.layers[0].zero_point > 20


def test_symmetric_percentile_is_numpys_quantile_of_magnitudes(two_convs):
    _, g, batches, (h1, h2, _) = two_convs
    q = esgraph.quantize(g, batches, method="percentile", percentile=99.5, symmetric=True, threads=THREADS)
    for layer, h in zip(q.layers, (h1, h2)):
        width = np.abs(h).max() / 2048
        t_a, t_b = quantile_bracket(np.abs(h), 0.995)
        assert t_a - width <= layer.scale * 127 <= t_b + width
        assert layer.zero_point == 0


@pytest.mark.parametrize("symmetric", [False, True], ids=["asymmetric", "symmetric"])
@pytest.mark.parametrize("bins", [512, 2048])
def test_entropy_threshold_is_a_numpy_kl_search(two_convs, symmetric, bins):
    """conv1's signed result (128 levels a side) and Relu(conv2)'s (half exact zeros; 256 levels
    unless symmetric) against entropy_threshold_ref on torch's float results: the same threshold
    within a bin, and so the same range."""
    _, g, batches, (h1, h2, _) = two_convs
    q = esgraph.quantize(g, batches, method="entropy", bins=bins, symmetric=symmetric, threads=THREADS)
    assert np.mean(h2 == 0) > 0.3  # the Relu's zeros, which the search leaves out
    for layer, h in zip(q.layers, (h1, h2)):
        levels = 256 if (h.min() >= 0 and not symmetric) else 128
        t, width = entropy_threshold_ref(h, bins, levels)
        if symmetric:
            want_span, slack = 2 * t, 2 * width
            assert layer.zero_point == 0
            got_span = layer.scale * 254
        else:
            lo, hi = max(min(h.min(), 0), -t), min(max(h.max(), 0), t)
            want_span, slack = hi - lo, 2 * width
            got_span = layer.scale * 255
            assert abs(layer.zero_point - (-lo / (want_span / 255))) <= 1
        assert abs(got_span - want_span) <= slack + 1e-6 * want_span, (layer.op, got_span, want_span, width)


def test_outliers_stretch_minmax_but_not_percentile_or_entropy():
    """One image pixel at 200 among standard normal values (a 1x1 first convolution: 8 of its
    ~16k results are outliers). min-max spreads conv1's codes over the outliers; percentile
    (99.9) and entropy clip them, and on clean images their quantized models are far closer to
    the float one."""
    net = seeded(lambda: TwoConvs(k1=1), 3)
    rng = rng_for("outliers")
    batches = images(rng, 4, (2, 3, 16, 16))
    batches[1][0, :, 5, 5] = 200.0
    g = load(net, batches[0])
    h1 = torch_values(lambda x: net.conv1(x), batches)[0]
    bulk = np.abs(np.delete(h1, np.s_[2:4], axis=0)).max()  # batch 1's images are rows 2 and 3
    assert np.abs(h1).max() > 20 * bulk
    clean = images(rng_for("outliers, clean"), 2, (2, 3, 16, 16))
    want = np.concatenate(torch_values(net, clean))
    error, scale = {}, {}
    for method, options in [("minmax", {}), ("percentile", {"percentile": 99.9}), ("entropy", {})]:
        q = esgraph.quantize(g, batches, method=method, threads=THREADS, **options)
        first = q.layers[0]
        np.testing.assert_allclose([first.min, first.max], [h1.min(), h1.max()], rtol=1e-5)  # the float range, whatever the method
        scale[method] = first.scale
        model = esgraph.compile(q.graph, threads=THREADS)
        error[method] = np.abs(np.concatenate([model.run([b])[0] for b in clean]) - want).max()
    np.testing.assert_allclose(scale["minmax"], asymmetric_ref(h1.min(), h1.max())[0], rtol=1e-6)
    # entropy's threshold is still numpy's search's (here where the saturated bins past the bulk are empty)
    t, width = entropy_threshold_ref(h1, 2048, 128)
    lo, hi = max(h1.min(), -t), min(h1.max(), t)
    assert abs(scale["entropy"] * 255 - (hi - lo)) <= 2 * width + 1e-6 * (hi - lo), (scale["entropy"] * 255, hi - lo, width)
    for method in ("percentile", "entropy"):
        assert scale[method] < scale["minmax"] / 10, scale
        assert scale[method] * 255 >= bulk * 0.5, scale  # clipped at the bulk, not inside it
        assert error[method] < error["minmax"] / 3, error


# ---- 2. int8 kernels, close to float --------------------------------------------------------
def test_classifier_runs_on_int8_kernels_close_to_float(resnet):
    net, g, batches = resnet
    q = esgraph.quantize(g, batches, method="percentile", threads=THREADS)
    model = esgraph.compile(q.graph, threads=THREADS)
    stats = model.stats()
    assert conv_precisions(model) == ["int8"] * 3
    assert stats["reference_kernels"] == 0
    assert stats["integer_matmuls"] == 1  # the head's product on the integer GEMM
    # the float graph, for comparison: f32 convolutions
    assert conv_precisions(esgraph.compile(g, threads=THREADS)) == ["f32"] * 3
    held_out = images(rng_for("resnet, held out"), 16, (4, 3, 16, 16))
    want = np.concatenate(torch_values(net, held_out))
    got = np.concatenate([model.run([b])[0] for b in held_out])
    spread = want.max() - want.min()
    assert np.abs(got - want).max() <= 0.05 * spread, np.abs(got - want).max() / spread
    assert np.mean(got.argmax(1) == want.argmax(1)) >= 0.9


# ---- 3. the exported QDQ file on ONNX Runtime --------------------------------------------------
def test_exported_file_agrees_with_onnx_runtime_on_the_grid(two_convs, tmp_path):
    """The output is a max pool of conv2's dequantized u8 codes: on conv2's grid in both runtimes,
    and the two agree to the code but for rounding ties (one step at most)."""
    net, g, batches, _ = two_convs
    q = esgraph.quantize(g, batches, threads=THREADS)
    path = tmp_path / "two_convs_int8.onnx"
    esgraph.onnx.save(q.graph, str(path))
    exported = onnx.load(str(path))
    onnx.checker.check_model(exported)
    kinds = [n.op_type for n in exported.graph.node]
    # x, conv1's, Relu(conv2)'s, and the pool's (quantized as conv2's) as it leaves the graph
    assert kinds.count("Conv") == 2 and kinds.count("QuantizeLinear") == 4 and "MaxPool" in kinds
    session = ort_session(path)
    model = esgraph.compile(q.graph, threads=THREADS)
    assert conv_precisions(model) == ["int8", "int8"]
    step = q.layers[1].scale
    assert q.layers[1].zero_point == 0
    held_out = images(rng_for("two convs, held out"), 2, (2, 3, 16, 16))
    data = batches + held_out
    ours = np.concatenate([model.run([b])[0] for b in data])
    theirs = np.concatenate([r[0] for r in ort_run(session, data)])
    for out in (ours, theirs):
        codes = out / step
        assert np.abs(codes - np.rint(codes)).max() < 1e-3  # on the grid
    diff = np.abs(ours - theirs)
    assert diff.max() <= step * (1 + 1e-5)
    assert np.mean(diff > 1e-3 * step) <= 0.01
    # and close to the float model (torch): within a few steps
    want = np.concatenate(torch_values(net, data))
    assert np.abs(ours - want).max() <= 8 * step


def test_exported_classifier_agrees_with_onnx_runtime(resnet, tmp_path):
    net, g, batches = resnet
    q = esgraph.quantize(g, batches, method="percentile", percentile=99.9, threads=THREADS)
    path = tmp_path / "resnet_int8.onnx"
    esgraph.onnx.save(q.graph, str(path))
    onnx.checker.check_model(onnx.load(str(path)))
    model = esgraph.compile(q.graph, threads=THREADS)
    held_out = images(rng_for("resnet, export"), 4, (4, 3, 16, 16))
    ours = np.concatenate([model.run([b])[0] for b in held_out])
    theirs = np.concatenate([r[0] for r in ort_run(ort_session(path), held_out)])
    spread = theirs.max() - theirs.min()
    assert np.abs(ours - theirs).max() <= 0.01 * spread
    np.testing.assert_array_equal(ours.argmax(1), theirs.argmax(1))
    want = np.concatenate(torch_values(net, held_out))  # and both close to the float model
    assert np.abs(theirs - want).max() <= 0.05 * spread


# ---- 4. the report --------------------------------------------------------------------------------
def graph_ops(graph):
    """(result name, op, operand producers' ops) of each top-level node, from Graph.inspect()."""
    info = graph.inspect()
    made_by = {v: n["op"] for n in info["nodes"] for v in n["outputs"]}
    return [(info["values"][n["outputs"][0]]["name"], n["op"], [made_by.get(v) for v in n["inputs"]])
            for n in info["nodes"] if n["outputs"]]


def caller_sites(graph):
    """(result name, op) of the graph's convolutions, products and sums of two computed values,
    as the graph names them."""
    return [(name, op) for name, op, producers in graph_ops(graph)
            if op in ("conv2d", "matmul") or (op == "add" and "constant" not in producers)]


def test_report_names_ops_and_float_ranges(resnet):
    net, g, batches = resnet
    q = esgraph.quantize(g, batches, threads=THREADS)
    assert [l.op for l in q.layers] == ["conv2d", "conv2d", "conv2d", "add", "matmul"]
    assert [(l.name, l.op) for l in q.layers] == caller_sites(g)
    assert [l.quantized_result for l in q.layers] == [True, True, True, True, False]
    results = torch_values(lambda x: net.parts(x)[0], batches)
    for layer, want in zip(q.layers, results):
        np.testing.assert_allclose([layer.min, layer.max], [want.min(), want.max()], rtol=1e-5, atol=1e-6, err_msg=layer.name)
        assert layer.max_error > 0
        assert math.isfinite(layer.sqnr_db) and layer.sqnr_db > 20, layer
        assert layer.max_error < 0.1 * (layer.max - layer.min), layer
    for layer in q.layers[:4]:  # u8 over [min, max] of the float result
        scale, zero_point = asymmetric_ref(layer.min, layer.max)
        np.testing.assert_allclose(layer.scale, scale, rtol=1e-6)
        assert layer.zero_point == zero_point
    assert (q.layers[4].scale, q.layers[4].zero_point) == (0, 0)
    assert re.fullmatch(r"QuantizedLayer\(conv2d_\d+: conv2d, sqnr [\d.]+ dB, max error [\d.e-]+\)", repr(q.layers[0]))


def test_report_errors_match_onnx_runtime_on_the_exported_file(resnet, tmp_path):
    """Each quantized result's values in the quantized graph, read by ONNX Runtime from the
    exported file (the DequantizeLinear after the QuantizeLinear with the layer's scale and zero
    point, made an output), against torch's float results: the max error within one step of the
    report's, the SQNR within 0.5 dB."""
    net, g, batches = resnet
    q = esgraph.quantize(g, batches, method="percentile", threads=THREADS)
    path = tmp_path / "resnet_int8.onnx"
    esgraph.onnx.save(q.graph, str(path))
    model = onnx.load(str(path))
    values = constants(model)
    quantizers = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    dequantized = {n.input[0]: n.output[0] for n in model.graph.node if n.op_type == "DequantizeLinear"}
    outputs = []
    for layer in q.layers[:4]:
        match = [n for n in quantizers if np.isclose(values[n.input[1]], layer.scale, rtol=1e-7, atol=0)
                 and int(values[n.input[2]]) == layer.zero_point]
        assert match, layer
        outputs.append(dequantized[match[0].output[0]])
    for name in outputs:
        model.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    runs = ort_run(ort_session(model), batches)
    results = torch_values(lambda x: net.parts(x)[0], batches)
    for i, layer in enumerate(q.layers[:4]):
        got = np.concatenate([r[1 + i] for r in runs]).astype(np.float64)
        want = results[i]
        assert got.shape == want.shape, (layer.name, got.shape, want.shape)
        error = np.abs(got - want)
        sqnr = 10 * np.log10(np.sum(want ** 2) / np.sum(error ** 2))
        assert abs(layer.max_error - error.max()) <= layer.scale * 1.01, (layer, error.max())
        assert abs(layer.sqnr_db - sqnr) <= 0.5, (layer, sqnr)


# ---- 5. options -----------------------------------------------------------------------------------
@pytest.mark.parametrize("per_channel", [True, False], ids=["per channel", "per tensor"])
def test_exported_weights_and_biases_are_numpys_quantization(two_convs, tmp_path, per_channel):
    """The file's weights: s8 codes round-half-even(w / scale), scale max|w| / 127 per output
    channel ([O], axis 0) or for the whole tensor (a scalar); zero points 0 of the scale's shape.
    conv2's bias rounded to the grid of its sums, input scale x weight scale."""
    net, g, batches, _ = two_convs
    q = esgraph.quantize(g, batches, per_channel=per_channel, threads=THREADS)
    path = tmp_path / "weights.onnx"
    esgraph.onnx.save(q.graph, str(path))
    model = onnx.load(str(path))
    weights = weight_dequantizations(model)
    assert len(weights) == 2
    for (codes, scale, zero_point, axis), conv in zip(weights, (net.conv1, net.conv2)):
        w = conv.weight.detach().numpy()
        want_codes, want_scale = quantize_weights_ref(w, 0, per_channel)
        assert codes.dtype == np.int8 and codes.shape == w.shape
        np.testing.assert_array_equal(codes, want_codes)
        if per_channel:
            assert scale.shape == (w.shape[0],) and axis == 0
        else:
            assert scale.shape == ()
        np.testing.assert_allclose(scale.ravel(), want_scale.ravel(), rtol=1e-7)
        assert zero_point.dtype == np.int8 and zero_point.shape == scale.shape and not zero_point.any()
    # conv2's bias, the Conv's third input
    values = constants(model)
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    bias = values[convs[1].input[2]]
    step = (F32(q.layers[0].scale) * want_scale.ravel()).astype(F32)
    b = net.conv2.bias.detach().numpy()
    np.testing.assert_allclose(bias, np.rint(b / step) * step, rtol=1e-6, atol=0)
    assert np.abs(bias - b).max() <= step.max() / 2 * (1 + 1e-5)
    compiled = esgraph.compile(q.graph, threads=THREADS)
    assert conv_precisions(compiled) == ["int8", "int8"]
    assert compiled.stats()["reference_kernels"] == 0


def test_symmetric_activations_are_int8_around_zero(two_convs, tmp_path):
    net, g, batches, (h1, h2, _) = two_convs
    q = esgraph.quantize(g, batches, symmetric=True, threads=THREADS)
    assert [l.zero_point for l in q.layers] == [0, 0]
    path = tmp_path / "symmetric.onnx"
    esgraph.onnx.save(q.graph, str(path))
    model = onnx.load(str(path))
    quantized = activation_quantizations(model)
    assert len(quantized) == 4  # the images, conv1's result, Relu(conv2)'s, the pool of it (as it leaves)
    x = np.concatenate(batches)
    for (_, scale, _), values in zip(quantized, (x, h1, h2, h2)):
        np.testing.assert_allclose(scale, np.abs(values).max() / 127, rtol=1e-6)
    for _, scale, zero_point in quantized:
        assert zero_point.dtype == np.int8 and zero_point == 0
    inferred = shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type for v in inferred.graph.value_info}
    for n in model.graph.node:
        if n.op_type == "QuantizeLinear":
            assert types[n.output[0]] == onnx.TensorProto.INT8
    compiled = esgraph.compile(q.graph, threads=THREADS)
    assert conv_precisions(compiled) == ["int8", "int8"]
    ours = compiled.run([batches[0]])[0]
    theirs = ort_run(ort_session(path), batches[:1])[0][0]
    assert np.abs(ours - theirs).max() <= q.layers[1].scale * (1 + 1e-5)


def test_keep_float_by_node_name_and_by_op_name(resnet):
    net, g, batches = resnet
    every = esgraph.quantize(g, batches, threads=THREADS).layers
    names = [l.name for l in every]
    # a node by name: the residual block's first convolution stays f32
    q = esgraph.quantize(g, batches, keep_float=[names[1]], threads=THREADS)
    assert [l.name for l in q.layers] == names[:1] + names[2:]
    model = esgraph.compile(q.graph, threads=THREADS)
    assert conv_precisions(model) == ["f32", "int8", "int8"]
    # ops by name
    q = esgraph.quantize(g, batches, keep_float=["add"], threads=THREADS)
    assert [l.op for l in q.layers] == ["conv2d", "conv2d", "conv2d", "matmul"]
    assert "quantized_add" not in esgraph.compile(q.graph, threads=THREADS).to_dot()
    q = esgraph.quantize(g, batches, keep_float=["matmul"], threads=THREADS)
    assert [l.op for l in q.layers] == ["conv2d", "conv2d", "conv2d", "add"]
    model = esgraph.compile(q.graph, threads=THREADS)
    assert model.stats()["integer_matmuls"] == 0 and conv_precisions(model) == ["int8"] * 3
    q = esgraph.quantize(g, batches, keep_float=("matmul", "add", names[0]), threads=THREADS)
    assert [l.name for l in q.layers] == names[1:3]
    # the layers kept are the same as before
    for layer in q.layers:
        same = next(l for l in every if l.name == layer.name)
        assert (layer.min, layer.max) == (same.min, same.max)
    # still close to the float model
    want = np.concatenate(torch_values(net, batches))
    got = np.concatenate([esgraph.compile(q.graph, threads=THREADS).run([b])[0] for b in batches])
    assert np.abs(got - want).max() <= 0.05 * (want.max() - want.min())


def test_batch_norm_is_folded_before_quantizing(tmp_path):
    """A batch norm (exported as BatchNormalization, decomposed by the importer) is folded into
    its convolution first: two sites, named as the caller's graph names its convolutions; the
    first's range is torch's Relu(bn(conv)); the file's filters are numpy's quantization of the
    folded filters w · gamma / sqrt(var + eps) (a code off by one only at a rounding tie);
    keep_float by the caller's name of the second convolution keeps that one."""
    def make():
        m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                          nn.MaxPool2d(2))
        with torch.no_grad():
            m[1].running_mean.uniform_(-1, 1), m[1].running_var.uniform_(0.5, 2), m[1].weight.uniform_(0.5, 2), m[1].bias.uniform_(-1, 1)
        return m
    net = seeded(make, 4)
    batches = images(rng_for("batch norm"), 2, (2, 3, 16, 16))
    g = load(net, batches[0], training=torch.onnx.TrainingMode.PRESERVE)
    assert "rsqrt" in [op for _, op, _ in graph_ops(g)]  # the batch norm is in the caller's graph
    sites = [site for site in caller_sites(g) if site[1] == "conv2d"]
    assert len(sites) == 2
    q = esgraph.quantize(g, batches, threads=THREADS)
    assert [(l.name, l.op) for l in q.layers] == sites
    first = torch_values(lambda x: net[:3](x), batches)[0]
    np.testing.assert_allclose([q.layers[0].min, q.layers[0].max], [first.min(), first.max()], rtol=1e-5, atol=1e-6)
    bn = net[1]
    gain = (bn.weight / torch.sqrt(bn.running_var + bn.eps)).detach().numpy().astype(np.float64)
    folded = net[0].weight.detach().numpy().astype(np.float64) * gain[:, None, None, None]
    path = tmp_path / "bn.onnx"
    esgraph.onnx.save(q.graph, str(path))
    codes, scale, _, _ = weight_dequantizations(onnx.load(str(path)))[0]
    top = np.abs(folded).max(axis=(1, 2, 3))
    np.testing.assert_allclose(scale, top / 127, rtol=1e-6)
    exact = folded / (top / 127)[:, None, None, None]
    near_tie = np.abs(np.abs(exact - np.floor(exact)) - 0.5) < 1e-4
    differ = codes != np.rint(exact)
    assert not (differ & ~near_tie).any()
    compiled = esgraph.compile(q.graph, threads=THREADS)
    assert conv_precisions(compiled) == ["int8", "int8"]
    want = np.concatenate(torch_values(net, batches))
    got = np.concatenate([compiled.run([b])[0] for b in batches])
    assert np.abs(got - want).max() <= 0.05 * want.max()
    # the second convolution kept in f32, by the name the caller's graph prints
    kept = esgraph.quantize(g, batches, keep_float=[sites[1][0]], threads=THREADS)
    assert [l.name for l in kept.layers] == [sites[0][0]]
    assert conv_precisions(esgraph.compile(kept.graph, threads=THREADS)) == ["f32", "int8"]
    esgraph.onnx.save(kept.graph, str(path))
    (codes, _, _, _), = weight_dequantizations(onnx.load(str(path)))
    assert codes.shape == (8, 3, 3, 3)  # the first one's filters are the ones quantized


# ---- 6. residual sums and max pools ------------------------------------------------------------
def test_residual_sum_and_max_pool_run_on_integers(resnet, tmp_path):
    """The residual add is a site, its result quantized past its Relu (zero point 0, numpy's scale
    of torch's sum); the max pool reads those codes and its result is quantized as they are (the
    same scale and zero point in the file); both run on integers (quantized_add, the pool over u8)."""
    net, g, batches = resnet
    q = esgraph.quantize(g, batches, threads=THREADS)
    add = next(l for l in q.layers if l.op == "add")
    s = torch_values(lambda x: net.parts(x)[0][3], batches)[0]
    assert add.quantized_result and add.zero_point == 0
    np.testing.assert_allclose(add.scale, s.max() / 255, rtol=1e-6)
    path = tmp_path / "residual.onnx"
    esgraph.onnx.save(q.graph, str(path))
    model = onnx.load(str(path))
    pooled = next(n.output[0] for n in model.graph.node if n.op_type == "MaxPool")
    after_pool = [(scale, zero_point) for name, scale, zero_point in activation_quantizations(model) if name == pooled]
    assert len(after_pool) == 1
    np.testing.assert_allclose(after_pool[0][0], add.scale, rtol=1e-7)
    assert after_pool[0][1] == add.zero_point
    compiled = esgraph.compile(q.graph, threads=THREADS)
    dot = compiled.to_dot()
    assert re.search(r'label="[^"]*quantized_add', dot)
    assert re.search(r"u8\[4,8,8,8\]", dot)  # the pool's result: codes
    assert compiled.stats()["reference_kernels"] == 0
    ours = compiled.run([batches[0]])[0]
    theirs = ort_run(ort_session(path), batches[:1])[0][0]
    assert np.abs(ours - theirs).max() <= 0.01 * (theirs.max() - theirs.min())


def test_a_graph_of_two_inputs_takes_each_batch_in_input_order():
    """relu(conv(x)) + relu(conv(z)) -> Relu -> max pool, built directly: each batch a list
    [x, z]; each branch's range is numpy's over its own input, the sum's over both; the arrays
    given in the other order are refused by shape."""
    rng = rng_for("two inputs")
    wx, wz = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(F32), (rng.standard_normal((4, 2, 3, 3)) * 0.3).astype(F32)
    with esgraph.GraphBuilder("two inputs") as b:
        x, z = b.input("x", esgraph.f32, [1, 3, 8, 8]), b.input("z", esgraph.f32, [1, 2, 8, 8])
        a = ops.relu(ops.conv2d(x, b.constant(wx), pads=[1, 1, 1, 1]))
        c = ops.relu(ops.conv2d(z, b.constant(wz), pads=[1, 1, 1, 1]))
        g = b.build([ops.max_pool2d(ops.relu(ops.add(a, c)), [2, 2], strides=[2, 2])])
    xs = [rng.standard_normal((1, 3, 8, 8)).astype(F32) for _ in range(2)]
    zs = [(rng.standard_normal((1, 2, 8, 8)) * 3).astype(F32) for _ in range(2)]
    q = esgraph.quantize(g, [[x_, z_] for x_, z_ in zip(xs, zs)], threads=THREADS)
    with torch.no_grad():
        ra = torch.relu(torch.conv2d(torch.from_numpy(np.concatenate(xs)), torch.from_numpy(wx), padding=1)).numpy()
        rc = torch.relu(torch.conv2d(torch.from_numpy(np.concatenate(zs)), torch.from_numpy(wz), padding=1)).numpy()
    assert [l.op for l in q.layers] == ["conv2d", "conv2d", "add"]
    for layer, want in zip(q.layers, (ra, rc, np.maximum(ra + rc, 0))):
        np.testing.assert_allclose(layer.max, want.max(), rtol=1e-5)
        np.testing.assert_allclose(layer.scale, want.max() / 255, rtol=1e-5)
    assert ra.max() < 0.7 * rc.max()  # the inputs' ranges differ: a swap would show
    model = esgraph.compile(q.graph, threads=THREADS)
    assert conv_precisions(model) == ["int8", "int8"]
    assert re.search(r'label="[^"]*quantized_add', model.to_dot())  # alone, or fused with what follows
    with pytest.raises(esgraph.ShapeError, match=r"got the shape \[1,2,8,8\]"):
        esgraph.quantize(g, [[zs[0], xs[0]]], threads=THREADS)


def test_an_all_zero_filter_gets_scale_1_and_zero_codes(tmp_path):
    """A filter of zeros: scale 1 (any would do), codes 0; its channel's output is its bias on
    the grids (the bias's, then the result's), as ONNX Runtime computes the exported file."""
    rng = rng_for("zero filter")
    w = rng.standard_normal((4, 3, 3, 3)).astype(F32)
    w[2] = 0
    with esgraph.GraphBuilder("zero filter") as b:
        x = b.input("x", esgraph.f32, [1, 3, 8, 8])
        y = ops.relu(ops.conv2d(x, b.constant(w), bias=b.constant(np.full(4, 0.5, F32)), pads=[1, 1, 1, 1]))
        g = b.build([ops.max_pool2d(y, [2, 2], strides=[2, 2])])
    batches = [rng.standard_normal((1, 3, 8, 8)).astype(F32) for _ in range(2)]
    q = esgraph.quantize(g, batches, threads=THREADS)
    path = tmp_path / "zero_filter.onnx"
    esgraph.onnx.save(q.graph, str(path))
    (codes, scale, _, _), = weight_dequantizations(onnx.load(str(path)))
    assert scale[2] == 1 and not codes[2].any()
    np.testing.assert_allclose(np.delete(scale, 2), np.abs(np.delete(w, 2, axis=0)).max(axis=(1, 2, 3)) / 127, rtol=1e-7)
    model = esgraph.compile(q.graph, threads=THREADS)
    assert conv_precisions(model) == ["int8"]
    ours = model.run([batches[0]])[0]
    theirs = ort_run(ort_session(path), batches[:1])[0][0]
    assert np.abs(ours - theirs).max() <= q.layers[0].scale * (1 + 1e-5)
    assert np.abs(ours[0, 2] - 0.5).max() <= q.layers[0].scale  # within a step of the bias


def test_a_depthwise_convolution_runs_on_int8_and_agrees_with_onnx_runtime(tmp_path):
    net = seeded(lambda: nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.ReLU(),
                                       nn.MaxPool2d(2)), 9)
    batches = images(rng_for("depthwise"), 2, (2, 3, 16, 16))
    q = esgraph.quantize(load(net, batches[0]), batches, threads=THREADS)
    model = esgraph.compile(q.graph, threads=THREADS)
    assert conv_precisions(model) == ["int8", "int8"] and model.stats()["reference_kernels"] == 0
    path = tmp_path / "depthwise.onnx"
    esgraph.onnx.save(q.graph, str(path))
    ours = np.concatenate([model.run([b])[0] for b in batches])
    theirs = np.concatenate([r[0] for r in ort_run(ort_session(path), batches)])
    step = q.layers[1].scale
    assert np.abs(ours - theirs).max() <= step * (1 + 1e-5)
    assert np.abs(ours - np.concatenate(torch_values(net, batches))).max() <= 8 * step


# ---- 7. products --------------------------------------------------------------------------------------
def test_linear_layers_are_products_with_f32_results():
    net = seeded(MLP, 5)
    rng = rng_for("mlp")
    batches = [rng.standard_normal((8, 32)).astype(F32) for _ in range(3)]
    g = load(net, batches[0])
    q = esgraph.quantize(g, batches, threads=THREADS)
    assert [(l.op, l.quantized_result, l.scale, l.zero_point) for l in q.layers] == [("matmul", False, 0, 0)] * 2
    assert [(l.name, l.op) for l in q.layers] == caller_sites(g)
    for layer, want in zip(q.layers, torch_values(lambda x: net.parts(x)[0], batches)):
        np.testing.assert_allclose([layer.min, layer.max], [want.min(), want.max()], rtol=1e-5, atol=1e-6)
        assert layer.sqnr_db > 25 and layer.max_error > 0
    model = esgraph.compile(q.graph, threads=THREADS)
    assert model.stats()["integer_matmuls"] == 2 and model.stats()["reference_kernels"] == 0
    held_out = [rng.standard_normal((8, 32)).astype(F32) for _ in range(2)]
    want = np.concatenate(torch_values(net, held_out))
    got = np.concatenate([model.run([b])[0] for b in held_out])
    assert np.abs(got - want).max() <= 0.02 * (want.max() - want.min())


@pytest.mark.parametrize("transpose_b", [False, True])
def test_product_is_numpys_qdq_arithmetic(transpose_b, tmp_path):
    """matmul(x, W) built directly (W [K, N], a scale per column; or W [N, K] transposed, a scale
    per row): the quantized graph computes dequantize(quantize(x)) · dequantize(codes of W), x's
    u8 scale and zero point from its range over both batches, all in numpy; ONNX Runtime on the
    exported file agrees."""
    rng = rng_for("product", transpose_b)
    w = rng.standard_normal((16, 24) if transpose_b else (24, 16)).astype(F32)
    batches = [(rng.standard_normal((5, 24)) + 0.3).astype(F32) for _ in range(2)]
    with esgraph.GraphBuilder("product") as b:
        y = ops.matmul(b.input("x", esgraph.f32, [5, 24]), b.constant(w), transpose_b=transpose_b)
        g = b.build([y])
    q = esgraph.quantize(g, batches, threads=THREADS)
    assert [(l.op, l.quantized_result) for l in q.layers] == [("matmul", False)]
    x_all = np.concatenate(batches)
    x_scale, x_zero = asymmetric_ref(x_all.min(), x_all.max())
    codes, w_scale = quantize_weights_ref(w, 0 if transpose_b else 1)
    w_dq = codes.astype(np.float64) * w_scale
    model = esgraph.compile(q.graph, threads=THREADS)
    assert model.stats()["integer_matmuls"] == 1
    path = tmp_path / "product.onnx"
    esgraph.onnx.save(q.graph, str(path))
    session = ort_session(path)
    for x in batches + [rng.standard_normal((5, 24)).astype(F32) * 2]:  # the last one past the range: saturated
        x_codes = np.clip(np.rint(x / x_scale) + x_zero, 0, 255)
        x_dq = (x_codes - x_zero) * np.float64(x_scale)
        want = x_dq @ (w_dq.T if transpose_b else w_dq)
        for got in (model.run([x])[0], session.run(None, {"x": x})[0]):
            assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


# ---- 8. bad arguments --------------------------------------------------------------------------------
def _no_sites_graph():
    with esgraph.GraphBuilder("no sites") as b:
        x = b.input("x", esgraph.f32, [2, 3, 16, 16])
        return b.build([ops.max_pool2d(ops.relu(x), [2, 2], strides=[2, 2])])


BAD = [
    ("no batches", lambda bs: [], {}, esgraph.InvalidArgumentError, r"no calibration batch"),
    ("method", lambda bs: bs, {"method": "kl"}, esgraph.InvalidArgumentError, r"method 'kl'; valid: 'minmax', 'percentile', 'entropy'"),
    ("percentile 0", lambda bs: bs, {"method": "percentile", "percentile": 0}, esgraph.InvalidArgumentError,
     r"percentile 0(\.0*)? is not in \(0, 100\]"),
    ("percentile 100.5", lambda bs: bs, {"method": "percentile", "percentile": 100.5}, esgraph.InvalidArgumentError,
     r"percentile 100\.50* is not in \(0, 100\]"),
    ("percentile nan", lambda bs: bs, {"percentile": float("nan")}, esgraph.InvalidArgumentError, r"percentile nan is not in \(0, 100\]"),
    ("bins 255", lambda bs: bs, {"bins": 255}, esgraph.InvalidArgumentError, r"bins 255 is not in \[256, 8192\]"),
    ("bins 8193", lambda bs: bs, {"method": "entropy", "bins": 8193}, esgraph.InvalidArgumentError,
     r"bins 8193 is not in \[256, 8192\]"),
    ("keep_float typo", lambda bs: bs, {"keep_float": ["conv2d_99"]}, esgraph.InvalidArgumentError,
     r"keep_float names 'conv2d_99', which is no node, result or op of the graph"),
    ("keep_float everything", lambda bs: bs, {"keep_float": ["conv2d"]}, esgraph.InvalidArgumentError, r"nothing to quantize"),
    ("threads", lambda bs: bs, {"threads": -1}, esgraph.InvalidArgumentError, r"threads -1 is negative"),
    ("f64 batch", lambda bs: [bs[0], bs[1].astype(np.float64)], {}, esgraph.DTypeError, r"input 0 \(.*f32\[2,3,16,16\]\) got f64 data"),
    ("i32 batch", lambda bs: [bs[0].astype(np.int32)], {}, esgraph.DTypeError, r"got i32 data"),
    ("shape", lambda bs: [bs[0][:, :, :8]], {}, esgraph.ShapeError, r"input 0 \(.*f32\[2,3,16,16\]\) got the shape \[2,3,8,16\]"),
    ("batch size", lambda bs: [bs[0], bs[1][:1]], {}, esgraph.ShapeError, r"got the shape \[1,3,16,16\]"),
    ("not numbers", lambda bs: [bs[0], [np.array(["a", "b"])]], {}, TypeError,
     r"calibration batch 1, input 0 is not a numpy array of a dtype esgraph has"),
]


@pytest.mark.parametrize("make, options, error, message", [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_arguments_raise_and_leave_the_graph_usable(two_convs, make, options, error, message):
    net, g, batches, _ = two_convs
    text = str(g)
    with pytest.raises(error, match=message):
        esgraph.quantize(g, make(batches), **options)
    assert str(g) == text
    want = torch_values(net, batches[:1])[0]
    got = esgraph.compile(g, threads=THREADS).run([batches[0]])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_graph_without_sites_is_refused():
    g = _no_sites_graph()
    batch = rng_for("no sites").standard_normal((2, 3, 16, 16)).astype(F32)
    with pytest.raises(esgraph.InvalidArgumentError, match=r"nothing to quantize: no convolution or product with constant f32 weights"):
        esgraph.quantize(g, [batch])
    np.testing.assert_array_equal(esgraph.compile(g).run([batch])[0], np.maximum(batch, 0).reshape(2, 3, 8, 2, 8, 2).max((3, 5)))


def _reshape_by_input_model():
    """x [2, 6] reshaped by the values of the input `shape`, times a constant W [3, 4] (the
    product's result is the graph output y)."""
    helper = onnx.helper
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("MatMul", ["r", "W"], ["y"])]
    graph = helper.make_graph(nodes, "reshaped by an input",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 6]),
                               helper.make_tensor_value_info("shape", onnx.TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(rng_for("reshape by input").standard_normal((3, 4)).astype(F32), "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_what_is_not_a_graph_is_refused_by_type():
    waiting = esgraph.onnx.load(_reshape_by_input_model())
    assert not isinstance(waiting, esgraph.Graph)
    waits = r"quantize: a Graph to quantize, got ValueDependentGraph: its shapes wait for the values of its inputs"
    with pytest.raises(TypeError, match=waits):
        esgraph.quantize(waiting, [[np.ones((2, 6), F32), np.array([4, 3])]])
    with pytest.raises(TypeError, match=r"quantize: a Graph to quantize, got str"):
        esgraph.quantize("model.onnx", [np.ones((2, 6), F32)])
    # the shape operand frozen at import: a graph, and its product a site
    g = esgraph.onnx.load(_reshape_by_input_model(), constants={"shape": np.array([4, 3])})
    assert [l.op for l in esgraph.quantize(g, [np.ones((2, 6), F32)]).layers] == ["matmul"]


def test_boundary_options_are_accepted(two_convs):
    _, g, batches, (h1, _, _) = two_convs
    for options in ({"method": "percentile", "bins": 256, "percentile": 1e-9}, {"method": "entropy", "bins": 512},
                    {"method": "percentile", "bins": 8192}):
        q = esgraph.quantize(g, batches[:1], threads=THREADS, **options)
        assert len(q.layers) == 2 and all(l.scale > 0 for l in q.layers), options


def test_calibration_forms_and_threads_give_the_same_report(two_convs):
    """One array per batch (a graph of one input), a list or tuple of one, Fortran-ordered arrays,
    1 or 2 threads: the same report, value for value."""
    _, g, batches, _ = two_convs

    def report(calibration, threads=THREADS):
        return [(l.name, l.scale, l.zero_point, l.min, l.max, l.max_error, l.sqnr_db)
                for l in esgraph.quantize(g, calibration, method="percentile", threads=threads).layers]

    want = report(batches)
    assert report([[b] for b in batches]) == want
    assert report(tuple((b,) for b in batches)) == want
    assert report([np.asfortranarray(b) for b in batches]) == want
    assert report(batches, threads=1) == want


def test_defaults_are_minmax_per_channel_asymmetric_and_percentile_99_99_over_2048_bins(two_convs):
    _, g, batches, _ = two_convs

    def report(**options):
        return [(l.scale, l.zero_point) for l in esgraph.quantize(g, batches, threads=THREADS, **options).layers]

    assert report() == report(method="minmax", per_channel=True, symmetric=False, keep_float=())
    assert report(method="percentile") == report(method="percentile", percentile=99.99, bins=2048)
    assert report(method="percentile") != report(method="percentile", percentile=99.0)


def test_a_dynamic_batch_calibrates_on_batches_of_any_size():
    """A model exported with a dynamic batch axis: calibration batches of 1, 3 and 2 images give
    numpy's min-max range over all of them, and the quantized graph runs at other batch sizes."""
    net = seeded(TwoConvs, 1)
    example = images(rng_for("dynamic"), 1, (2, 3, 16, 16))[0]
    g = esgraph.onnx.load(export(net, example, input_names=["x"], dynamic_axes={"x": {0: "n"}}))
    batches = [images(rng_for("dynamic", n), 1, (n, 3, 16, 16))[0] for n in (1, 3, 2)]
    q = esgraph.quantize(g, batches, threads=THREADS)
    h1 = torch_values(lambda x: net.parts(x)[0], batches)[0]
    scale, zero_point = asymmetric_ref(h1.min(), h1.max())
    np.testing.assert_allclose(q.layers[0].scale, scale, rtol=1e-6)
    assert q.layers[0].zero_point == zero_point
    model = esgraph.compile(q.graph, threads=THREADS)
    for n in (1, 4):
        x = images(rng_for("dynamic, run", n), 1, (n, 3, 16, 16), gains=[0.8])[0]
        got = model.run([x])[0]
        assert got.shape == (n, 8, 8, 8)
        assert np.abs(got - torch_values(net, [x])[0]).max() <= 6 * q.layers[1].scale
    assert conv_precisions(model) == ["int8", "int8"]


def test_a_clip_bounds_the_result_range():
    """conv -> ReLU6 (an ONNX Clip): the result is quantized past the Clip, over [0, 6] when the
    convolution's values go past 6."""
    net = seeded(lambda: nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU6(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                                       nn.MaxPool2d(2)), 7)
    batches = [x * 8 for x in images(rng_for("relu6"), 2, (2, 3, 16, 16))]
    g = load(net, batches[0])
    pre = torch_values(lambda x: net[0](x), batches)[0]
    assert pre.max() > 6
    q = esgraph.quantize(g, batches, threads=THREADS)
    first = q.layers[0]
    assert (first.min, first.max, first.zero_point) == (0, 6, 0)
    np.testing.assert_allclose(first.scale, 6 / 255, rtol=1e-6)
    assert conv_precisions(esgraph.compile(q.graph, threads=THREADS)) == ["int8", "int8"]


# ---- 9. save and load -----------------------------------------------------------------------------
def test_quantized_graph_saves_loads_and_compiles_the_same(resnet, tmp_path):
    _, g, batches = resnet
    q = esgraph.quantize(g, batches, method="entropy", threads=THREADS)
    path = tmp_path / "quantized.esg"
    q.graph.save(str(path))
    loaded = esgraph.Graph.load(str(path))
    copied = esgraph.Graph.deserialize(q.graph.serialize())
    assert str(loaded) == str(q.graph) == str(copied)
    models = [esgraph.compile(x, threads=THREADS) for x in (q.graph, loaded, copied)]
    for m in models:
        assert conv_precisions(m) == ["int8"] * 3 and m.stats()["integer_matmuls"] == 1
    for b in batches + images(rng_for("resnet, saved"), 1, (4, 3, 16, 16)):
        first = models[0].run([b])[0]
        for m in models[1:]:
            np.testing.assert_array_equal(m.run([b])[0], first)


def test_result_outlives_its_inputs(two_convs):
    """The Quantized result's graph and layers stay valid after the input graph and the
    calibration arrays are gone."""
    net, g, batches, _ = two_convs
    g2 = load(net, batches[0])
    calibration = [b.copy() for b in batches]
    q = esgraph.quantize(g2, calibration, threads=THREADS)
    graph, layers = q.graph, q.layers
    del g2, calibration, q
    gc.collect()
    assert [l.op for l in layers] == ["conv2d", "conv2d"]
    want = torch_values(net, batches[:1])[0]
    got = esgraph.compile(graph, threads=THREADS).run([batches[0]])[0]
    assert np.abs(got - want).max() <= 8 * layers[1].scale


# ---- layer by layer, against ONNX's QDQ semantics -------------------------------------------------
def layers_of(model):
    """Each quantized layer of a QDQ model: the codes it reads (outputs of QuantizeLinear nodes, or
    graph inputs) and the codes it writes (a QuantizeLinear's output), found by walking back from
    each QuantizeLinear that does not quantize a graph input."""
    produced = {o: n for n in model.graph.node for o in n.output}
    initializers = {i.name for i in model.graph.initializer}
    layers = []
    for q in model.graph.node:
        if q.op_type != "QuantizeLinear" or q.input[0] not in produced:
            continue
        reads, stack, seen = set(), [q.input[0]], set()
        while stack:
            name = stack.pop()
            if name in seen or name in initializers or not name:
                continue
            seen.add(name)
            node = produced.get(name)
            if node is None or node.op_type == "QuantizeLinear":
                reads.add(name)  # codes (or a graph input) the layer starts from
                continue
            stack.extend(node.input)
        layers.append((sorted(reads), q.output[0]))
    return layers


def check_layer_by_layer(path, batch, tmp_path):
    """Every layer of the QDQ file at `path` compiled by esgraph on its own, fed ONNX Runtime's
    codes for its inputs (the QDQ graph run as written, optimizations off), gives the reference's
    codes within one quantization step. Returns each layer's share of codes one step off."""
    from onnx import helper, utils
    model = shape_inference.infer_shapes(onnx.load(str(path)))
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    known = {o.name for o in probe.graph.output}
    for node in probe.graph.node:
        for name in node.output:
            if name and name not in known:
                probe.graph.output.append(helper.make_empty_tensor_value_info(name))
    session = ort_session(probe)
    values = dict(zip([o.name for o in session.get_outputs()], session.run(None, {session.get_inputs()[0].name: batch})))
    values[session.get_inputs()[0].name] = batch
    shares = []
    for k, (reads, writes) in enumerate(layers_of(model)):
        part = tmp_path / f"layer{k}.onnx"
        utils.extract_model(str(path), str(part), reads, [writes])
        compiled = esgraph.compile(esgraph.onnx.load(str(part)), threads=THREADS)
        got = compiled.run([values[name] for name in reads])[0]
        want = values[writes]
        assert got.dtype == want.dtype and got.shape == want.shape, writes
        steps = np.abs(got.astype(np.int32) - want.astype(np.int32))
        assert steps.max() <= 1, (writes, int(steps.max()))
        on_reference = {r["op"] for r in compiled.stats().get("reference_ops", [])}
        assert not on_reference & {"quantized_conv2d", "quantized_add", "matmul_integer", "conv2d", "matmul"}, (writes, on_reference)
        assert all(p == "int8" for p in conv_precisions(compiled)), writes
        shares.append(float(np.mean(steps)))
    return shares


def test_each_layer_is_within_one_step_of_the_qdq_graph(resnet, tmp_path):
    """The small ResNet quantized and exported: each layer alone (its convolution, sum or pool on
    esgraph's integer kernels) fed the reference's codes, within one step of ONNX's QDQ arithmetic
    (ties of the requantization round either way); and the network's output beside ONNX Runtime's
    own optimized run, against the same reference."""
    net, g, batches = resnet
    q = esgraph.quantize(g, batches, threads=THREADS)
    path = tmp_path / "resnet_int8.onnx"
    esgraph.onnx.save(q.graph, str(path))
    shares = check_layer_by_layer(path, batches[0], tmp_path)
    assert len(shares) == 6  # the stem's, c1's, c2's and the sum's results, the pool's, the head's input
    assert max(shares) < 0.01  # ties are rare
    session = ort_session(path)
    feed = {session.get_inputs()[0].name: batches[0]}
    reference = session.run(None, feed)[0]
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    optimized = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]).run(None, feed)[0]
    got = esgraph.compile(q.graph, threads=THREADS).run([batches[0]])[0]
    esg_error, ort_error = np.abs(got - reference).max(), np.abs(optimized - reference).max()
    assert esg_error <= max(ort_error, 1e-4 * np.abs(reference).max()), (esg_error, ort_error)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "efficientnet_b0"])
def test_torchvision_models_are_within_one_step_layer_by_layer(name, tmp_path):
    """The same check on torchvision's CNNs (random weights, 64 x 64 images), where it has them."""
    models = pytest.importorskip("torchvision.models")
    net = seeded(getattr(models, name), 3)
    rng = rng_for(name)
    batches = images(rng, 2, (2, 3, 64, 64))
    q = esgraph.quantize(load(net, batches[0]), batches, threads=THREADS)
    path = tmp_path / f"{name}_int8.onnx"
    esgraph.onnx.save(q.graph, str(path))
    shares = check_layer_by_layer(path, batches[0], tmp_path)
    assert len(shares) >= 20 and max(shares) < 0.01


# ---- edges found while writing these (each failed before its fix) ------------------------------------
def test_a_quantized_result_that_is_the_graph_output_is_quantized(two_convs):
    net, _, batches, (_, h2, _) = two_convs
    ends_in_conv = nn.Sequential(net.conv1, net.conv2, nn.ReLU()).eval()  # Relu(conv2) is the output itself
    g = load(ends_in_conv, batches[0])
    q = esgraph.quantize(g, batches, threads=THREADS)
    last = q.layers[-1]
    assert last.quantized_result and last.scale > 0
    model = esgraph.compile(q.graph, threads=THREADS)
    out = model.run([batches[0]])[0]
    codes = out / last.scale
    off_grid = float(np.abs(codes - np.rint(codes)).max())
    assert off_grid < 1e-3, off_grid  # on the grid the report gives
    assert conv_precisions(model) == ["int8", "int8"]


def test_a_batch_with_more_arrays_than_inputs_is_refused(two_convs):
    _, g, batches, _ = two_convs
    with pytest.raises(esgraph.InvalidArgumentError, match=r"batch 0"):
        esgraph.quantize(g, [[batches[0], batches[1]]], threads=THREADS)


def test_a_batch_with_fewer_arrays_than_inputs_is_refused():
    """Run in a child process: the read past the buffers may crash."""
    script = textwrap.dedent("""
        import numpy as np, esgraph
        from esgraph import ops
        rng = np.random.default_rng(0)
        with esgraph.GraphBuilder("two inputs") as b:
            x, z = b.input("x", esgraph.f32, [1, 3, 8, 8]), b.input("z", esgraph.f32, [1, 4, 8, 8])
            h = ops.relu(ops.conv2d(x, b.constant(rng.standard_normal((4, 3, 3, 3)).astype(np.float32)), pads=[1, 1, 1, 1]))
            g = b.build([ops.add(h, z)])
        a = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
        try:
            esgraph.quantize(g, [[a], [a]], threads=1)
            print("no error")
        except esgraph.InvalidArgumentError as e:
            print("InvalidArgumentError:", e)
        except Exception as e:
            print(type(e).__name__ + ":", e)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("InvalidArgumentError:") and "batch" in run.stdout, run.stdout


def test_entropy_of_values_away_from_zero_keeps_their_range():
    """x uniform in [1, 2] into a product: entropy should keep x's range about [0, 2] (as min-max
    and percentile do), not clip it at 2/8."""
    rng = rng_for("away from zero")
    w = rng.standard_normal((16, 8)).astype(F32)
    with esgraph.GraphBuilder("offset") as b:
        g = b.build([ops.matmul(b.input("x", esgraph.f32, [4, 16]), b.constant(w))])
    batches = [rng.uniform(1, 2, (4, 16)).astype(F32) for _ in range(2)]
    want = batches[0].astype(np.float64) @ w
    for method in ("minmax", "percentile", "entropy"):
        q = esgraph.quantize(g, batches, method=method, threads=THREADS)
        got = esgraph.compile(q.graph, threads=THREADS).run([batches[0]])[0]
        assert q.layers[0].sqnr_db > 30, (method, q.layers[0])
        assert np.abs(got - want).max() <= 0.02 * np.abs(want).max(), method


def test_a_nan_in_the_calibration_does_not_report_an_exact_layer(two_convs):
    _, g, batches, _ = two_convs
    bad = batches[1].copy()
    bad[0, 0, 3, 3] = np.nan
    q = esgraph.quantize(g, [batches[0], bad], threads=THREADS)
    first = q.layers[0]  # conv1 reads the NaN: no figure, rather than a made-up one
    assert math.isnan(first.max_error) and math.isnan(first.sqnr_db), first
    for layer in q.layers:  # (its Relu may drop the NaN, as a max with 0 does)
        assert not math.isinf(layer.sqnr_db), layer


def test_a_site_whose_result_is_named_goes_by_the_name_the_graph_prints():
    g = esgraph.onnx.load(_reshape_by_input_model(), constants={"shape": np.array([4, 3])})
    assert ("y", "matmul") in [(name, op) for name, op, _ in graph_ops(g)]
    batch = rng_for("named result").standard_normal((2, 6)).astype(F32)
    assert [l.name for l in esgraph.quantize(g, [batch]).layers] == ["y"]


# ---- edges a review found (each failed before its fix) ------------------------------------------------
def conv_then(rng, *after, channels=4, bias=None, scale=None):
    """relu(conv(x)) then the ops `after` (functions of a tensor) in the builder: one input
    [1, 3, 8, 8]; the filters scaled per output channel by `scale`, the bias given or none."""
    w = rng.standard_normal((channels, 3, 3, 3)).astype(F32)
    if scale is not None:
        w *= np.asarray(scale, F32).reshape(-1, 1, 1, 1)
    with esgraph.GraphBuilder("net") as b:
        x = b.input("x", esgraph.f32, [1, 3, 8, 8])
        y = ops.relu(ops.conv2d(x, b.constant(w), bias=None if bias is None else b.constant(np.asarray(bias, F32)),
                                pads=[1, 1, 1, 1]))
        for op in after:
            y = op(b, y)
        return b.build([y]), w


def test_max_pools_of_max_pools_take_their_inputs_quantization():
    rng = rng_for("chained pools")
    pool = lambda b, y: ops.max_pool2d(y, kernel=[2, 2], strides=[1, 1])  # noqa: E731
    last = rng.standard_normal((2, 4, 3, 3)).astype(F32)
    conv = lambda b, y: ops.conv2d(y, b.constant(last))  # noqa: E731
    for pools in (2, 3):
        g, _ = conv_then(rng, *([pool] * pools), conv)
        batches = images(rng, 2, (1, 3, 8, 8))
        q = esgraph.quantize(g, batches, threads=THREADS)
        model = esgraph.compile(q.graph, threads=THREADS)
        assert conv_precisions(model) == ["int8", "int8"]
        want = esgraph.compile(g, threads=THREADS).run([batches[0]])[0]
        assert np.abs(model.run([batches[0]])[0] - want).max() < 0.05 * np.abs(want).max()


def test_a_bias_beyond_int32_at_its_scale_raises_its_filters_scale():
    """Channel 1's filters are 1e-7 of channel 0's and its bias 50: at x_scale · w_scale the bias
    would be some 10^10 codes. Its filters' scale grows until the bias fits: the channel's
    output keeps its 50 (ONNX Runtime's quantizer does the same)."""
    rng = rng_for("bias beyond int32")
    g, _ = conv_then(rng, channels=2, bias=[0.1, 50.0], scale=[1.0, 1e-7])
    batches = images(rng, 2, (1, 3, 8, 8))
    q = esgraph.quantize(g, batches, threads=THREADS)
    got = esgraph.compile(q.graph, threads=THREADS).run([batches[0]])[0]
    want = esgraph.compile(g, threads=THREADS).run([batches[0]])[0]
    np.testing.assert_allclose(got[:, 1], want[:, 1], atol=q.layers[0].scale)
    assert q.layers[0].sqnr_db > 30


def test_an_output_passed_through_stays_as_the_float_graph_made_it():
    rng = rng_for("pass through")
    w = rng.standard_normal((4, 3, 3, 3)).astype(F32)
    with esgraph.GraphBuilder("net") as b:
        x = b.input("x", esgraph.f32, [1, 3, 8, 8])
        g = b.build([ops.relu(ops.conv2d(x, b.constant(w), pads=[1, 1, 1, 1])), x])
    batch = images(rng, 1, (1, 3, 8, 8))[0]
    q = esgraph.quantize(g, [batch], threads=THREADS)
    got = esgraph.compile(q.graph, threads=THREADS).run([batch])
    np.testing.assert_array_equal(got[1], batch)  # x itself, not its codes dequantized
    scale = q.layers[0].scale
    codes = got[0] / scale
    assert np.abs(codes - np.rint(codes)).max() < 1e-3  # the convolution's result: its codes


def test_a_relu_kept_in_float_stops_its_convolutions_result_short_of_it():
    rng = rng_for("relu kept")
    g, _ = conv_then(rng)
    batches = images(rng, 2, (1, 3, 8, 8))
    kept = esgraph.quantize(g, batches, keep_float=["relu"], threads=THREADS)
    folded = esgraph.quantize(g, batches, threads=THREADS)
    assert folded.layers[0].min == 0.0  # past the relu
    assert kept.layers[0].min < 0.0  # the convolution's own result, signed


def test_entropy_refuses_too_few_bins_to_choose_from(two_convs):
    _, g, batches, _ = two_convs
    with pytest.raises(esgraph.InvalidArgumentError, match=r"bins 256: entropy needs at least 512"):
        esgraph.quantize(g, batches, method="entropy", bins=256)
    assert len(esgraph.quantize(g, batches, method="percentile", bins=256).layers) == 2


def test_weights_too_small_or_not_finite():
    """A channel of denormal filters quantizes to codes 0 with scale 1 (no f32 scale resolves it);
    filters holding an infinity leave their convolution in f32 and out of the report."""
    rng = rng_for("odd weights")
    g, _ = conv_then(rng, channels=2, scale=[1.0, 1e-42])
    batches = images(rng, 2, (1, 3, 8, 8))
    q = esgraph.quantize(g, batches, threads=THREADS)
    model = esgraph.compile(q.graph, threads=THREADS)
    assert conv_precisions(model) == ["int8"]
    want = esgraph.compile(g, threads=THREADS).run([batches[0]])[0]
    assert np.abs(model.run([batches[0]])[0][:, 1] - want[:, 1]).max() < 1e-30
    with esgraph.GraphBuilder("inf") as b:
        x = b.input("x", esgraph.f32, [1, 3, 8, 8])
        w = rng.standard_normal((4, 3, 3, 3)).astype(F32)
        w[0, 0, 0, 0] = np.inf
        h = ops.conv2d(x, b.constant(w), pads=[1, 1, 1, 1])
        g = b.build([ops.conv2d(h, b.constant(rng.standard_normal((4, 4, 3, 3)).astype(F32)))])
    q = esgraph.quantize(g, batches, threads=THREADS)
    assert [layer.op for layer in q.layers] == ["conv2d"]  # the second only


# ---- weight-only (matmul_nbits) -----------------------------------------------------------------------
@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("symmetric", [False, True])
def test_weight_only_codes_are_numpys_blockwise_quantization(bits, symmetric, tmp_path):
    """Each product's weights (one [K, N], one transposed [N, K], K = 100: three blocks of 32 and
    one of 4) as numpy's esgraph.quantization.quantize_blockwise makes them, code for code; the
    products on matmul_nbits, to f32 rounding of numpy's product with the dequantized weights."""
    from esgraph.quantization import dequantize_blockwise, pack_zero_points, quantize_blockwise
    rng = rng_for(f"weight only {bits} {symmetric}")
    w1 = rng.standard_normal((100, 64)).astype(F32)
    w2 = rng.standard_normal((48, 64)).astype(F32)
    with esgraph.GraphBuilder("mlp") as b:
        x = b.input("x", esgraph.f32, [3, 100])
        g = b.build([ops.matmul(ops.relu(ops.matmul(x, b.constant(w1))), b.constant(w2), transpose_b=True)])
    q = esgraph.quantize(g, weight_only=True, bits=bits, block_size=32, symmetric=symmetric)
    assert [layer.op for layer in q.layers] == ["matmul", "matmul"]
    assert all(math.isnan(layer.sqnr_db) for layer in q.layers)  # no batch: nothing measured
    path = tmp_path / "nbits.onnx"
    esgraph.onnx.save(q.graph, str(path))
    model = onnx.load(str(path))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    nodes = [n for n in model.graph.node if n.op_type == "MatMulNBits"]
    assert len(nodes) == 2
    for node, w in zip(nodes, (w1, w2.T)):
        codes, scales, zero_points = quantize_blockwise(w, bits=bits, block_size=32, symmetric=symmetric)
        np.testing.assert_array_equal(inits[node.input[1]].reshape(codes.shape), codes)
        np.testing.assert_array_equal(inits[node.input[2]].reshape(scales.shape), scales)
        if symmetric:
            assert len(node.input) < 4 or not node.input[3]
        else:
            np.testing.assert_array_equal(inits[node.input[3]].reshape(-1), pack_zero_points(zero_points, bits).reshape(-1))
    xs = rng.standard_normal((3, 100)).astype(F32)
    deq = [dequantize_blockwise(*quantize_blockwise(w, bits=bits, block_size=32, symmetric=symmetric), k=w.shape[0], bits=bits,
                                block_size=32).astype(np.float64) for w in (w1, w2.T)]
    want = np.maximum(xs.astype(np.float64) @ deq[0], 0) @ deq[1]
    got = esgraph.compile(q.graph, threads=THREADS).run([xs])[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_weight_only_reports_with_batches_and_refuses_bad_bits(resnet):
    net, g, batches = resnet
    q = esgraph.quantize(g, batches[:1], weight_only=True, bits=8)
    assert [layer.op for layer in q.layers] == ["matmul"]  # the head alone: convolutions stay f32
    assert q.layers[0].sqnr_db > 35 and not q.layers[0].quantized_result
    kinds = [op for _, op, _ in graph_ops(q.graph)]
    assert "matmul_nbits" in kinds and "quantize_linear" not in kinds
    for options, message in (({"bits": 3}, r"weight-only bits 3; valid: 2, 4, 8"),
                             ({"block_size": 24}, r"block_size 24 is not a power of two of at least 16")):
        with pytest.raises(esgraph.InvalidArgumentError, match=message):
            esgraph.quantize(g, weight_only=True, **options)
    with pytest.raises(esgraph.InvalidArgumentError, match="no calibration batch"):
        esgraph.quantize(g)  # int8 activations need their ranges
