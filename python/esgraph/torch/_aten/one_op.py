"""The ATen overloads that are one esgraph op (the op YAML's `aten:` keys, _aten_table.py).

ATen promotes its operands' types (an int tensor times a float, a tensor plus a Python
number); esgraph's ops take operands of one type. The operands that share a type variable are
cast to the type PyTorch promoted them to, or to the result's float type where ATen divides or
takes a root of integers.
"""
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from .._aten_table import ONE_OP
from .._dtypes import TO_ESG
from .registry import Unsupported, as_dtype, converts, esg_dtype, ops


def _promoted(call, fakes):
    """The dtype ATen computes operands of one type variable in: their promoted type (fake
    tensors and Python numbers, ranked as ATen ranks them), or the result's float type."""
    _, dtype = elementwise_dtypes(*fakes, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    if call.val.dtype.is_floating_point and not dtype.is_floating_point:
        dtype = call.val.dtype
    return esg_dtype(dtype)


_FIXED = {str(d.name): d for d in TO_ESG.values()}  # a fixed dtype by its YAML name


def _convert(op_name, types):
    op = getattr(ops, op_name)

    def convert(call, *args, **kwargs):
        schema = call.node.target._schema.arguments
        settings = {**{a.name: v for a, v in zip(schema[len(types):], args[len(types):])}, **kwargs}
        for k, v in settings.items():
            if v != call.default(k):
                raise Unsupported(f"argument `{k}`={v!r}: {call.name} converts as esgraph's `{op_name}`, which has no such setting")
        args = args[:len(types)]
        operands = list(args)
        for var in set(types):
            at = [i for i, t in enumerate(types) if t == var]
            if var in _FIXED:  # an input of one dtype whatever the others' (where's bool condition)
                for i in at:
                    operands[i] = as_dtype(operands[i], _FIXED[var])
                continue
            dtype = _promoted(call, [call.arg_val(i) for i in at])
            for i in at:
                operands[i] = as_dtype(operands[i], dtype)
        return op(*operands)
    return convert


for _overload, (_op, _types) in ONE_OP.items():
    converts(_overload)(_convert(_op, _types))
