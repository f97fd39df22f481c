"""Golden-output tests of every emitter, over the test ops of fixtures/test_ops.yaml.

Each file that render.render_all() produces is compared with its committed copy under
tests/codegen/golden/<the same relative path>. After an intended change to a template, to the
generator or to the fixture, rewrite the copies and review the difference before committing:

    ESG_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/codegen/test_golden.py
    git diff tests/codegen/golden

With ESG_UPDATE_GOLDEN=1 the comparison tests write the golden files instead of comparing (and
remove golden files no emitter produces any more). The other tests here check properties that
make the golden copies meaningful: the fixture covers the whole schema, option fields are ordered
by `since`, every file carries the do-not-edit banner, and unchanged files are not rewritten.
"""
from __future__ import annotations

import difflib
import os
import re

from pathlib import Path

import pytest

from esgraph_codegen import emitters, naming, render
from esgraph_codegen.model import ATTR_TYPES, DTYPES

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("ESG_UPDATE_GOLDEN") == "1"
OUTPUTS = [e.output for e in emitters.EMITTERS]


@pytest.fixture(scope="module")
def rendered(fixture_opset):
    return render.render_all(fixture_opset, "op_defs")


# ---- the golden copies -----------------------------------------------------------------------
@pytest.mark.parametrize("rel", OUTPUTS)
def test_output_matches_golden(rendered, rel):
    golden = GOLDEN / rel
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(rendered[rel], encoding="utf-8")
        return
    assert golden.is_file(), f"{golden} is missing; run with ESG_UPDATE_GOLDEN=1 to create it"
    expected = golden.read_text(encoding="utf-8")
    if rendered[rel] != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), rendered[rel].splitlines(True),
                                            f"golden/{rel}", f"rendered {rel}", n=2))
        pytest.fail(f"{rel} differs from its golden copy (ESG_UPDATE_GOLDEN=1 rewrites it):\n{diff}")


def test_no_stale_golden_files():
    stale = sorted(str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob("*")
                   if p.is_file() and str(p.relative_to(GOLDEN)) not in OUTPUTS)
    if UPDATE:
        for rel in stale:
            (GOLDEN / rel).unlink()
        return
    assert stale == [], "golden files that no emitter produces"


# ---- the fixture exercises the whole schema ----------------------------------------------------
def test_fixture_covers_the_schema(fixture_opset):
    ops = fixture_opset.ops
    inputs = [i for op in ops for i in op.inputs]
    outputs = [o for op in ops for o in op.outputs]
    attrs = [a for op in ops for a in op.attrs]
    subgraphs = [s for op in ops for s in op.subgraphs]

    assert any(not i.optional and not i.variadic for i in inputs)
    assert any(i.optional for i in inputs)
    assert any(i.variadic and i.min_count > 1 for i in inputs)
    assert any(i.type == "any" for i in inputs)
    assert any(op.type_var(o.type) for op in ops for o in op.outputs), "an output of a type variable"
    assert any(o.type in DTYPES for o in outputs), "an output of a concrete dtype"
    assert any(o.type.startswith("attr:") for o in outputs)
    assert any(o.type == "subgraph" for o in outputs)
    assert {o.count.kind for o in outputs if o.count} == {"attr", "input", "subgraph"}
    assert any(len(op.outputs) > 1 for op in ops), "an op with several outputs"

    assert {a.type for a in attrs} == set(ATTR_TYPES)
    assert any(a.required for a in attrs) and any(not a.required for a in attrs)
    assert {a.type for a in attrs if a.range} >= {"int", "float", "list<int>", "list<float>"}
    assert any(e.since > op.since for op in ops for e in (*op.inputs, *op.attrs)), "a newer `since`"

    assert any(s.params for s in subgraphs) and any(not s.params for s in subgraphs)
    assert any(op.compute for op in ops)
    assert any(op.onnx and op.onnx.renames for op in ops) and any(op.onnx and not op.attrs for op in ops)
    assert any(op.takes_builder for op in ops)
    assert any(op.status != "stable" for op in ops)
    examples = [ex for op in ops for ex in op.examples]
    assert any(ex.attrs for ex in examples) and any(not ex.attrs for ex in examples)
    assert any(isinstance(t, tuple) for ex in examples for _, t in ex.inputs), "a variadic example input"
    assert any(isinstance(t, tuple) for ex in examples for _, t in ex.outputs), "a list example output"


# ---- properties of the output ----------------------------------------------------------------------
def _c_struct_fields(header: str, struct: str):
    body = re.search(r"typedef struct %s \{\n(.*?)\n\} %s;" % (struct, struct), header, re.S)
    assert body, f"no struct {struct} in the C header"
    return [re.match(r"\s*(.+?) (\w+);", line).group(1, 2) for line in body.group(1).splitlines()]


