"""Every op's YAML examples as shape and dtype tests through esgraph.ops.

Each example is built with `b.input(...)` for every input tensor (a list for a variadic input),
required attributes positionally after the required inputs (as the bindings document), the
other attributes as keywords, and the result's shape and dtype are compared with the example's
outputs.
"""
import numpy as np
import pytest

import esgraph
from esgraph import ops

from conftest import OP_SET, py_name

CONTROL_FLOW = {"if", "while"}  # no YAML examples: see test_control_flow.py


def _cases():
    for op in OP_SET.ops:
        for index, example in enumerate(op.examples):
            yield pytest.param(op, example, id=f"{op.name}-{index + 1}")


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def _call(b, op, example, make_tensor):
    """Calls esgraph.ops.<op> for `example`, with `make_tensor(b, name, ExampleTensor)`."""
    given = dict(example.inputs)
    attrs = {name: _plain(v) for name, v in example.attrs}
    args, kwargs = [], {}
    for inp in op.inputs:
        if inp.name not in given:
            continue
        value = given[inp.name]
        if inp.variadic:
            tensor = [make_tensor(b, f"{inp.name}{i}", t) for i, t in enumerate(value)]
        else:
            tensor = make_tensor(b, inp.name, value)
        (kwargs.__setitem__(inp.name, tensor) if inp.optional else args.append(tensor))
    for attr in op.required_attrs:
        args.append(attrs.pop(attr.name))
    kwargs.update(attrs)
    return getattr(ops, py_name(op.name))(*args, **kwargs)


def _as_input(b, name, t):
    return b.input(name, t.dtype, list(t.shape))


def _as_constant(b, name, t):
    return b.constant(np.array(t.value, dtype=np.bool_ if t.dtype == "bool" else t.dtype.replace("f", "float").replace("i", "int").replace("u", "uint")))


def _check_outputs(op, example, result):
    (out_name, expected), = example.outputs
    if op.returns_list:
        assert isinstance(result, list), f"{op.name} returns a list"
        assert len(result) == len(expected)
        pairs = list(zip(result, expected))
    else:
        assert isinstance(result, esgraph.Tensor)
        pairs = [(result, expected)]
    for got, want in pairs:
        assert got.shape == tuple(want.shape), f"{op.name}: output `{out_name}` shape"
        assert isinstance(got.dtype, esgraph.DType)
        assert got.dtype.name == want.dtype, f"{op.name}: output `{out_name}` dtype"
        assert got.ndim == len(want.shape)


@pytest.mark.parametrize("op, example", list(_cases()))
def test_example_shape_and_dtype(b, op, example):
    _check_outputs(op, example, _call(b, op, example, _as_input))


def _value_cases():
    for op in OP_SET.ops:
        for index, example in enumerate(op.examples):
            tensors = [t for _, v in example.inputs for t in (v if isinstance(v, tuple) else (v,))]
            if tensors and all(t.value is not None for t in tensors):
                yield pytest.param(op, example, id=f"{op.name}-{index + 1}")


@pytest.mark.parametrize("op, example", list(_value_cases()))
def test_example_from_numpy_constants(b, op, example):
    """The same examples with their values as numpy constants: shapes follow from the data."""
    _check_outputs(op, example, _call(b, op, example, _as_constant))


def test_every_op_is_bound_under_its_python_name():
    bound = set(ops.__all__)
    expected = {py_name(op.name) for op in OP_SET.ops}
    assert bound == expected
    assert "if_" in bound and "while_" in bound and "if" not in bound


def test_every_op_but_control_flow_has_an_example():
    assert {op.name for op in OP_SET.ops if not op.examples} == CONTROL_FLOW
