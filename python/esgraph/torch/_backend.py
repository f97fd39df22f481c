"""esgraph as a torch.compile backend: `torch.compile(model, backend="esgraph", options={...})`.

Dynamo hands over each captured graph; aot_autograd functionalizes it and lowers it to core ATen
(PyTorch's own decompositions, as other backends use them), and esgraph compiles the result.
Parameters and buffers arrive as arguments on every call: they are baked into the graph as
constants at the first call, and the graph is rebuilt when one of them is another tensor, has
another storage, or has been written through itself since (its version counter). A write
through `.data` (`p.data.mul_(2)`) bumps no version counter: PyTorch hides it from autograd,
and from this check too, as from Inductor's freezing.

Inference only: where autograd would need a backward pass (grad mode on and an input that
requires grad), the graph runs in eager PyTorch, with one warning saying so.
"""
import functools
import time
import warnings
import weakref

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._decomp import core_aten_decompositions
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

import esgraph

from .._frontend import ImportFailed
from ._crossing import to_esgraph, to_torch
from ._aten import CONVERTERS
from ._aten.registry import overload_name
from ._graph import converts, refused_nodes, to_graph, unsupported_nodes

# What `options` takes: each key's allowed values (a type for free-form ones).
OPTIONS = {
    "device": ("cpu", "ascend", "ascend-sim"),
    "precision": ("f32", "bf16"),
    "cache_dir": str,
    "trace": str,
    "fallback": ("error", "eager"),
}
_DEFAULTS = {"device": "cpu", "precision": "f32", "cache_dir": None, "trace": None, "fallback": "error"}


def read_options(options):
    """The backend's settings from torch.compile's `options`; an unknown key or value is named."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"esgraph backend: no option {', '.join(repr(u) for u in unknown)} "
                         f"(it takes {', '.join(OPTIONS)})")
    for key, value in options.items():
        allowed = OPTIONS[key]
        if isinstance(allowed, tuple) and value not in allowed:
            raise ValueError(f"esgraph backend: option {key!r} is one of {', '.join(allowed)}, got {value!r}")
        if isinstance(allowed, type) and not isinstance(value, allowed):
            raise ValueError(f"esgraph backend: option {key!r} takes a {allowed.__name__}, got {type(value).__name__}")
    return {**_DEFAULTS, **options}


_warned_backward = []


def _needs_backward(example_inputs):
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs)


def esgraph_backend(gm, example_inputs, options=None):
    """The function torch.compile calls with each graph Dynamo captures."""
    settings = read_options(options)
    if _needs_backward(example_inputs):
        if not _warned_backward:
            _warned_backward.append(True)
            warnings.warn("esgraph backend: this graph needs a backward pass (grad mode is on and its parameters "
                          "require grad); esgraph compiles inference only, so it runs in eager PyTorch. Call the "
                          "model under torch.no_grad() or torch.inference_mode() to compile it.", stacklevel=2)
        return gm.forward
    compiler = functools.partial(_compile_inference, settings=settings)
    return aot_autograd(fw_compiler=compiler, decompositions=decompositions())(gm, example_inputs)


@functools.lru_cache(maxsize=None)
def _table():
    return core_aten_decompositions()


def decompositions():
    """PyTorch's core-ATen decompositions, less those of the ops esgraph converts whole
    (softplus, group norm, nearest resizes, ...): those stay one op; and attention kept one op
    (_attention_whole)."""
    table = {op: fn for op, fn in _table().items() if overload_name(op) not in CONVERTERS}
    table[torch.ops.aten.scaled_dot_product_attention.default] = _attention_whole
    return table


def _attention_whole(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """scaled_dot_product_attention as PyTorch's CPU flash kernel, one op esgraph converts to its
    attention op, where aot_autograd would take it apart (products, a softmax and a guard for
    fully masked rows, each a launch). What that kernel does not take (dropout, grouped queries,
    other ranks) is taken apart as before."""
    if dropout_p or enable_gqa or not q.dim() == k.dim() == v.dim() == 4:
        return NotImplemented
    if attn_mask is not None and attn_mask.dtype == torch.bool:  # the kernel adds a float mask
        attn_mask = torch.zeros(attn_mask.shape, dtype=q.dtype).masked_fill(attn_mask.logical_not(), float("-inf"))
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v, dropout_p, is_causal, attn_mask=attn_mask,
                                                                             scale=scale)[0]


def _static_inputs():
    """Which of the graph's arguments are parameters and buffers (Dynamo marks them static)."""
    ctx = torch._guards.TracingContext.try_get()
    return set(ctx.fw_metadata.static_input_indices) if ctx is not None and ctx.fw_metadata is not None else set()


