"""ONNX's losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) imported and run, against
PyTorch's nll_loss and cross_entropy on the same inputs. ONNX's own cases run in
tests/conformance."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")
from onnx import helper  # noqa: E402

import esgraph  # noqa: E402
import esgraph.onnx  # noqa: E402

from onnx_models import F32, I64, close, make, rand, run, vi  # noqa: E402


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
