"""Walks a torch.fx graph and rebuilds it through esgraph's builder.

Values are esgraph Tensors, or plain Python values (ints, tuples, slices) for what fx records
as ordinary Python computation — `x.size(0) * 2` is evaluated while converting, which is what
makes the shapes static. A call whose arguments hold no Tensor is evaluated directly.
"""
import builtins
import dis
import inspect
import operator

import numpy as np
import torch
import torch.fx as fx
from torch.fx.passes.shape_prop import ShapeProp

from .. import _C
from .._frontend import ImportFailed, name_outputs
from ._dtypes import TO_ESG
from ._functions import FUNCTIONS, METHODS
from ._modules import MODULES, Unsupported

class _Proxy(fx.Proxy):
    """torch 1.13's Proxy finds the unpacking that iterates it (`out, (h, c) = lstm(x)`) by an
    instruction index that Python 3.11's inline caches put off (an IndexError); this finds the
    instruction by its offset. Unpacked, a proxy is its items; iterated otherwise, an error."""

    def __iter__(self):
        frame = inspect.currentframe().f_back
        here = next((i for i in dis.get_instructions(frame.f_code) if i.offset == frame.f_lasti), None)
        if here is not None and here.opname == "UNPACK_SEQUENCE":
            return (self[k] for k in range(here.argval))
        raise fx.proxy.TraceError(f"{self.node.name} is iterated other than by unpacking it into names, which tracing cannot follow")


class _Tracer(fx.Tracer):
    # A layer esgraph converts as a whole stays one call_module node.
    def is_leaf_module(self, m, qualname):
        return type(m) in MODULES or super().is_leaf_module(m, qualname)

    def proxy(self, node):
        return _Proxy(node, self)


class _Root(torch.nn.Module):
    """Holds a module that has a converter of its own, so that tracing keeps it a leaf. fx of
    torch 1.13 cannot trace a `*args` forward on Python 3.11, hence one class per arity."""

    def __init__(self, module):
        super().__init__()
        self.module = module


class _Root1(_Root):
    def forward(self, a):
        return self.module(a)


class _Root2(_Root):
    def forward(self, a, b):
        return self.module(a, b)


class _Root3(_Root):
    def forward(self, a, b, c):
        return self.module(a, b, c)


_ROOTS = {1: _Root1, 2: _Root2, 3: _Root3}


def supported():
    """What converts: module types, functions and tensor methods, by name."""
    return {"modules": sorted(t.__name__ for t in MODULES),
            "functions": sorted({getattr(f, "__name__", str(f)) for f in FUNCTIONS}),
            "methods": sorted(METHODS)}


def _describe(node):
    target = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))
    return f"{node.op} {target} ({node.name})"


def _converter(gm, node):
    if node.op == "call_function":
        return FUNCTIONS.get(node.target)
    if node.op == "call_method":
        return METHODS.get(node.target)
    if node.op == "call_module":
        return MODULES.get(type(gm.get_submodule(node.target)))
    return True


def _to_tensor_constant(value):
    if isinstance(value, torch.Tensor):
        return _C.constant(value.detach().cpu().contiguous().numpy())
    return value


def from_module(module, example_inputs, *, name=None):
    """An esgraph Graph computing `module(*example_inputs)` for inputs of those shapes and dtypes."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"from_module: expected a torch.nn.Module, got {type(module).__name__}")
    example_inputs = tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) else (example_inputs,)
    if not all(isinstance(x, torch.Tensor) for x in example_inputs):
        raise TypeError("from_module: example_inputs must be torch tensors")
    module = module.eval()
    if type(module) in MODULES and len(example_inputs) not in _ROOTS:
        raise ImportFailed(type(module).__name__, [("inputs", f"{len(example_inputs)} inputs to a single layer")])
    root = _ROOTS[len(example_inputs)](module) if type(module) in MODULES else module
    label = name or type(module).__name__
    try:
        gm = fx.GraphModule(root, _Tracer().trace(root))
    except (fx.proxy.TraceError, TypeError) as e:  # data-dependent control flow, unpacked shapes, ...
        raise ImportFailed(label, [("module", f"torch.fx cannot trace it symbolically: {e}")]) from e
    missing = [(_describe(n), "no converter") for n in gm.graph.nodes if _converter(gm, n) is None]
    if missing:
        raise ImportFailed(label, missing)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        raise ImportFailed(label, [("inputs", f"the module takes {len(placeholders)} input(s), "
                                              f"{len(example_inputs)} example(s) given")])
    with torch.no_grad():
        ShapeProp(gm).propagate(*example_inputs)
    failures, env, outputs = [], {}, None
    with _C.GraphBuilder(label) as b:
        for node in gm.graph.nodes:
            args = fx.node.map_arg(node.args, lambda n: env[n])
            kwargs = fx.node.map_arg(node.kwargs, lambda n: env[n])
            if _holds_failed((args, kwargs)):  # downstream of a failure: already reported
                env[node] = _FAILED
                continue
            env[node] = _FAILED
            try:
                env[node] = _convert_node(b, gm, node, args, kwargs)
            except Unsupported as e:
                failures.append((_describe(node), str(e)))
            except Exception as e:  # a converter's own limit or bug: still one report, with its type
                failures.append((_describe(node), f"{type(e).__name__}: {e}"))
            if node.op == "output":
                outputs = env[node]
        if failures:
            raise ImportFailed(label, failures)
        # Outputs in the order of the module's (possibly nested) result; None entries dropped.
        flat = []
        fx.node.map_aggregate(outputs, lambda o: flat.append(o) if o is not None else o)
        flat = [o if isinstance(o, _C.Tensor) else _C.constant(np.asarray(o)) for o in flat]
        names = [f"output_{i}" for i in range(len(flat))] if len(flat) > 1 else ["output"]
        named = name_outputs(flat, names, {p.target for p in placeholders})
    return b.build(named)


class _Failed:
    pass


_FAILED = _Failed()


def _holds_failed(value):
    found = []
    fx.node.map_aggregate(value, lambda a: found.append(a) if a is _FAILED else a)
    return bool(found)


def _convert_node(b, gm, node, args, kwargs):
    if node.op == "placeholder":
        meta = node.meta["tensor_meta"]
        if meta.dtype not in TO_ESG:
            raise Unsupported(f"input dtype {meta.dtype}")
        return b.input(node.target, TO_ESG[meta.dtype], list(meta.shape))
    if node.op == "get_attr":
        return _to_tensor_constant(_fetch(gm, node.target))
    if node.op == "output":
        return args[0]
    if node.op == "call_module":
        return MODULES[type(gm.get_submodule(node.target))](gm.get_submodule(node.target), *args, **kwargs)
    table = FUNCTIONS if node.op == "call_function" else METHODS
    has_tensor = []
    fx.node.map_aggregate((args, kwargs), lambda a: has_tensor.append(a) if isinstance(a, _C.Tensor) else a)
    if not has_tensor and node.op == "call_function" and node.target in (operator.add, operator.sub, operator.mul,
                                                                         operator.floordiv, operator.truediv,
                                                                         operator.getitem, builtins.getattr,
                                                                         operator.neg, operator.mod):
        return node.target(*args, **kwargs)  # plain Python arithmetic on sizes
    return table[node.target](*args, **kwargs)


def _fetch(gm, target):
    value = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value