def _compile_inference(gm, example_inputs, settings):
    missing = unsupported_nodes(gm)
    if settings["fallback"] == "eager":
        refused = refused_nodes(gm) if not missing else set()
        if missing or refused:
            return _partitioned(gm, settings, refused)
    if missing:
        raise ImportFailed("torch.compile graph", missing)
    return EsgraphFunction(gm, settings, _static_inputs())


_live = []  # weak references to every EsgraphFunction made, in order


def compiled_functions():
    """The graphs the backend compiled that are still in use, oldest first: each has `model`
    (the esgraph Model, None before its first call), `builds` (how often it was built: once,
    plus once per change of a parameter) and `build_seconds` (their time: converting the graph,
    compiling it and the run that follows, where esgraph plans; at the first call and after a
    change)."""
    _live[:] = [r for r in _live if r() is not None]
    return [r() for r in _live]


class EsgraphFunction:
    """A graph's compiled form: called by aot_autograd with the list of its arguments (boxed)."""

    _boxed_call = True

    def __init__(self, gm, settings, constants=()):
        _live.append(weakref.ref(self))
        self.gm, self.settings, self.constants = gm, settings, sorted(constants)
        outputs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
        # (An output that is no tensor is refused by name when the graph is built.)
        self.out_dtypes = [getattr(o.meta.get("val"), "dtype", None) if isinstance(o, torch.fx.Node) else None
                           for o in (outputs if isinstance(outputs, (list, tuple)) else [outputs])]
        self.weights = None  # the constant arguments the model was built with, with their versions
        self.model = self.positions = None
        self.builds, self.build_seconds = 0, 0.0

    def _weights_of(self, args):
        return [(args[i], args[i]._version, args[i].data_ptr()) for i in self.constants]

    def _current(self, args):
        return self.weights is not None and all(
            t is held and v == version and p == ptr for (t, v, p), (held, version, ptr) in zip(self._weights_of(args), self.weights))

    def _build(self, args):
        graph, self.positions = to_graph(self.gm, "torch_compile", {i: args[i] for i in self.constants})
        s = self.settings
        self.model = esgraph.compile(graph, backend=s["device"], precision=s["precision"], cache_dir=s["cache_dir"])
        self.weights = self._weights_of(args)
        self.builds += 1

    def __call__(self, args):
        start, built = time.perf_counter(), not self._current(args)
        if built:
            self._build(args)
        inputs = [to_esgraph(args[i]) for i in self.positions]
        if self.settings["trace"]:
            outs = self.model.profile(*inputs, path=self.settings["trace"])
        else:
            outs = self.model(*inputs)
            outs = list(outs) if isinstance(outs, tuple) else [outs]
        args.clear()  # boxed: the caller's inputs are not kept alive by the call
        results = [to_torch(o, d) for o, d in zip(outs, self.out_dtypes)]
        if built:  # the build and its first run, where esgraph plans the memory
            self.build_seconds += time.perf_counter() - start
        return results


class _Converts(OperatorSupportBase):
    def __init__(self, refused):
        super().__init__()
        self.refused = refused

    def is_node_supported(self, submodules, node):
        # Arithmetic on sizes stays with PyTorch: a partition's outputs are tensors.
        made = node.meta.get("val")
        tensors = isinstance(made, torch.Tensor) or (isinstance(made, (tuple, list)) and all(
            isinstance(v, torch.Tensor) or v is None for v in made))
        return node.op == "call_function" and tensors and converts(node) and node not in self.refused


def _partitioned(gm, settings, refused):
    """fallback="eager": the parts esgraph converts run in esgraph, the rest (nodes without a
    converter, or refused by theirs) in PyTorch."""
    partitioner = CapabilityBasedPartitioner(gm, _Converts(refused), allows_single_node_partition=True)
    fused = partitioner.fuse_partitions(partitioner.propose_partitions())
    for node in fused.graph.nodes:
        if node.op == "call_module" and node.target.startswith("fused_"):
            sub = fused.get_submodule(node.target)
            for placeholder, arg in zip((n for n in sub.graph.nodes if n.op == "placeholder"), node.args):
                placeholder.meta.setdefault("val", arg.meta.get("val"))
            setattr(fused, node.target, _EsgraphModule(sub, settings))
    fused.recompile()
    return fused


class _EsgraphModule(torch.nn.Module):
    """One partition that esgraph runs; a partition esgraph refuses stays in PyTorch."""

    def __init__(self, sub, settings):
        super().__init__()
        self.sub = sub
        # A partition with a node its converter refuses stays in PyTorch whole.
        self.fn = None if unsupported_nodes(sub) or refused_nodes(sub) else EsgraphFunction(sub, settings)
        self.several = isinstance(next(n for n in sub.graph.nodes if n.op == "output").args[0], (list, tuple))

    def forward(self, *args):
        if self.fn is None:
            return self.sub(*args)
        outs = self.fn(list(args))
        return tuple(outs) if self.several else outs[0]
