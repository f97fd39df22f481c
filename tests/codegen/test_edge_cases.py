"""Edge cases of the loader and the emitters that once went wrong: each test states the
behaviour the codegen must keep."""
from __future__ import annotations

import pytest

from esgraph_codegen import emitters, loader, render

EXAMPLES = "tests/op_examples_test.cpp"


def test_example_of_an_op_with_two_outputs_renders(load_yaml):
    opset = load_yaml("""\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            inputs: [{name: x, type: f32}]
            outputs: [{name: values, type: f32}, {name: indices, type: i64}]
            infer: arg_reduce
            examples:
              - inputs: {x: {dtype: f32, shape: [4]}}
                outputs: {values: {dtype: f32, shape: []}, indices: {dtype: i64, shape: []}}
        """)
    text = render.render_all(opset, "op_defs", only=[EXAMPLES])[EXAMPLES]
    assert "esg::DType::I64" in text


def test_example_of_an_op_with_bodies_is_rejected_or_passes_them(load_yaml, split_args):
    try:
        opset = load_yaml("""\
            ops:
              - name: t_x
                since: 1
                summary: A test op.
                inputs: [{name: pred, type: bool}]
                outputs: [{name: outs, type: subgraph, count: {subgraph: then_branch}}]
                subgraphs: [{name: then_branch}, {name: else_branch}]
                infer: if_else
                examples:
                  - inputs: {pred: {dtype: bool, shape: []}}
                    outputs: {outs: [{dtype: f32, shape: [2]}]}
            """)
    except loader.LoadError:
        return
    op = opset.op("t_x")
    args = split_args(emitters.example_args(op, op.examples[0]))
    assert len(args) == len(emitters.cpp_params(op)) + 1, args


def test_duplicate_output_names_are_rejected(load_yaml):
    with pytest.raises(loader.LoadError, match="duplicate name `y`"):
        load_yaml("""\
            ops:
              - name: t_x
                since: 1
                summary: A test op.
                inputs: [{name: x, type: f32}]
                outputs: [{name: y, type: f32}, {name: y, type: i64}]
                infer: unary
            """)


def test_duplicate_enum_values_are_rejected(load_yaml):
    with pytest.raises(loader.LoadError):
        load_yaml("""\
            ops:
              - name: t_x
                since: 1
                summary: A test op.
                outputs: [{name: y, type: f32}]
                attrs: [{name: mode, type: enum, values: [a, b, a], default: a}]
                infer: fill
            """)


def test_example_attrs_that_are_not_a_mapping_are_rejected(load_yaml):
    with pytest.raises(loader.LoadError, match="ops.yaml:9: "):
        load_yaml("""\
            ops:
              - name: t_x
                since: 1
                summary: A test op.
                outputs: [{name: y, type: f32}]
                attrs: [{name: value, type: float, default: 0}]
                infer: fill
                examples:
                  - attrs: [value, 2]
                    outputs: {y: {dtype: f32, shape: []}}
            """)


def test_ragged_example_value_is_reported_once(load_yaml):
    with pytest.raises(loader.LoadError) as err:
        load_yaml("""\
            ops:
              - name: t_x
                since: 1
                summary: A test op.
                inputs: [{name: x, type: f32}]
                outputs: [{name: y, type: f32}]
                infer: unary
                examples:
                  - inputs: {x: {dtype: f32, value: [[1, 2], [3]]}}
                    outputs: {y: {dtype: f32, shape: [2]}}
            """)
    assert len(err.value.problems) == 1, err.value.problems


def test_enum_without_values_is_reported_once(load_yaml):
    with pytest.raises(loader.LoadError) as err:
        load_yaml("""\
            ops:
              - name: t_x
                since: 1
                summary: A test op.
                outputs: [{name: y, type: f32}]
                attrs: [{name: mode, type: enum, default: a}]
                infer: fill
            """)
    assert len(err.value.problems) == 1, err.value.problems


def test_second_variadic_input_is_located(load_yaml):
    with pytest.raises(loader.LoadError) as err:
        load_yaml("""\
            ops:
              - name: t_x
                since: 1
                summary: A test op.
                inputs:
                  - {name: x, type: f32}
                  - {name: xs, type: f32, variadic: true}
                  - {name: ys, type: f32, variadic: true}
                outputs: [{name: y, type: f32}]
                infer: concat
            """)
    assert err.value.problems == ["op_defs/ops.yaml:8: op `t_x` has more than one variadic input (`xs` and `ys`)"]


@pytest.mark.parametrize("snippet, message", [
    ("inputs: [{name: xs, type: f32, variadic: true, min: -1}]", "`min` of input `xs` of op `t_x` cannot be negative"),
    ("inputs: [{name: x, type: f32}]\n    attrs: [{name: k, type: int, default: 2, range: [3, 1]}]",
     "`range` of attribute `k` of op `t_x` is empty: 3 > 1"),
    ("inputs: [{name: x, type: f32}]\n    attrs: [{name: eps, type: float, default: 1e-5}]",
     "write 1.0e-5"),
    ("inputs: [{type: f32}]", "has no `name`"),
])
def test_small_schema_mistakes_have_clear_messages(load_yaml, snippet, message):
    text = f"""\
ops:
  - name: t_x
    since: 1
    summary: A test op.
    {snippet}
    outputs: [{{name: y, type: f32}}]
    infer: unary
"""
    with pytest.raises(loader.LoadError) as err:
        load_yaml(text)
    assert any(message in p for p in err.value.problems), err.value.problems


def test_ops_with_the_same_attributes_share_one_view_and_others_do_not(load_yaml):
    opset = load_yaml("""\
        ops:
          - name: t_a
            since: 1
            summary: A.
            inputs: [{name: x, type: f32}]
            outputs: [{name: y, type: f32}]
            attrs: [{name: axis, type: int, default: -1, axis_of: x}]
            infer: unary
          - name: t_b
            since: 1
            summary: B, the same attribute.
            inputs: [{name: x, type: f32}]
            outputs: [{name: y, type: f32}]
            attrs: [{name: axis, type: int, default: -1, axis_of: x}]
            infer: unary
          - name: t_c
            since: 1
            summary: C, another default.
            inputs: [{name: x, type: f32}]
            outputs: [{name: y, type: f32}]
            attrs: [{name: axis, type: int, default: 0, axis_of: x}]
            infer: unary
    """)
    assert [[op.name for op in group] for group in emitters.view_groups(opset.ops)] == [["t_a", "t_b"], ["t_c"]]
    header = render.render_all(opset, "op_defs", only=["core/ir/op_attrs.gen.hpp"])["core/ir/op_attrs.gen.hpp"]
    assert "using TBAttrs = TAAttrs;" in header
    assert "const AttrReader r(g, n, {OpKind::t_a, OpKind::t_b});" in header
    assert "struct TCAttrs {" in header
