"""PyTorch 2 programs in esgraph: a torch.compile backend, and torch.export programs as graphs.

    import esgraph.torch                       # registers the backend (a pip install finds it too)
    fast = torch.compile(model, backend="esgraph", options={"precision": "bf16"})
    with torch.no_grad():
        y = fast(x)

    program = torch.export.export(model.eval(), (x,))
    graph = esgraph.torch.load(program)        # or esgraph.torch.from_module(model, (x,))
    model = esgraph.compile(graph, shapes=esgraph.torch.symbol_ranges(program))

Both lower the captured graph to core ATen with PyTorch's decompositions and convert each ATen
op to esgraph ops (`supported()` lists them). Anything without a converter is reported, every
node at once, as `esgraph.torch.ImportFailed`; the backend's `fallback="eager"` runs those
parts in PyTorch instead. docs/pytorch.md has the whole story.
"""
from .._frontend import ImportFailed
from ._aten import CONVERTERS
from ._backend import OPTIONS, compiled_functions, esgraph_backend
from ._export import from_module, load, symbol_ranges


def supported():
    """The ATen (and torchvision) overloads esgraph converts, by name: "aten.add.Tensor", ..."""
    return sorted(CONVERTERS)


def _register():
    """Registers the backend under "esgraph" unless the installed package's entry point
    (torch_dynamo_backends) does: torch would then load it from there itself."""
    from torch._dynamo.backends import registry
    registry._discover_entrypoint_backends()
    if "esgraph" not in registry._BACKENDS:
        registry.register_backend(esgraph_backend, name="esgraph")


_register()

__all__ = ["ImportFailed", "OPTIONS", "compiled_functions", "esgraph_backend", "from_module", "load", "supported", "symbol_ranges"]
