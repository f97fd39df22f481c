"""esgraph.torch.from_module: modules written with torch.nn by their own authors, captured by
torch.export, lowered to core ATen and converted op by op, and compared with the module's own
forward pass (PyTorch is the reference)."""
import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import esgraph
import esgraph.torch as esg_torch

RTOL = 1e-4


def flat(value):
    out = []
    torch.fx.node.map_aggregate(value, lambda o: out.append(o) if o is not None else o)
    return out


def check_module(module, *inputs, rtol=RTOL, atol=1e-5):
    module.eval()
    graph = esg_torch.from_module(module, inputs)
    with torch.no_grad():
        want = flat(module(*inputs))
    got = esgraph.compile(graph).run([x.numpy() for x in inputs])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=rtol, atol=atol)
    return graph


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=4)
        self.bn2 = nn.BatchNorm2d(16)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.bn2(self.conv2(x)))
        return F.log_softmax(self.fc(torch.flatten(self.pool(x), 1)), dim=1)


def test_conv_stack_with_batch_norm():
    net = ConvNet()
    for bn in (net.bn1, net.bn2):  # non-trivial running statistics
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2)
    check_module(net, torch.randn(2, 3, 16, 16))


@pytest.mark.parametrize("batch_first, norm_first, activation",
                         [(True, False, "relu"), (False, True, "gelu"), (True, True, "gelu")])
def test_transformer_encoder_layer(batch_first, norm_first, activation):
    layer = nn.TransformerEncoderLayer(64, 8, 128, batch_first=batch_first, norm_first=norm_first,
                                       activation=activation)
    x = torch.randn(4, 12, 64) if batch_first else torch.randn(12, 4, 64)
    check_module(layer, x)


