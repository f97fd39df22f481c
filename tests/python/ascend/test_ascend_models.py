"""The Ascend backend on the simulated device (conftest.py says how these tests run): whole models on
the device: a CNN and models imported from PyTorch and ONNX, half precision, the MLP and transformer
samples, groups with several outputs, runs without stream capture."""
from pathlib import Path

import numpy as np
import pytest

import esgraph
from esgraph import ops

from ascend_device import RTOL, ATOL, graph_of, both, check_same, calls


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


@pytest.mark.parametrize("route", ["export", "onnx"])
@pytest.mark.parametrize("model", IMPORTED)
def test_imported_models_run_on_the_device(model, route, tmp_path):
    """Real torch.nn models, imported both ways, run entirely on ascend-sim and match PyTorch:
    attention with its masks and norms, unrolled recurrences (splits become slices; groups that
    would re-enter themselves become single ops)."""
    torch = pytest.importorskip("torch")

    import esgraph.onnx as esg_onnx
    import esgraph.torch as esg_torch
    from torch import nn
    from torch_onnx import export_onnx

    torch.manual_seed(0)
    net, x = {"transformer": (nn.TransformerEncoderLayer(64, 4, 128, batch_first=True), torch.randn(2, 8, 64)),
              "lstm": (nn.LSTM(16, 32, num_layers=2, batch_first=True), torch.randn(2, 5, 16)),
              "gru": (nn.GRU(16, 32, batch_first=True), torch.randn(2, 5, 16))}[model]
    net.eval()
    if route == "export":
        graph = esg_torch.from_module(net, (x,))
    else:
        path = str(tmp_path / "m.onnx")
        export_onnx(net, (x,), path, 14)
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
    sample = runpy.run_path(str(Path(__file__).resolve().parents[3] / "samples/transformer_block.py"))
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
