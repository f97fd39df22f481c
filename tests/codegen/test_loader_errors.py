"""One test per kind of mistake in op_defs YAML: the loader must raise LoadError naming the file,
the line of the offending key or item, and what is wrong.

In each snippet the line the problem must point at carries the comment `# <-`.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from esgraph_codegen import loader

REPO = Path(__file__).resolve().parents[2]


def marked_lines(text: str):
    return [n for n, line in enumerate(textwrap.dedent(text).splitlines(), 1) if "# <-" in line]


def problems(load_yaml, files):
    with pytest.raises(loader.LoadError) as err:
        load_yaml(files)
    assert str(err.value) == "\n".join(err.value.problems)
    return err.value.problems


def the_problem(load_yaml, text: str) -> str:
    """The message of the only problem in `text`, after checking it points at the marked line."""
    found = problems(load_yaml, text)
    assert len(found) == 1, found
    (line,) = marked_lines(text)
    location, message = found[0].split(": ", 1)
    assert location == f"op_defs/ops.yaml:{line}", found[0]
    return message


# ---- files -------------------------------------------------------------------------------------
def test_invalid_yaml_syntax(load_yaml):
    message = the_problem(load_yaml, """\
        ops:
          - name: t_x
            since: 1
            summary: a: b  # <-
        """)
    assert message.startswith("not valid YAML: ")
    assert "mapping values are not allowed here" in message


def test_empty_file(load_yaml):
    message = the_problem(load_yaml, "# only a comment  # <-\n")
    assert message == "empty file; expected a mapping with `ops:`"


def test_unknown_top_level_key(load_yaml):
    message = the_problem(load_yaml, """\
        ops: []
        opz: []  # <-
        """)
    assert message == "unknown key `opz` in the file (allowed: ops)"


def test_file_without_ops_list(load_yaml):
    message = the_problem(load_yaml, """\
        ops: {name: t_x}  # <-
        """)
    assert message == "the file needs `ops:`, a list of op entries"


# ---- op entries --------------------------------------------------------------------------------
@pytest.mark.parametrize("text, what", [
    ("""\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            descripton: Misspelled doc.  # <-
            outputs: [{name: y, type: f32}]
            infer: unary
        """, "unknown key `descripton` in an op"),
    ("""\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            inputs:
              - {name: x, type: f32, optinal: true}  # <-
            outputs: [{name: y, type: f32}]
            infer: unary
        """, "unknown key `optinal` in an input of op `t_x`"),
    ("""\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            outputs: [{name: y, type: f32}]
            attrs:
              - name: n
                type: int
                default: 1
                min: 0  # <-
            infer: unary
        """, "unknown key `min` in an attribute of op `t_x`"),
    ("""\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            outputs:
              - {name: y, type: f32, shape: [2]}  # <-
            infer: unary
        """, "unknown key `shape` in an output of op `t_x`"),
], ids=["op", "input", "attribute", "output"])
def test_unknown_key(load_yaml, text, what):
    message = the_problem(load_yaml, text)
    assert message.startswith(what + " (allowed: ")


def test_missing_required_op_key(load_yaml):
    message = the_problem(load_yaml, """\
        ops:
          - name: t_x  # <-
            since: 1
            summary: A test op.
            outputs: [{name: y, type: f32}]
        """)
    assert message == "op `t_x` is missing the required key `infer`"


def test_wrong_scalar_type(load_yaml):
    message = the_problem(load_yaml, """\
        ops:
          - name: t_x
            since: "one"  # <-
            summary: A test op.
            outputs: [{name: y, type: f32}]
            infer: unary
        """)
    assert message == "`since` of op `t_x` must be an integer, got 'one'"


def test_op_name_not_snake_case(load_yaml):
    message = the_problem(load_yaml, """\
        ops:
          - name: tX  # <-
            since: 1
            summary: A test op.
            outputs: [{name: y, type: f32}]
            infer: unary
        """)
    assert message == "op name `tX` is not snake_case"


def test_duplicate_op_across_files(load_yaml):
    op = """\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            outputs: [{name: y, type: f32}]
            infer: unary
        """
    found = problems(load_yaml, {"a.yaml": op, "b.yaml": "# the same op again\n" + textwrap.dedent(op)})
    assert found == ["op_defs/b.yaml:3: duplicate op `t_x` (first defined at op_defs/a.yaml:2)"]


@pytest.mark.parametrize("second", [
    "inputs: [{name: x, type: f32}, {name: bias, type: f32, optional: true}]\n"
    "    attrs:\n"
    "      - {name: bias, type: int, default: 0}  # <-",
    "inputs:\n"
    "      - {name: x, type: f32}\n"
    "      - {name: bias, type: f32, optional: true}\n"
    "      - {name: bias, type: f32, optional: true}  # <-",
], ids=["input-and-attribute", "two-inputs"])
def test_duplicate_names_within_an_op(load_yaml, second):
    text = ("ops:\n"
            "  - name: t_x\n"
            "    since: 1\n"
            "    summary: A test op.\n"
            "    outputs: [{name: y, type: f32}]\n"
            "    infer: unary\n"
            f"    {second}\n")
    message = the_problem(load_yaml, text)
    assert message.startswith("duplicate name `bias` in op `t_x` (first at line ")


# ---- types ---------------------------------------------------------------------------------------
def test_unknown_dtype_in_type_vars(load_yaml):
    message = the_problem(load_yaml, """\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            type_vars:
              T: [f32, f128]  # <-
            inputs: [{name: x, type: T}]
            outputs: [{name: y, type: T}]
            infer: unary
        """)
    assert message.startswith("unknown dtype `f128` in type variable `T` (dtypes: f32, f16")


def test_input_type_neither_dtype_nor_type_var(load_yaml):
    message = the_problem(load_yaml, """\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            type_vars: {T: float}
            inputs:
              - {name: x, type: T}
              - {name: w, type: U}  # <-
            outputs: [{name: y, type: T}]
            infer: unary
        """)
    assert message == ("input `w` of op `t_x` has type `U`, which is neither a dtype nor a "
                       "declared type variable")


def test_unused_type_var(load_yaml):
    message = the_problem(load_yaml, """\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            type_vars:
              T: float
              U: int  # <-
            inputs: [{name: x, type: T}]
            outputs: [{name: y, type: T}]
            infer: unary
        """)
    assert message == "type variable `U` of op `t_x` is declared but never used"


# ---- inputs --------------------------------------------------------------------------------------
def test_required_input_after_optional(load_yaml):
    message = the_problem(load_yaml, """\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            inputs:
              - {name: x, type: f32}
              - {name: bias, type: f32, optional: true}
              - {name: w, type: f32}  # <-
            outputs: [{name: y, type: f32}]
            infer: unary
        """)
    assert message == "required input `w` of op `t_x` follows an optional input"


def test_two_variadic_inputs(load_yaml):
    text = """\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            inputs:
              - {name: xs, type: f32, variadic: true}  # <-
              - {name: ys, type: f32, variadic: true}  # <-
            outputs: [{name: y, type: f32}]
            infer: concat
        """
    (found,) = problems(load_yaml, text)
    location, message = found.split(": ", 1)
    assert location in [f"op_defs/ops.yaml:{n}" for n in marked_lines(text)]
    assert message == "op `t_x` has more than one variadic input (`xs` and `ys`)"


# ---- attributes ----------------------------------------------------------------------------------
ATTR_OP = """\
    ops:
      - name: t_x
        since: 1
        summary: A test op.
        outputs: [{name: y, type: f32}]
        attrs:
          - %s
        infer: fill
    """


@pytest.mark.parametrize("attr", [
    "{name: a, type: int, default: 1, required: true}  # <-",
    "{name: a, type: int}  # <-",
], ids=["both", "neither"])
def test_attribute_needs_exactly_one_of_default_and_required(load_yaml, attr):
    message = the_problem(load_yaml, ATTR_OP % attr)
    assert message == "attribute `a` of op `t_x` needs exactly one of `default` and `required: true`"


@pytest.mark.parametrize("attr, problem", [
    ("{name: a, type: int, default: 1.5}", "expected int, got 1.5"),
    ("{name: a, type: dtype, default: f128}", "expected dtype, got 'f128'"),
    ("{name: a, type: \"list<int>\", default: [1, 2.5]}", "expected a list of int, got [1, 2.5]"),
    ("{name: a, type: bool, default: 0}", "expected bool, got 0"),
], ids=["int", "dtype", "list-int", "bool"])
def test_default_of_the_wrong_type(load_yaml, attr, problem):
    message = the_problem(load_yaml, ATTR_OP % (attr + "  # <-"))
    assert message == f"default of attribute `a` of op `t_x`: {problem}"


@pytest.mark.parametrize("attr, problem", [
    ("{name: a, type: int, default: 0, range: [1, null]}", "0 is outside the range [1, None]"),
    ("{name: a, type: \"list<float>\", default: [0.5, 2], range: [0, 1]}", "2 is outside the range [0, 1]"),
], ids=["int", "list-float"])
def test_default_outside_range(load_yaml, attr, problem):
    message = the_problem(load_yaml, ATTR_OP % (attr + "  # <-"))
    assert message == f"default of attribute `a` of op `t_x`: {problem}"


def test_enum_without_values(load_yaml):
    message = the_problem(load_yaml, ATTR_OP % "{name: mode, type: enum, required: true}  # <-")
    assert message == ("attribute `mode` of op `t_x` is an enum and needs `values`, "
                       "a list of snake_case names")


def test_enum_default_not_among_values(load_yaml):
    message = the_problem(load_yaml, ATTR_OP % "{name: mode, type: enum, values: [a, b], default: c}  # <-")
    assert message == "default of attribute `mode` of op `t_x`: expected one of a, b, got 'c'"


@pytest.mark.parametrize("attr, problem", [
    ("{name: a, type: float, default: 0, axis_of: x}", "`axis_of` of attribute `a` of op `t_x` is only for int and list<int> attributes"),
    ("{name: a, type: int, default: 0, axis_of: z}", "`axis_of` of attribute `a` of op `t_x` names `z`, which is none of its inputs and outputs (y)"),
    ("{name: a, type: int, default: 0, axis_of: 3}", "`axis_of` of attribute `a` of op `t_x` must be a string, got 3"),
], ids=["float", "unknown-tensor", "not-a-name"])
def test_axis_of(load_yaml, attr, problem):
    assert the_problem(load_yaml, ATTR_OP % (attr + "  # <-")) == problem


def test_axis_of_an_input_after_a_variadic_one(load_yaml):
    message = the_problem(load_yaml, """\
        ops:
          - name: t_x
            since: 1
            summary: x.
            inputs: [{name: xs, type: f32, variadic: true}, {name: w, type: f32}]
            outputs: [{name: y, type: f32}]
            attrs:
              - {name: axis, type: int, default: 0, axis_of: w}  # <-
            infer: concat
    """)
    assert message == "`axis_of` of attribute `axis` of op `t_x` names `w`, which follows a variadic input"


# ---- outputs and subgraphs -------------------------------------------------------------------------
def test_output_dtype_from_non_dtype_attribute(load_yaml):
    message = the_problem(load_yaml, """\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            outputs:
              - {name: y, type: "attr:n"}  # <-
            attrs:
              - {name: n, type: int, default: 1}
            infer: fill
        """)
    assert message == "output `y` of op `t_x` takes its dtype from `n`, which is not a dtype attribute"


@pytest.mark.parametrize("count, problem", [
    ("3", "must be one of {attr: X}, {input: X}, {subgraph: X}"),
    ("{inputs: x}", "must be one of {attr: X}, {input: X}, {subgraph: X}"),
    ("{input: x}", "refers to input `x`, which is not a variadic input of the op"),
    ("{attr: mode}", "refers to attr `mode`, which is not a list or int attribute of the op"),
], ids=["not-a-mapping", "unknown-kind", "non-variadic-input", "enum-attribute"])
def test_bad_count(load_yaml, count, problem):
    message = the_problem(load_yaml, f"""\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            inputs: [{{name: x, type: f32}}]
            outputs:
              - name: ys
                type: f32
                count: {count}  # <-
            attrs:
              - {{name: mode, type: enum, values: [a, b], default: a}}
            infer: split
        """)
    assert message == f"`count` of output `ys` of op `t_x` {problem}"


def test_subgraph_params_naming_a_non_variadic_input(load_yaml):
    message = the_problem(load_yaml, """\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            inputs: [{name: x, type: f32}]
            outputs: [{name: outs, type: subgraph, count: {subgraph: body}}]
            subgraphs:
              - name: body
                params: x  # <-
            infer: while_loop
        """)
    assert message == "`params` of subgraph `body` of op `t_x` must name a variadic input"


def test_unknown_inference_rule(load_yaml):
    message = the_problem(load_yaml, """\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            outputs: [{name: y, type: f32}]
            infer: elementwise  # <-
        """)
    assert message.startswith("unknown inference rule `elementwise` in op `t_x` (known: unary, broadcast, ")


# ---- compute expressions ---------------------------------------------------------------------------
@pytest.mark.parametrize("expr, problem", [
    ("x + z", "unknown name `z` (inputs and attributes: x, alpha)"),
    ("expm1(x)", "unknown function `expm1` (functions: abs, acos, acosh, asin, "),
    ("pow(x)", "`pow` takes 2 argument(s), got 1"),
    ("select(x > 0, x)", "`select` takes 3 argument(s), got 2"),
    ("lambda: x", "`lambda: x` is not part of the expression language"),
    ("x.real * alpha", "`x.real` is not part of the expression language"),
    ("x if x > 0 else alpha", "`x if x > 0 else alpha` is not part of the expression language"),
    ("x + 'one'", "only numeric literals are allowed, not 'one'"),
    ("x +", "cannot parse `x +`: "),
], ids=["unknown-name", "unknown-function", "arity", "arity-select", "lambda", "attribute-access",
        "conditional-expression", "string-literal", "syntax"])
def test_compute_expression(load_yaml, expr, problem):
    message = the_problem(load_yaml, f"""\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            type_vars: {{T: float}}
            inputs: [{{name: x, type: T}}]
            outputs: [{{name: y, type: T}}]
            attrs: [{{name: alpha, type: float, default: 1}}]
            infer: unary
            compute: "{expr}"  # <-
        """)
    assert message.startswith(f"`compute` of op `t_x`: {problem}")


def test_valid_compute_expression_uses_the_whole_language(load_yaml):
    load_yaml("""\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            type_vars: {T: float}
            inputs: [{name: x, type: T}, {name: w, type: T}]
            outputs: [{name: y, type: T}]
            attrs: [{name: alpha, type: float, default: 1}]
            infer: broadcast
            compute: "select(not (x < 0 or x >= w) and x != 1.5, -x / 2, max(alpha * rsqrt(w), cast(x)))"
        """)


# ---- the ATen mapping -----------------------------------------------------------------------------
ATEN_OP = """\
    ops:
      - name: t_x
        since: 1
        summary: A test op.
        inputs: [{name: x, type: f32}]
        outputs: [{name: y, type: f32}]
        attrs:
          - {name: alpha, type: float, %s}
        infer: unary
        aten: %s  # <-
    """


@pytest.mark.parametrize("aten, problem", [
    ("relu.default", "`aten` of op `t_x` must be a list"),
    ("[relu]", "`aten` of op `t_x` lists 'relu': an ATen overload is `name.overload`, as `add.Tensor`"),
    ("[aten.relu.default]", "`aten` of op `t_x` lists 'aten.relu.default': an ATen overload is `name.overload`, as `add.Tensor`"),
    ("[3]", "`aten` of op `t_x` lists 3: an ATen overload is `name.overload`, as `add.Tensor`"),
    ("[relu.default, relu.default]", "`aten` of op `t_x` lists `relu.default` twice"),
], ids=["not-a-list", "no-overload", "namespaced", "not-a-string", "twice"])
def test_aten(load_yaml, aten, problem):
    assert the_problem(load_yaml, ATEN_OP % ("default: 1.0", aten)) == problem


def test_aten_of_an_op_with_a_required_attribute(load_yaml):
    message = the_problem(load_yaml, ATEN_OP % ("required: true", "[elu.default]"))
    assert message == ("`aten` of op `t_x`: attribute(s) alpha have no default, which the ATen arguments would have to set: "
                       "convert it by hand")


def test_an_aten_overload_claimed_by_two_ops(load_yaml):
    op = """\
        ops:
          - name: %s
            since: 1
            summary: A test op.
            inputs: [{name: x, type: f32}]
            outputs: [{name: y, type: f32}]
            infer: unary
            aten: [relu.default]
        """
    found = problems(load_yaml, {"a.yaml": op % "t_a", "b.yaml": op % "t_b"})
    assert found == ["op_defs/b.yaml:2: `aten` of `t_b` claims `relu.default`, which `t_a` claims already"]


# ---- the ONNX export -------------------------------------------------------------------------------
ONNX_OP = """\
    ops:
      - name: t_x
        since: 1
        summary: A test op.
        inputs: [{name: x, type: f32}]
        outputs: [{name: y, type: bool}]
        attrs:
          - {name: positive, type: bool, default: true}
          - {name: negative, type: bool, default: true}
        infer: unary
        onnx: %s  # <-
    """


@pytest.mark.parametrize("onnx, problem", [
    ("IsInf", "`onnx` of op `t_x` must be a mapping"),
    ("{attrs: {}}", "`onnx` of op `t_x` needs `op`, the ONNX op type"),
    ("{op: IsInf, attr: {}}", "unknown key `attr` in `onnx` of op `t_x` (allowed: attrs, op)"),
    ("{op: 3}", "`op` of `onnx` of op `t_x` must be a string, got 3"),
    ("{op: is_inf}", "`op` of `onnx` of op `t_x` must be an ONNX op type (CamelCase, as `Relu`), got 'is_inf'"),
    ("{op: IsInf, attrs: [positive]}", "`attrs` of `onnx` of op `t_x` must be a mapping from attribute names to ONNX names"),
    ("{op: IsInf, attrs: {postive: detect_positive}}", "`attrs` of `onnx` of op `t_x` renames `postive`, which is not an attribute of the op"),
    ("{op: IsInf, attrs: {positive: a, positive: b}}", "`attrs` of `onnx` of op `t_x` renames `positive` twice"),
    ("{op: IsInf, attrs: {positive: 1}}", "`attrs` of `onnx` of op `t_x` renames `positive` to 1, not a snake_case name"),
    ("{op: IsInf, attrs: {positive: negative}}", "`onnx` of op `t_x` writes attributes `positive` and `negative` both as `negative`"),
], ids=["not-a-mapping", "no-op", "unknown-key", "op-not-a-string", "op-not-an-onnx-name", "attrs-not-a-mapping",
        "unknown-attribute", "renamed-twice", "rename-not-a-name", "same-onnx-name"])
def test_onnx(load_yaml, onnx, problem):
    assert the_problem(load_yaml, ONNX_OP % onnx) == problem


def test_onnx_of_an_op_with_bodies(load_yaml):
    message = the_problem(load_yaml, """\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            inputs: [{name: init, type: any, variadic: true}]
            outputs: [{name: outs, type: subgraph, count: {input: init}}]
            subgraphs: [{name: cond, params: init}, {name: body, params: init}]
            infer: while_loop
            onnx: {op: Loop}  # <-
        """)
    assert message == "`onnx` of op `t_x`: an op with bodies cannot export as one node"


def test_onnx_keeps_the_names_of_the_attributes_it_does_not_rename(load_yaml):
    op = load_yaml(ONNX_OP % "{op: IsInf, attrs: {positive: detect_positive}}").op("t_x")
    assert op.onnx.op == "IsInf"
    assert [op.onnx.attr_name(a.name) for a in op.attrs] == ["detect_positive", "negative"]


# ---- examples ------------------------------------------------------------------------------------
EXAMPLE_OP = textwrap.dedent("""\
    ops:
      - name: t_x
        since: 1
        summary: A test op.
        inputs: [{name: x, type: f32}]
        outputs: [{name: y, type: f32}]
        attrs: [{name: axis, type: int, required: true}]
        infer: unary
        examples:
    """)


def with_example(example: str) -> str:
    return EXAMPLE_OP + textwrap.indent(textwrap.dedent(example), " " * 6)


def test_example_naming_an_unknown_input(load_yaml):
    message = the_problem(load_yaml, with_example("""\
      - inputs:
          x: {dtype: f32, shape: [2]}
          z: {dtype: f32, shape: [2]}  # <-
        attrs: {axis: 0}
        outputs: {y: {dtype: f32, shape: [2]}}
        """))
    assert message == "an example of op `t_x` names input `z`, which op `t_x` does not have"


def test_example_missing_a_required_attribute(load_yaml):
    message = the_problem(load_yaml, with_example("""\
      - inputs: {x: {dtype: f32, shape: [2]}}  # <-
        outputs: {y: {dtype: f32, shape: [2]}}
        """))
    assert message == "an example of op `t_x` lacks the required attribute `axis`"


def test_example_tensor_with_a_ragged_value(load_yaml):
    text = with_example("""\
      - inputs:
          x: {dtype: f32, value: [[1, 2], [3]]}  # <-
        attrs: {axis: 0}
        outputs: {y: {dtype: f32, shape: [2]}}
        """)
    # The loader also reports `x` as missing (see test_known_bugs.py); check the first problem.
    first = problems(load_yaml, text)[0]
    assert first == (f"op_defs/ops.yaml:{marked_lines(text)[0]}: `value` of `x` in an example of "
                     "op `t_x` is not a regular nested list of scalars")


def test_example_attribute_outside_its_range(load_yaml):
    text = with_example("""\
      - inputs: {x: {dtype: f32, shape: [2]}}
        attrs: {axis: 9}  # <-
        outputs: {y: {dtype: f32, shape: [2]}}
        """).replace("required: true", "required: true, range: [0, 3]")
    message = the_problem(load_yaml, text)
    assert message == "attribute `axis` in an example of op `t_x`: 9 is outside the range [0, 3]"


# ---- versions ------------------------------------------------------------------------------------
@pytest.mark.parametrize("element, what", [
    ("inputs: [{name: x, type: f32}, {name: b, type: f32, optional: true, since: 2}]  # <-", "input `b`"),
    ("attrs: [{name: a, type: int, default: 0, since: 1}]  # <-", "attribute `a`"),
], ids=["input", "attribute"])
def test_since_older_than_the_op(load_yaml, element, what):
    message = the_problem(load_yaml, f"""\
        ops:
          - name: t_x
            since: 3
            summary: A test op.
            outputs: [{{name: y, type: f32}}]
            infer: unary
            {element}
        """)
    version = 2 if what.startswith("input") else 1
    assert message == f"`since` of {what} of op `t_x` ({version}) is older than the op's (3)"


# ---- all at once ----------------------------------------------------------------------------------
def test_every_problem_of_a_file_in_one_error(load_yaml):
    text = """\
        ops:
          - name: t_one
            since: 1
            summary: A test op.
            inputs: [{name: x, type: f33}]  # <-
            outputs: [{name: y, type: f32}]
            infer: unary
          - name: t_two  # <-
            since: 1
            summary: A test op.
            outputs: [{name: y, type: f32}]
          - name: t_three
            since: 1
            summary: A test op.
            outputs: [{name: y, type: f32}]
            attrs: [{name: a, type: float, default: x}]  # <-
            infer: unary
            compute: a + b  # <-
        """
    found = problems(load_yaml, text)
    assert [p.split(": ", 1)[0] for p in found] == [f"op_defs/ops.yaml:{n}" for n in marked_lines(text)]
    assert "`f33`" in found[0] and "`infer`" in found[1] and "expected float" in found[2]
    assert "unknown name `b`" in found[3]


def test_problems_of_several_files_in_one_error(load_yaml):
    found = problems(load_yaml, {"a.yaml": "", "b.yaml": "ops: [{name: t_x}]\n"})
    assert found[0] == "op_defs/a.yaml:1: empty file; expected a mapping with `ops:`"
    assert {p.split(": ", 1)[0] for p in found[1:]} == {"op_defs/b.yaml:1"}
    assert len(found) == 1 + 4, "one problem per missing key: since, summary, outputs, infer"


# ---- the real op set -----------------------------------------------------------------------------
def test_real_op_defs_load_cleanly():
    opset = loader.load_dir(REPO / "op_defs", REPO / "compiler_core/ir/infer_rules.def")
    assert len(opset.ops) >= 60
    names = [op.name for op in opset.ops]
    assert names == sorted(set(names))
    assert {"add", "if", "while", "fill"} <= set(names)
    assert all(op.loc.file.startswith("op_defs/") for op in opset.ops)
    assert set(opset.infer_rules) >= {op.infer for op in opset.ops}


# ---- sized_by_data -----------------------------------------------------------------------------
def test_sized_by_data_is_a_bool(load_yaml):
    message = the_problem(load_yaml, """\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            inputs: [{name: x, type: f32}]
            outputs: [{name: y, type: i64}]
            infer: unary
            sized_by_data: yes please  # <-
        """)
    assert message == "`sized_by_data` of op `t_x` must be true or false, got 'yes please'"


def test_sized_by_data_excludes_a_compute_expression(load_yaml):
    message = the_problem(load_yaml, """\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            inputs: [{name: x, type: f32}]
            outputs: [{name: y, type: f32}]
            infer: unary
            compute: "x"
            sized_by_data: true  # <-
        """)
    assert message == "op `t_x` cannot be `sized_by_data` with bodies or a `compute`"


def test_sized_by_data_reaches_the_model(load_yaml):
    (op,) = load_yaml("""\
        ops:
          - name: t_x
            since: 1
            summary: A test op.
            inputs: [{name: x, type: f32}]
            outputs: [{name: y, type: i64}]
            infer: unary
            sized_by_data: true
        """).ops
    assert op.sized_by_data


# ---- static_form ---------------------------------------------------------------------------------
FORM = """\
        ops:
          - name: t_form
            since: 1
            summary: The fixed-size form.
            inputs: [{name: x, type: f32}]
            outputs: [{name: y, type: f32}]
            attrs:
              - {name: shape, type: "list<int>", required: true}
              - {name: value, type: float, default: 0}
              - {name: label, type: string, default: ""}
            infer: unary