# The option fields of t_options: those of version 2 (the op's) in YAML order, optional inputs
# before attributes; then those added in version 3, `bias` and `late`, though the YAML lists
# them earlier.
T_OPTIONS_FIELDS = ["scale", "mode", "epsilon", "keep_dims", "label", "acc_dtype", "sizes", "weights",
                    "no_default", "bias", "late"]


def test_c_options_struct_starts_with_size_and_orders_fields_by_since(rendered, fixture_opset):
    fields = _c_struct_fields(rendered["include/esgraph/c/ops.h"], "esg_t_options_options")
    assert fields[0] == ("size_t", "struct_size")
    assert [name for _, name in fields[1:]] == T_OPTIONS_FIELDS
    assert dict((n, t) for t, n in fields)["bias"] == "esg_tensor"
    op = fixture_opset.op("t_options")
    assert [f.name for f in op.option_fields] == T_OPTIONS_FIELDS
    assert [f.since for f in op.option_fields] == sorted(f.since for f in op.option_fields)


def test_c_options_struct_of_an_op_without_options_holds_only_its_size(rendered):
    assert _c_struct_fields(rendered["include/esgraph/c/ops.h"], "esg_t_pair_options") == [
        ("size_t", "struct_size")]


@pytest.mark.parametrize("decl", [
    # required attributes are positional after required inputs and bodies; options last
    "esg_tensor esg_t_options(esg_tensor x, int64_t axis, const esg_t_options_options* options);",
    # no required tensor input: the builder comes first
    "esg_tensor esg_t_generator(esg_builder* builder, esg_i64_list shape, esg_t_generator_pattern pattern, "
    "double start, const char* name, esg_f64_list coeffs, const esg_t_generator_options* options);",
    # a variadic input is a pointer and a count
    "esg_tensor esg_t_variadic(const esg_tensor* xs, size_t xs_count, const esg_t_variadic_options* options);",
    "esg_tensor esg_t_body(const esg_tensor* init, size_t init_count, esg_subgraph cond, esg_subgraph body, "
    "const esg_t_body_options* options);",
])
def test_c_function_declarations(rendered, decl):
    assert f"ESG_API {decl}\n" in rendered["include/esgraph/c/ops.h"]


def test_python_stub_makes_options_keyword_only_in_struct_order(rendered):
    stub = rendered["python/esgraph/ops.pyi"]
    sig = re.search(r"^def t_options\((.*)\) -> Tensor:$", stub, re.M).group(1)
    names = re.findall(r"(?:^|, )(\*|\w+)(?=: |, |$)", sig)
    assert names == ["x", "axis", "*"] + T_OPTIONS_FIELDS
    assert "def t_split(x: TensorLike, sizes: Sequence[int]) -> List[Tensor]:" in stub
    assert "def t_pair(x: TensorLike) -> List[Tensor]:" in stub


def test_every_file_starts_with_the_banner_naming_its_template(rendered):
    assert sorted(rendered) == sorted(OUTPUTS)
    for e in emitters.EMITTERS:
        first = rendered[e.output].splitlines()[0]
        assert f"with templates/{e.template}." in first, e.output
        assert "Generated by esgraph_codegen from the YAML in op_defs/" in first, e.output
        assert "Do not edit" in first, e.output


def test_render_only_selected_emitters(fixture_opset):
    files = render.render_all(fixture_opset, "op_defs", only=["docs/ops.md"])
    assert list(files) == ["docs/ops.md"]


def test_example_calls_pass_every_positional_argument(fixture_opset, split_args):
    """Each generated example call gives the C++ wrapper all its positional parameters plus the
    options, so the examples test compiles."""
    for op in fixture_opset.ops:
        for ex in op.examples:
            args = split_args(emitters.example_args(op, ex))
            assert len(args) == len(emitters.cpp_params(op)) + 1, (op.name, args)
            assert args[-1].startswith(f"esg::{naming.cpp_options(op)}()"), (op.name, args)


def test_write_changed_writes_only_changed_files(rendered, tmp_path):
    first = render.write_changed(rendered, tmp_path)
    assert first == sorted(rendered)
    for rel, content in rendered.items():
        assert (tmp_path / rel).read_text(encoding="utf-8") == content
    assert render.write_changed(rendered, tmp_path) == []

    stamp = tmp_path / "docs/ops.md"
    os.utime(stamp, ns=(1, 1))
    edited = dict(rendered, **{"src/ops_c.cpp": rendered["src/ops_c.cpp"] + "// changed\n"})
    assert render.write_changed(edited, tmp_path) == ["src/ops_c.cpp"]
    assert stamp.stat().st_mtime_ns == 1, "an unchanged file was rewritten"
    assert not list(tmp_path.rglob("*.tmp"))