class Encoder(nn.Module):
    """Layers used inside a model: each stays one converted layer under tracing."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 32)
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(32, 4, 64, batch_first=True) for _ in range(2))
        self.head = nn.Linear(32, 5)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.head(x.mean(dim=1))


def test_encoder_model_with_embedding():
    check_module(Encoder(), torch.randint(0, 50, (3, 9)))


def test_multihead_attention_returns_output_and_weights():
    mha = nn.MultiheadAttention(32, 4)
    q, k = torch.randn(6, 2, 32), torch.randn(5, 2, 32)
    check_module(mha, q, k, k)


class MaskedAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 2, batch_first=True)
        self.register_buffer("causal", torch.triu(torch.ones(7, 7, dtype=torch.bool), 1))

    def forward(self, x):
        return self.mha(x, x, x, attn_mask=self.causal, need_weights=False)[0]


def test_attention_with_a_causal_mask():
    check_module(MaskedAttention(), torch.randn(2, 7, 16))


@pytest.mark.parametrize("layers, bidirectional, batch_first", [(1, False, False), (2, True, True)])
def test_lstm_outputs_and_final_states(layers, bidirectional, batch_first):
    lstm = nn.LSTM(8, 12, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)
    x = torch.randn(3, 5, 8)
    check_module(lstm, x)


class Functional(nn.Module):
    """fx records these as call_function / call_method nodes and plain Python on sizes."""

    def forward(self, x):
        b, t, c = x.size(0), x.size(1), x.shape[2]  # fx cannot unpack a traced shape
        h = x.view(b, t, 2, c // 2).permute(0, 2, 1, 3).contiguous()
        h = torch.cat([h, h * 2], dim=-1)[..., :c // 2]
        s = torch.softmax(h @ h.transpose(-2, -1) / 4, dim=-1)
        y = F.gelu(s @ h) + torch.sigmoid(h[:, 0:1])
        y = y.reshape(b, -1).unsqueeze(1)
        parts = y.chunk(2, dim=-1)
        return parts[0] - parts[1].clamp(min=-0.5, max=0.5), y.size(-1)


def test_functions_methods_and_size_arithmetic():
    module = Functional()
    x = torch.randn(2, 6, 8)
    graph = esg_torch.from_module(module, (x,))
    with torch.no_grad():
        want, width = module(x)
    got = esgraph.compile(graph).run([x.numpy()])
    np.testing.assert_allclose(got[0], want.numpy(), rtol=RTOL, atol=1e-5)
    assert got[1] == width  # a Python value among the outputs becomes a constant


def test_an_input_returned_as_output_keeps_both_names_apart():
    class PassThrough(nn.Module):
        def forward(self, x):
            return x, x + 1

    graph = esg_torch.from_module(PassThrough(), (torch.ones(2, 2),))
    model = esgraph.compile(graph)
    assert model.input_names == ["x"]
    a, b = model.run([np.full((2, 2), 3, np.float32)])
    assert (a == 3).all() and (b == 4).all()


def test_unsupported_calls_are_listed_together():
    class Odd(nn.Module):
        def forward(self, x):
            return torch.cumsum(x, 0) + torch.erfinv(x)

    with pytest.raises(esg_torch.ImportFailed) as info:
        esg_torch.from_module(Odd(), (torch.ones(3),))
    reasons = [where for where, _ in info.value.failures]
    assert len(reasons) == 2
    assert any("aten.cumsum.default" in r for r in reasons) and any("aten.erfinv.default" in r for r in reasons)
    assert isinstance(info.value, ValueError) and isinstance(info.value, esgraph.Error)


def test_an_lstm_with_a_projection():
    # PyTorch's decomposition of aten.lstm covers proj_size, which the torch.fx frontend refused.
    check_module(nn.LSTM(4, 6, proj_size=3, num_layers=2), torch.randn(5, 2, 4))


@pytest.mark.parametrize("module, inputs, error", [
    ("not a module", (torch.ones(1),), TypeError),
    (nn.ReLU(), (np.ones(3),), TypeError),
])
def test_bad_arguments(module, inputs, error):
    with pytest.raises(error):
        esg_torch.from_module(module, inputs)


def test_wrong_number_of_examples():
    with pytest.raises(esg_torch.ImportFailed, match="torch.export cannot capture it: TypeError: too many positional"):
        esg_torch.from_module(Functional(), (torch.ones(2, 6, 8), torch.ones(1)))


def test_untraceable_control_flow_is_an_import_error():
    class Branchy(nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x

    with pytest.raises(esg_torch.ImportFailed, match="torch.export cannot capture it: GuardOnDataDependentSymNode"):
        esg_torch.from_module(Branchy(), (torch.ones(2),))


def test_supported_lists_aten_overloads():
    table = esg_torch.supported()
    assert table == sorted(table)
    assert {"aten.convolution.default", "aten.addmm.default", "aten.relu.default", "aten.add.Tensor",
            "torchvision.roi_align.default"} <= set(table)


def test_vector_operands_of_matmul_follow_numpy():
    class Products(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(6, 3))
            self.v = nn.Parameter(torch.randn(6))

        def forward(self, x):
            return self.v @ x, x @ self.w, torch.matmul(self.v, self.w)

    check_module(Products(), torch.randn(6, 6))


def test_recurrent_layers_with_an_initial_state():
    lstm, gru = nn.LSTM(4, 3, num_layers=2, batch_first=True), nn.GRU(4, 3, bidirectional=True)

    class WithState(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm, self.gru = lstm, gru

        def forward(self, x, h, c, g):
            return self.lstm(x, (h, c))[0], self.gru(x.transpose(0, 1), g)[1]

    check_module(WithState(), torch.randn(2, 5, 4), torch.randn(2, 2, 3), torch.randn(2, 2, 3), torch.randn(2, 2, 3))


class Divisions(nn.Module):
    def forward(self, x, n):
        return n / 2, torch.div(n, 3, rounding_mode="floor"), torch.div(-n, 3, rounding_mode="trunc"), x / n


def test_division_follows_pytorch_types_and_rounding():
    n = torch.tensor([[-7, -1, 0, 5, 8]], dtype=torch.int64)
    check_module(Divisions(), torch.randn(1, 5), n)


class Pools(nn.Module):
    def forward(self, x):
        # positional arguments in F.avg_pool2d's own order: kernel, stride, padding, ceil_mode
        return F.avg_pool2d(x, 2, 2, 0, True), F.avg_pool2d(x, 3, 1, 1), F.max_pool2d(x, 3, 2, 1, 1, True)


def test_functional_pooling_arguments_by_position():
    check_module(Pools(), torch.randn(1, 2, 5, 5))


def test_padding_counted_with_ceil_mode_is_refused_not_wrong():
    class Ceil(nn.Module):
        def forward(self, x):
            return F.avg_pool2d(x, 2, 2, 1, True)

    with pytest.raises(esg_torch.ImportFailed, match="ceil_mode"):
        esg_torch.from_module(Ceil(), (torch.randn(1, 1, 5, 5),))


class Types(nn.Module):
    def forward(self, x, i):
        return (torch.sum(x, dim=1, dtype=torch.float64), i.sum(), F.softmax(x, dim=-1, dtype=torch.float64),
                i.to(x), x.squeeze(1), x.unsqueeze(1).squeeze(1))


def test_dtypes_and_squeeze_follow_pytorch():
    check_module(Types(), torch.randn(2, 3), torch.arange(6, dtype=torch.int32).reshape(2, 3))


def test_embedding_with_max_norm_is_refused():
    # max_norm renormalizes the weights as it reads them (aten.embedding_renorm, in place).
    with pytest.raises(esg_torch.ImportFailed, match="aten.embedding_renorm.default"):
        esg_torch.from_module(nn.Embedding(5, 2, max_norm=1.0), (torch.tensor([1, 2]),))


class _UnpacksItsLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, batch_first=True)

    def forward(self, x):
        out, (h, c) = self.lstm(x)  # tracing iterates the call's proxy: torch 1.13 failed on Python 3.11
        return out + h.transpose(0, 1) + c.transpose(0, 1)


class _Repeats(nn.Module):
    def forward(self, x):
        return x.repeat(2, 1, 3), x.repeat(1, 2)


def test_an_lstm_whose_tuple_output_is_unpacked():
    check_module(_UnpacksItsLSTM().eval(), torch.randn(2, 5, 8))


def test_tensor_repeat_against_pytorch():
    check_module(_Repeats().eval(), torch.randn(4, 5))