"""


def test_static_form_reaches_the_model(load_yaml):
    ops = load_yaml(FORM + """\
          - name: t_form_to
            since: 1
            summary: The form with its shape a tensor.
            inputs: [{name: x, type: f32}, {name: shape, type: i64}]
            outputs: [{name: y, type: f32}]
            attrs: [{name: value, type: float, default: 0}]
            sized_by_data: true
            static_form: t_form
            infer: unary
        """).ops
    assert {op.name: op.static_form for op in ops} == {"t_form": "", "t_form_to": "t_form"}


def test_static_form_needs_sized_by_data(load_yaml):
    message = the_problem(load_yaml, FORM + """\
          - name: t_form_to
            since: 1
            summary: The form with its shape a tensor.
            inputs: [{name: x, type: f32}, {name: shape, type: i64}]
            outputs: [{name: y, type: f32}]
            static_form: t_form  # <-
            infer: unary
        """)
    assert message.startswith("op `t_form_to` has a `static_form` but is not `sized_by_data`")


@pytest.mark.parametrize("change, expected", [
    ("static_form: t_nothing", "names `t_nothing`, which is no op of fixed sizes without bodies"),
    ("inputs: [{name: shape, type: i64}]", "its other inputs (none) are not `t_form`'s (x)"),
    ("inputs: [{name: x, type: f32}, {name: shape, type: i64}, {name: label, type: i64}]",
     "input `label` stands for `t_form`'s attribute of type string"),
    ("inputs: [{name: x, type: f32}, {name: shape, type: f32}]", "input `shape` stands for an integer attribute"),
    ("inputs: [{name: x, type: f32}, {name: shape, type: i64, optional: true}]", "input `shape` is optional but"),
    ("inputs: [{name: shape, type: i64}, {name: x, type: f32, optional: true}]", "one for one, optional alike"),
    ("inputs: [{name: x, type: f32}]", "`t_form`'s required attribute `shape` is given by no input or attribute"),
    ("attrs: [{name: value, type: int, default: 0}]", "attribute `value` is not a scalar attribute of `t_form` of the same type"),
    ("attrs: [{name: label, type: string, default: s}]", "attribute `label` is not a scalar attribute"),
    ("outputs: [{name: y, type: i64}]", "its outputs are not `t_form`'s"),
])
def test_static_form_must_match_its_form(load_yaml, change, expected):
    entry = {"inputs": "inputs: [{name: x, type: f32}, {name: shape, type: i64}]", "static_form": "static_form: t_form", "attrs": "",
             "outputs": "outputs: [{name: y, type: f32}]"}
    entry[change.split(":")[0]] = change
    text = FORM + f"""\
          - name: t_form_to
            since: 1
            summary: The form with its shape a tensor.
            {entry["inputs"]}
            {entry["outputs"]}
            {entry["attrs"]}
            sized_by_data: true
            {entry["static_form"]}
            infer: unary
        """
    found = problems(load_yaml, text)
    assert len(found) == 1 and expected in found[0], found
