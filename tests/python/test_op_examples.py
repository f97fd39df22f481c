"""Every op's YAML examples as shape and dtype tests through esgraph.ops.

Each example is built with `b.input(...)` for every input tensor (a list for a variadic input),
required attributes positionally after the required inputs (as the bindings document), the
other attributes as keywords, and the result's shape and dtype are compared with the example's
outputs. `if` and `while` have no examples; test_control_flow.py covers them.
"""
import numpy as np
import pytest

import esgraph
from esgraph import ops

from esgraph_op_set import NUMPY_DTYPES, OP_SET, expected_tensors, py_name

CONTROL_FLOW = {"if", "while"}


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def _call(b, op, example, make_tensor, required_attrs_by_keyword=False):
    """Calls esgraph.ops.<op> for `example`, with tensors from `make_tensor(b, name, ExampleTensor)`."""
    given = dict(example.inputs)
    attrs = {name: _plain(v) for name, v in example.attrs}
    args, kwargs = [], {}
    for inp in op.inputs:
        if inp.name not in given:
            continue
        if inp.variadic:
            tensor = [make_tensor(b, f"{inp.name}{i}", t) for i, t in enumerate(given[inp.name])]
        else:
            tensor = make_tensor(b, inp.name, given[inp.name])
        if inp.optional:
            kwargs[inp.name] = tensor
        else:
            args.append(tensor)
    if not required_attrs_by_keyword:
        args.extend(attrs.pop(attr.name) for attr in op.required_attrs)
    kwargs.update(attrs)
    return getattr(ops, py_name(op.name))(*args, **kwargs)


def _as_input(b, name, t):
    return b.input(name, t.dtype, list(t.shape))


def _as_constant(b, name, t):
    return b.constant(np.array(t.value, dtype=NUMPY_DTYPES[t.dtype]))


def _check_outputs(op, example, result):
    expected = expected_tensors(op, example)
    if op.returns_list:
        assert isinstance(result, list), f"{op.name} returns a list"
        assert len(result) == len(expected)
        pairs = list(zip(result, expected))
    else:
        assert isinstance(result, esgraph.Tensor)
        pairs = [(result, expected[0])]
    for k, (got, want) in enumerate(pairs):
        # A size the data decides (an op's `sized_by_data`) is a symbol until a run.
        fits = len(got.shape) == len(want.shape) and all(
            g == w or (op.sized_by_data and isinstance(g, str)) for g, w in zip(got.shape, want.shape))
        assert fits, f"{op.name}: shape of result {k}: {got.shape}, expected {tuple(want.shape)}"
        assert isinstance(got.dtype, esgraph.DType)
        assert got.dtype.name == want.dtype, f"{op.name}: dtype of result {k}"


def _cases(keep=lambda op, example: True):
    return [pytest.param(op, example, id=f"{op.name}-{index + 1}")
            for op in OP_SET.ops for index, example in enumerate(op.examples) if keep(op, example)]


@pytest.mark.parametrize("op, example", _cases())
def test_example_shape_and_dtype(b, op, example):
    _check_outputs(op, example, _call(b, op, example, _as_input))


@pytest.mark.parametrize("op, example", _cases(lambda op, example: op.required_attrs))
def test_example_with_required_attributes_by_keyword(b, op, example):
    _check_outputs(op, example, _call(b, op, example, _as_input, required_attrs_by_keyword=True))


def _all_values_given(op, example):
    tensors = [t for _, v in example.inputs for t in (v if isinstance(v, tuple) else (v,))]
    return bool(tensors) and all(t.value is not None for t in tensors)


@pytest.mark.parametrize("op, example", _cases(_all_values_given))
def test_example_from_numpy_constants(b, op, example):
    """The same examples with their values as constants: the shapes follow from the data."""
    _check_outputs(op, example, _call(b, op, example, _as_constant))


def test_every_op_is_bound_under_its_python_name():
    assert set(ops.__all__) == {py_name(op.name) for op in OP_SET.ops}
    assert {"if_", "while_"} <= set(ops.__all__) and "if" not in ops.__all__


def test_every_op_but_control_flow_has_an_example():
    # send and recv need a peer, which one process has not: tests/distributed runs them.
    assert {op.name for op in OP_SET.ops if not op.examples} == CONTROL_FLOW | {"send", "recv"}
