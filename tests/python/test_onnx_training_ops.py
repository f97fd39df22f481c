"""What ONNX training graphs hold, imported and run: the losses (NegativeLogLikelihoodLoss,
SoftmaxCrossEntropyLoss, against PyTorch's nll_loss and cross_entropy), BatchNormalization in
training mode (against numpy) and Dropout where its output is determined. ONNX's own cases run
in tests/conformance."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")
from onnx import TensorProto, helper  # noqa: E402

import esgraph  # noqa: E402
import esgraph.onnx  # noqa: E402

from onnx_models import F32, I64, close, init, make, rand, run, vi  # noqa: E402

BOOL = TensorProto.BOOL


def _loss_model(op, reduction, ignore_index, weighted, rank, log_prob=False):
    attrs = {"reduction": reduction}
    if ignore_index is not None:
        attrs["ignore_index"] = ignore_index
    inputs = ["x", "t"] + (["w"] * weighted)
    outputs = ["loss"] + (["log_prob"] * log_prob)
    node = helper.make_node(op, inputs, outputs, **attrs)
    x_dims, t_dims = [3, 5] + [2] * (rank - 2), [3] + [2] * (rank - 2)
    declared = [vi("x", F32, x_dims), vi("t", I64, t_dims)] + ([vi("w", F32, [5])] * weighted)
    return make([node], declared, [vi(o, F32, None) for o in outputs], opset=13), x_dims, t_dims


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("ignore_index", [None, 2, -1])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("rank", [2, 4])
def test_losses_match_pytorch(op, reduction, ignore_index, weighted, rank):
    model, x_dims, t_dims = _loss_model(op, reduction, ignore_index, weighted, rank)
    x, w = rand(*x_dims, seed=rank), np.abs(rand(5, seed=1)) + 0.1
    t = np.random.default_rng(rank).integers(0, 5, t_dims).astype(np.int64)
    if ignore_index is not None:
        t.reshape(-1)[::3] = ignore_index  # -1 lies outside the classes: never read
    inputs = [x, t] + [w] * weighted
    fn = torch.nn.functional.nll_loss if op == "NegativeLogLikelihoodLoss" else torch.nn.functional.cross_entropy
    want = fn(torch.from_numpy(x), torch.from_numpy(t), weight=torch.from_numpy(w) if weighted else None,
              ignore_index=-100 if ignore_index is None else ignore_index, reduction=reduction).numpy()
    (got,) = run(model, *inputs)
    assert got.shape == want.shape
    close(got, want)


def test_softmax_cross_entropy_gives_its_log_probabilities():
    model, x_dims, t_dims = _loss_model("SoftmaxCrossEntropyLoss", "mean", None, False, 3, log_prob=True)
    x, t = rand(*x_dims, seed=3), np.zeros(t_dims, np.int64)
    loss, log_prob = run(model, x, t)
    close(log_prob, torch.log_softmax(torch.from_numpy(x), dim=1).numpy())
    close(loss, -log_prob[:, 0].mean())


def test_a_loss_with_an_unknown_reduction_or_mismatched_ranks_is_refused_by_name():
    model, _, _ = _loss_model("NegativeLogLikelihoodLoss", "median", None, False, 2)
    with pytest.raises(esgraph.onnx.ImportFailed, match="reduction 'median'"):
        esgraph.onnx.load(model)
    node = helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["loss"])
    bad = make([node], [vi("x", F32, [3, 5]), vi("t", I64, [3, 2])], [vi("loss", F32, None)])
    with pytest.raises(esgraph.onnx.ImportFailed, match=r"input of rank 2 and target of rank 2: ONNX takes \[N, C, d...\] and \[N, d...\]"):
        esgraph.onnx.load(bad)


@pytest.mark.parametrize("opset", [9, 15])
def test_batch_normalization_in_training_mode_uses_and_updates_the_batch_statistics(opset):
    """Normalized by the batch's mean and population variance; the running statistics move
    towards them by 1 - momentum (opset 14's training_mode; before it, asking for the outputs
    did, and the batch's statistics came out too)."""
    x, scale, bias = rand(4, 3, 2, 5, seed=4), rand(3, seed=5), rand(3, seed=6)
    mean, var = rand(3, seed=7), np.abs(rand(3, seed=8)) + 0.5
    outputs = ["y", "running_mean", "running_var"] + (["batch_mean", "batch_var"] if opset < 14 else [])
    attrs = {"epsilon": 1e-3, "momentum": 0.8} | ({"training_mode": 1} if opset >= 14 else {})
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], outputs, **attrs)
    declared = [vi("x", F32, [4, 3, 2, 5])] + [vi(name, F32, [3]) for name in "sbmv"]
    model = make([node], declared, [vi(o, F32, None) for o in outputs], opset=opset)
    got = run(model, x, scale, bias, mean, var)
    batch_mean, batch_var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    per_channel = (1, 3, 1, 1)
    want_y = (x - batch_mean.reshape(per_channel)) / np.sqrt(batch_var.reshape(per_channel) + 1e-3) * scale.reshape(per_channel) \
        + bias.reshape(per_channel)
    want = [want_y, mean * 0.8 + batch_mean * 0.2, var * 0.8 + batch_var * 0.2] + ([batch_mean, batch_var] if opset < 14 else [])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        close(g, w, rtol=1e-4, atol=1e-5)


def _dropout(ratio, training):
    node = helper.make_node("Dropout", ["x", "ratio", "training"], ["y", "mask"])
    inits = [init("ratio", np.array(ratio, np.float32)), init("training", np.array(training))]
    return make([node], [vi("x", F32, [2, 3])], [vi("y", F32, None), vi("mask", BOOL, None)], inits)


