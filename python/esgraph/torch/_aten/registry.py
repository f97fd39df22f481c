"""The table of ATen converters and what a converter is given.

A converter is `fn(call, *args, **kwargs)`: the node's arguments with every FX node replaced by
its value (an esgraph Tensor, a tuple of them, a Python number, or a torch.SymInt for a size
that is symbolic), and `call`, which knows the node's own metadata: its result's dtype and
shape as PyTorch computed them, and its arguments' as fake tensors. A converter that cannot
express a node raises Unsupported (or NeedsShape), naming the argument.
"""
import functools

import numpy as np
import torch

from ... import _C
from ..._frontend import NeedsShape, Unsupported, converts as _converts
from .._dtypes import TO_ESG

ops = _C.ops
CONVERTERS = {}
converts = functools.partial(_converts, table=CONVERTERS)


def overload_name(target):
    """"aten.add.Tensor" for torch.ops.aten.add.Tensor, "higher_order.cond" for torch.cond; the
    callable's name otherwise."""
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._schema.name.split('::')[1]}.{target._overloadname}"
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order.{target.name()}"
    return getattr(target, "__name__", str(target))


class Call:
    """One FX node being converted."""

    def __init__(self, node):
        self.node = node
        self.name = overload_name(node.target)

    @property
    def val(self):
        """The node's result as PyTorch traced it: a fake tensor, a tuple of them, or a SymInt."""
        return self.node.meta.get("val")

    def arg_val(self, i):
        """Argument i's traced value: fake tensors for its nodes (a list of them for a list)."""
        return torch.fx.node.map_arg(self.node.args[i], lambda a: a.meta.get("val"))

    def default(self, name):
        """The ATen schema's default for argument `name`."""
        for a in self.node.target._schema.arguments:
            if a.name == name:
                return a.default_value
        raise KeyError(name)


def esg_dtype(dtype):
    if dtype not in TO_ESG:
        raise Unsupported(f"dtype {dtype} has no esgraph counterpart")
    return TO_ESG[dtype]


def constant(value, dtype):
    """A Python number or a torch tensor as an esgraph constant of esgraph dtype `dtype`. A
    symbolic number (a size, or arithmetic on sizes) has no value until a run: reading it here
    would specialize it, a guard Dynamo would then check at every call."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise NeedsShape(f"the symbolic value {value} as an operand (esgraph reads sizes from its tensors' shapes only)")
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        t = ops.cast(_C.constant(value.float().numpy()), _C.bf16) if value.dtype == torch.bfloat16 else \
            _C.constant(value.contiguous().numpy())
        return t if dtype is None or t.dtype == dtype else ops.cast(t, dtype)
    if dtype == _C.bf16:
        return ops.cast(_C.constant(np.float32(value)), _C.bf16)
    return _C.constant(np.asarray(value, dtype=_NP[dtype]))


_NP = {_C.f32: np.float32, _C.f64: np.float64, _C.f16: np.float16, _C.i8: np.int8, _C.i16: np.int16,
       _C.i32: np.int32, _C.i64: np.int64, _C.u8: np.uint8, getattr(_C, "bool"): np.bool_}


def as_dtype(x, dtype):
    """x (a Tensor or a Python number) as a tensor of `dtype`."""
    if not isinstance(x, _C.Tensor):
        return constant(x, dtype)
    return x if x.dtype == dtype else ops.cast(x, dtype)


def static(size, what):
    """A size that must be a number here: a SymInt (a size Dynamo or torch.export left
    symbolic) cannot be a builder attribute."""
    if isinstance(size, torch.SymInt):
        raise NeedsShape(f"{what} is the symbolic size {size}, which this converter needs as a number")
    return int(size)


def ints(values, what):
    return [static(v, what) for v in values]


__all__ = ["CONVERTERS", "Call", "NeedsShape", "Unsupported", "as_dtype", "constant", "converts", "esg_dtype",
           "ints", "ops", "overload_name", "static"]
