"""PyTorch modules in esgraph, through torch.fx.

    g = esgraph.torch.from_module(model.eval(), (x,))
    y = esgraph.compile(g)(x.numpy())

The module is traced symbolically; `example_inputs` fix the input shapes and dtypes (the graph
is built for exactly those), and parameters and buffers become constants. Layers whose own
forward cannot be traced symbolically (nn.MultiheadAttention, nn.TransformerEncoderLayer,
nn.LSTM, ...) are converted as a whole from their parameters. Anything without a converter is
reported, every node at once, as `esgraph.torch.ImportFailed`.
"""
from .._frontend import ImportFailed
from ._convert import from_module, supported

__all__ = ["ImportFailed", "from_module", "supported"]