def test_dropout_in_training_mode_with_a_ratio_of_zero_keeps_everything():
    x = rand(2, 3, seed=9)
    y, mask = run(_dropout(0.0, True), x)
    np.testing.assert_array_equal(y, x)
    assert mask.dtype == bool and mask.all()


def test_dropout_in_training_mode_with_a_random_mask_is_refused_by_name():
    with pytest.raises(esgraph.onnx.ImportFailed, match="training_mode with a ratio of 0.5 \\(a random mask\\)"):
        esgraph.onnx.load(_dropout(0.5, True))


# The optimizers, over several steps (ONNX's own cases run the first, T = 0, only), against the
# reference functions ONNX's test cases are generated with.
_TRAINING = "ai.onnx.preview.training"


def _optimizer(op, states, **attrs):
    """One `op` step of two tensors ([2] and [3]) with `states` state inputs each."""
    groups = ["x", "g"] + [f"s{k}" for k in range(states)]
    inputs = ["r", "t"] + [f"{group}{i}" for group in groups for i in (0, 1)]
    outputs = [f"{group}{i}_new" for group in ["x"] + groups[2:] for i in (0, 1)]
    node = helper.make_node(op, inputs, outputs, domain=_TRAINING, **attrs)
    declared = [vi("r", F32, []), vi("t", I64, [])] + [vi(f"{group}{i}", F32, [2 + i]) for group in groups for i in (0, 1)]
    return make([node], declared, [vi(o, F32, None) for o in outputs], extra_opsets=[(_TRAINING, 1)])


def _steps(op, states, reference, **attrs):
    """Four steps, each run by esgraph and by `reference` from the same tensors."""
    compiled = esgraph.compile(esgraph.onnx.load(_optimizer(op, states, **attrs)))
    rng = np.random.default_rng(11)
    tensors = [[rng.standard_normal(2 + i).astype(np.float32) for i in (0, 1)] for _ in range(2)]  # x, g
    tensors += [[np.abs(rng.standard_normal(2 + i)).astype(np.float32) for i in (0, 1)] for _ in range(states)]
    r = np.array(0.1, np.float32)
    for step in range(4):
        t = np.array(step, np.int64)
        got = compiled.run([r, t] + [a for group in tensors for a in group])
        for i in (0, 1):
            want = reference(r, t, *[group[i] for group in tensors])
            for k, w in enumerate(want):
                close(got[k * 2 + i], w, rtol=1e-5, atol=1e-6)
        tensors = [got[:2], [rng.standard_normal(2 + i).astype(np.float32) for i in (0, 1)]] + \
            [got[2 + 2 * k:4 + 2 * k] for k in range(states)]


def test_adagrad_steps_match_onnx_reference():
    from onnx.backend.test.case.node.adagrad import apply_adagrad
    _steps("Adagrad", 1, lambda r, t, x, g, h: apply_adagrad(r, t, x, g, h, 0.01, 1e-5, 0.1),
           norm_coefficient=0.01, epsilon=1e-5, decay_factor=0.1)


@pytest.mark.parametrize("mode", ["standard", "nesterov"])
def test_momentum_steps_match_onnx_reference(mode):
    from onnx.backend.test.case.node.momentum import apply_momentum, apply_nesterov
    apply = apply_momentum if mode == "standard" else apply_nesterov
    _steps("Momentum", 1, lambda r, t, x, g, v: apply(r, t, x, g, v, 0.01, 0.9, 0.5),
           norm_coefficient=0.01, alpha=0.9, beta=0.5, mode=mode)


def test_adam_steps_match_onnx_reference():
    from onnx.backend.test.case.node.adam import apply_adam
    _steps("Adam", 2, lambda r, t, x, g, v, h: apply_adam(r, t, x, g, v, h, 0.01, 0.05, 0.9, 0.99, 1e-3),
           norm_coefficient=0.01, norm_coefficient_post=0.05, alpha=0.9, beta=0.99, epsilon=1e-3)


def test_adagrad_takes_onnx_default_epsilon():
    """Without an epsilon attribute, ONNX's 1e-6 (it was 0: a zero gradient on a zero state gave
    0 / 0)."""
    from onnx.backend.test.case.node.adagrad import apply_adagrad
    compiled = esgraph.compile(esgraph.onnx.load(_optimizer("Adagrad", 1)))
    r, t = np.array(0.1, np.float32), np.array(0, np.int64)
    x, g, h = [np.array([1.0, 1.0], np.float32), np.array([1.0, 2.0, 3.0], np.float32)], \
        [np.array([0.0, 1e-7], np.float32), np.zeros(3, np.float32)], [np.zeros(2, np.float32), np.zeros(3, np.float32)]
    got = compiled.run([r, t] + x + g + h)
    for i in (0, 1):
        want_x, want_h = apply_adagrad(r, t, x[i], g[i], h[i], 0.0, 1e-6, 0.0)
        close(got[i], want_x, rtol=1e-5, atol=1e-6)
        close(got[2 + i], want_h, rtol=1e-5, atol=1e-12)
    assert np.isfinite(got[0]).all()


def test_an_optimizer_with_the_wrong_count_of_inputs_is_refused_by_name():
    node = helper.make_node("Adam", ["r", "t", "x", "g", "v"], ["x_new", "v_new"], domain=_TRAINING)
    declared = [vi("r", F32, []), vi("t", I64, [])] + [vi(name, F32, [2]) for name in "xgv"]
    model = make([node], declared, [vi("x_new", F32, None), vi("v_new", F32, None)], extra_opsets=[(_TRAINING, 1)])
    with pytest.raises(esgraph.onnx.ImportFailed, match="5 inputs: Adam takes R, T and 4 inputs a tensor"):
        esgraph.onnx.load(model)
