"""ONNX files written by PyTorch's TorchScript exporter (torch.onnx.export with dynamo=False,
the opsets the importer's tests compare against), for the suites that import them."""
import warnings

import torch


class _NotCausal(torch.nn.Module):
    """torch 2.15's exporter traces nn.TransformerEncoderLayer's `is_causal`, left at its
    default or given as an export argument, as a tensor, which the layer's attention then
    refuses; written in the forward that calls the layer, it stays the bool it is."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer
        self.train(layer.training)  # the export restores this mode, and so the layer's, after it

    def forward(self, x):
        return self.layer(x, is_causal=False)


def export_onnx(module, inputs, f, opset):
    """`module(*inputs)` exported to `f` (a path or a file object)."""
    if isinstance(module, torch.nn.TransformerEncoderLayer):
        module = _NotCausal(module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, tuple(inputs), f, dynamo=False, opset_version=opset)
