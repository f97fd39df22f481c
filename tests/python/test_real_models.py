"""Models built from torch.nn layers by PyTorch's own code, imported both ways — torch.export
(esgraph.torch) and torch.onnx.export then esgraph.onnx.load — compiled, run, and compared
with PyTorch's forward pass within 1e-4 relative error."""
import io

import numpy as np
import pytest
import torch
import torch.nn as nn

import esgraph
import esgraph.onnx
import esgraph.torch
from torch_onnx import export_onnx


class ConvBNNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1, groups=2), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=2, dilation=2, groups=32), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(32, 10)

    def forward(self, x):
        return self.classifier(self.features(x))


def _models():
    torch.manual_seed(0)
    net = ConvBNNet()
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2)
    return {
        "transformer_encoder_layer": (nn.TransformerEncoderLayer(64, 8, 256, batch_first=True), (torch.randn(2, 16, 64),)),
        "transformer_encoder_layer_norm_first": (nn.TransformerEncoderLayer(64, 4, 128, norm_first=True,
                                                                             activation="gelu"), (torch.randn(16, 2, 64),)),
        "multihead_attention": (nn.MultiheadAttention(32, 4), (torch.randn(6, 2, 32),) * 3),
        "lstm_bidirectional_2_layers": (nn.LSTM(16, 24, num_layers=2, bidirectional=True), (torch.randn(9, 3, 16),)),
        "gru": (nn.GRU(16, 24, batch_first=True), (torch.randn(3, 9, 16),)),
        "rnn_relu": (nn.RNN(16, 24, nonlinearity="relu"), (torch.randn(9, 3, 16),)),
        "conv_batch_norm_stack": (net, (torch.randn(2, 3, 24, 24),)),
        "transposed_conv_decoder": (nn.Sequential(
            nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1, groups=2), nn.ReLU(),
            nn.ConvTranspose2d(4, 3, 3, stride=1, padding=2, dilation=2)), (torch.randn(2, 8, 5, 6),)),
        "volumetric_conv": (nn.Sequential(
            nn.Conv3d(2, 4, 3, stride=(1, 2, 2), padding=1, groups=2), nn.ReLU(),
            nn.ConvTranspose3d(4, 2, (2, 3, 3), stride=2, padding=(0, 1, 1), output_padding=(1, 1, 0), dilation=(1, 1, 2))),
            (torch.randn(1, 2, 4, 6, 5),)),
    }


MODELS = _models()


def _flat(value):
    out = []
    torch.fx.node.map_aggregate(value, lambda o: out.append(o) if o is not None else o)
    return out


def _via_onnx(module, inputs, opset):
    buf = io.BytesIO()
    export_onnx(module, inputs, buf, opset)
    return esgraph.onnx.load(buf.getvalue())


@pytest.mark.parametrize("route", ["export", "onnx14", "onnx17"])
@pytest.mark.parametrize("name", MODELS)
def test_matches_pytorch(name, route):
    module, inputs = MODELS[name]
    module.eval()
    graph = esgraph.torch.from_module(module, inputs) if route == "export" else _via_onnx(module, inputs, int(route[4:]))
    with torch.no_grad():
        want = _flat(module(*inputs))
    got = esgraph.compile(graph).run([x.numpy() for x in inputs])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = w.numpy()
        scale = np.abs(w).max()
        assert np.abs(g - w).max() <= 1e-4 * scale, f"max error {np.abs(g - w).max()} at scale {scale}"


@pytest.mark.parametrize("mode, align", [("nearest", None), ("bilinear", False), ("bilinear", True), ("bicubic", False)])
def test_interpolation_exported_by_pytorch(mode, align):
    # torch.onnx.export writes Resize with the coordinate mode PyTorch uses; esgraph lowers it
    # to one matrix product per axis.
    class Up(nn.Module):
        def forward(self, x):
            return torch.nn.functional.interpolate(x, size=(7, 9), mode=mode, align_corners=align)

    x = torch.randn(1, 2, 4, 5)
    graph = _via_onnx(Up(), (x,), 13)
    want = Up()(x).numpy()
    np.testing.assert_allclose(esgraph.compile(graph)(x.numpy()), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pool", [
    lambda x: torch.nn.functional.max_pool3d(x, 2, stride=(1, 2, 2), padding=1),
    lambda x: torch.nn.functional.avg_pool3d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    lambda x: torch.nn.functional.avg_pool3d(x, (1, 2, 3), stride=(1, 2, 1)),
    lambda x: torch.nn.functional.max_pool3d(x, 2, dilation=2, ceil_mode=True),
], ids=["max3d_padded", "avg3d_ceil", "avg3d_anisotropic", "max3d_dilated"])
def test_3d_and_dilated_pooling_exported_by_pytorch(pool):
    class Pool(nn.Module):
        def forward(self, x):
            return pool(x)

    x = torch.randn(2, 3, 5, 6, 7)
    np.testing.assert_allclose(esgraph.compile(_via_onnx(Pool(), (x,), 13))(x.numpy()), Pool()(x).numpy(),
                               rtol=1e-5, atol=1e-6)


class _SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(32, 4)

    def forward(self, q, mask=None):
        return self.mha(q, q, q, attn_mask=mask, need_weights=False)[0]


@pytest.mark.parametrize("masked", [False, True])
def test_exported_multi_head_attention_runs_as_one_attention_launch(masked):
    """PyTorch's export of multi-head attention scales q and kᵀ by √scale each, takes q·kᵀ,
    adds the attention mask, takes the softmax and multiplies by v: esgraph computes all of
    it as one attention launch (no softmax, scaling or addition launched), matching PyTorch.
    (PyTorch 2 splits the packed projection into q, k and v through an unsqueeze, a transpose
    and three gathers, and the heads through [seq, batch·heads, size] reshaped to rank 4: those
    stay copies.)"""
    module = _SelfAttention().eval()
    x = torch.randn(6, 2, 32)
    causal = torch.zeros(6, 6).masked_fill(torch.triu(torch.ones(6, 6, dtype=torch.bool), 1), -1e4)
    inputs = (x, causal) if masked else (x,)
    model = esgraph.compile(_via_onnx(module, inputs, 14))
    with torch.no_grad():
        want = module(*inputs).numpy()
    got = model.run([t.numpy() for t in inputs])[0]
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    kernels = [line for line in model.to_dot().splitlines() if "label=" in line]
    assert sum("attention" in k for k in kernels) == 1
    assert not any("softmax" in k or '"mul' in k for k in kernels)
    assert not any("div" in k or "\\nadd" in k or '"add' in k for k in kernels)
