"""An ATen FX graph (from aot_autograd or torch.export, after core-ATen decompositions) rebuilt
through esgraph's builder.

Tensor placeholders become graph inputs, with Dynamo's or export's symbolic sizes as esgraph
symbols; the ones given in `constants` become constants. Placeholders that are sizes (SymInts
Dynamo passes beside the tensors) are read from the tensors' shapes and are no inputs.
Every node without a converter, or whose converter refuses it, is reported at once.
"""
import operator

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

from .. import _C
from .._frontend import ImportFailed, Unsupported, name_outputs
from ._aten import CONVERTERS, Call
from ._aten.registry import constant, esg_dtype, overload_name


def describe(node):
    return f"{overload_name(node.target) if node.op == 'call_function' else node.op} ({node.name})"


def converts(node):
    """Whether a node has a converter (placeholders, outputs and size arithmetic need none)."""
    return node.op != "call_function" or _is_python(node) or overload_name(node.target) in CONVERTERS


def unsupported_nodes(gm):
    """The call nodes no converter claims: (description, reason), in graph order."""
    return [(describe(n), "no converter") for n in gm.graph.nodes if not converts(n)]


def _is_python(node):
    """getitem on a node's tuple, and arithmetic on sizes (aten.sym_size, operator.mul on
    SymInts): PyTorch traced their values, which the converters read as they are."""
    if node.target is operator.getitem:
        return True
    sized = isinstance(node.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool))
    return sized and (not isinstance(node.target, torch._ops.OpOverload) or overload_name(node.target).startswith("aten.sym_"))


def _dims(shape):
    return [str(d) if isinstance(d, torch.SymInt) else int(d) for d in shape]


def to_graph(gm, name, constants=None, outputs=None):
    """(Graph, positions): the graph of `gm`, whose placeholder i is the constant `constants[i]`
    (a torch tensor) when given, and the placeholders that are its inputs, in order. `outputs`
    picks which of gm's outputs the graph has (all by default)."""
    missing = unsupported_nodes(gm)
    if missing:
        raise ImportFailed(name, missing)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    with _C.GraphBuilder(name) as b:
        env, positions, failures = _inputs(b, placeholders, constants or {})
        results, refused = _convert_nodes(gm, env)
        failures += [(describe(node), why) for node, why in refused]
        if failures:
            raise ImportFailed(name, failures)
        flat = list(results) if isinstance(results, (list, tuple)) else [results]
        flat = flat if outputs is None else [flat[k] for k in outputs]
        for k, o in enumerate(flat):
            if isinstance(o, (int, float, bool)):  # a number the program returns: a constant output
                flat[k] = constant(o, esg_dtype(torch.tensor(o).dtype))
            elif not isinstance(o, _C.Tensor):
                failures.append((f"output {k}", f"a {type(o).__name__}, not a tensor: a symbolic size, which the caller "
                                                f"reads from the tensors' shapes"))
        if failures:
            raise ImportFailed(name, failures)
        names = [f"output_{k}" for k in range(len(flat))] if len(flat) > 1 else ["output"]
        named = name_outputs(flat, names, {p.name for p in placeholders})
    return b.build(named), positions


def refused_nodes(gm):
    """The nodes whose converters refuse them (a size they need is symbolic, a setting esgraph
    lacks), found by converting gm with every placeholder an input: what fallback="eager"
    leaves to PyTorch besides the nodes without a converter."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    # Called while aot_autograd traces with fake tensors: the converters' constants are real.
    with unset_fake_temporarily(), _C.GraphBuilder("trial") as b:
        env, _, _ = _inputs(b, placeholders, {})
        return {node for node, _ in _convert_nodes(gm, env)[1]}


def _inputs(b, placeholders, constants):
    """The placeholders' values: constants, graph inputs (with their positions), or sizes."""
    env, positions, failures = {}, [], []
    for i, node in enumerate(placeholders):
        val = node.meta.get("val")
        if i in constants:
            env[node] = constant(constants[i], None)
        elif isinstance(val, torch.Tensor):
            try:
                env[node] = b.input(node.name, esg_dtype(val.dtype), _dims(val.shape))
            except Unsupported as e:
                failures.append((f"input {node.name}", str(e)))
                env[node] = _FAILED
            positions.append(i)
        else:  # a size: its value is the SymInt itself
            env[node] = val
    return env, positions, failures


def _convert_nodes(gm, env):
    """Converts every node after the placeholders into `env`: (the output node's value,
    [(node, why it was refused)]). A node downstream of a refused one is not tried."""
    refused = []
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "get_attr":  # a tensor the graph holds (a constant PyTorch lifted), or a body
            held = _attribute(gm, node.target)
            env[node] = held if isinstance(held, fx.GraphModule) else constant(held, None)
            continue
        args = fx.node.map_arg(node.args, lambda n: env[n])
        kwargs = fx.node.map_arg(node.kwargs, lambda n: env[n])
        if node.op == "output":
            return args[0], refused
        env[node] = _FAILED
        if _holds(args, kwargs, _FAILED):
            continue
        try:
            env[node] = _convert(node, args, kwargs)
        except Unsupported as e:
            refused.append((node, str(e)))
        except Exception as e:  # the builder's refusal, or a converter's limit: one report, with its type
            refused.append((node, f"{type(e).__name__}: {e}"))
    return None, refused


def convert_body(gm, operands):
    """A body's outputs (torch.cond's branches) built from `operands`, its placeholders' values,
    in the builder the caller is in; a refusal inside it is the caller's Unsupported."""
    env = dict(zip((n for n in gm.graph.nodes if n.op == "placeholder"), operands))
    results, refused = _convert_nodes(gm, env)
    if refused:
        raise Unsupported("; ".join(f"{describe(node)}: {why}" for node, why in refused))
    return list(results) if isinstance(results, (list, tuple)) else [results]


def _attribute(gm, target):
    value = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value


class _Failed:
    pass


_FAILED = _Failed()


def _holds(args, kwargs, value):
    found = []
    fx.node.map_aggregate((args, kwargs), lambda a: found.append(a) if a is value else a)
    return bool(found)


def _convert(node, args, kwargs):
    if node.target is operator.getitem:
        item = args[0][args[1]]
        if item is None:
            raise Unsupported(f"output {args[1]} of {describe(node.args[0])}, which esgraph does not compute "
                              f"(a pooling's indices, a normalization's saved statistics)")
        return item
    if _is_python(node):  # a size computed from sizes: PyTorch's traced value is it
        return node.meta.get("val")
    return CONVERTERS[overload_name(node.target)](Call(node), *args, **kwargs)
