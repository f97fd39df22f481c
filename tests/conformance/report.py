"""Runs the whole ONNX node suite and prints (or writes, with --write) docs/conformance.md:
the pass rate per op and overall, and the reason for every case that does not pass. Run with
the newest onnx release (`make conformance-latest`, its own environment in build/onnx-latest),
it writes docs/conformance-latest.md.

    PYTHONPATH=build/default/python .venv/bin/python tests/conformance/report.py [--write]
"""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_node_suite as suite  # noqa: E402

import onnx  # noqa: E402

import esgraph  # noqa: E402
import esgraph.onnx  # noqa: E402,F401

# The onnx the project's environment runs with (Debian's); another one's suite is "latest".
PROJECT_ONNX = "1.12.0"

# What esgraph deliberately does not cover, and why; everything else is in scope.
OUT_OF_SCOPE = {
    "training": ["Gradient"],
    "random": ["Bernoulli", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
               "Multinomial"],
    "strings": ["StringNormalizer", "RegexFullMatch", "StringConcat", "StringSplit"],
}
SCOPE_OF = {op: why for why, op_list in OUT_OF_SCOPE.items() for op in op_list}
# Cases of in-scope ops that exercise what is out of scope: training modes, string tensors
# (by case name; an `_expanded` case goes with its twin).
OUT_OF_SCOPE_CASES = {
    "training": ["test_training_dropout", "test_training_dropout_default", "test_training_dropout_default_mask",
                 "test_training_dropout_mask"],
    "strings": ["test_cast_FLOAT_to_STRING", "test_cast_STRING_to_FLOAT", "test_castlike_FLOAT_to_STRING",
                "test_castlike_STRING_to_FLOAT"],
}


# Cases whose expected outputs follow a rule esgraph deliberately does not: the test fails if
# such a case starts to pass (the entry is then stale).
_BF16_ROUNDING = ("esgraph rounds f32 to bf16 to nearest even (as PyTorch, CANN and ONNX from 1.14 do); "
                  "ONNX 1.12's expected values truncate")
KNOWN_DEVIATIONS = {name: _BF16_ROUNDING for name in (
    "test_cast_FLOAT_to_BFLOAT16", "test_castlike_FLOAT_to_BFLOAT16", "test_castlike_FLOAT_to_BFLOAT16_expanded")}
KNOWN_DEVIATIONS["test_adam_multiple"] = (
    "the node leaves epsilon at the schema's default, 1e-6, which esgraph uses; ONNX 1.12's expected values were "
    "computed with the 1e-2 the case's generator defines but never sets on the node")


def model_scope(case):
    """Why a model case is out of scope (one of its ops is), or None."""
    return next((SCOPE_OF[n.op_type] for n in case.model.graph.node if n.op_type in SCOPE_OF), None)


def scope_of(case, op):
    """Why a case is out of scope, or None."""
    if op in SCOPE_OF:
        return SCOPE_OF[op]
    for why, names in OUT_OF_SCOPE_CASES.items():
        if case.replace("_expanded", "") in names:
            return why
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write docs/conformance.md (conformance-latest.md with another onnx)")
    parser.add_argument("-k", default="", help="only cases whose name contains this")
    args = parser.parse_args()
    cases = suite.collect()
    op_of = suite.ops_of(cases)
    results = [suite.run_case(c, op_of[c.name], esgraph) for c in cases if args.k in c.name]
    models = [(c, suite.run_case(c, "model", esgraph)) for c in suite.collect_models() if args.k in c.name]
    text = render(results) + render_models(models)
    print(text)
    if args.write:
        page = "conformance.md" if onnx.__version__ == PROJECT_ONNX else "conformance-latest.md"
        path = os.path.join(os.path.dirname(__file__), "..", "..", "docs", page)
        with open(path, "w") as f:
            f.write(text)
    in_scope = [r for r in results if not scope_of(r.case, r.op)]
    passed = sum(r.status == suite.PASS for r in in_scope)
    print(f"conformance: {passed} of {len(in_scope)} in-scope cases pass "
          f"({len(results) - len(in_scope)} out of scope)")


def render(results):
    by_op = collections.defaultdict(list)
    for r in results:
        by_op[r.op].append(r)
    in_scope = collections.defaultdict(list)
    for r in results:
        if not scope_of(r.case, r.op):
            in_scope[r.op].append(r)
    full = sorted(op for op, rs in in_scope.items() if all(r.status == suite.PASS for r in rs))
    cases = [r for rs in in_scope.values() for r in rs]
    passed = sum(r.status == suite.PASS for r in cases)
    every = sum(all(r.status == suite.PASS for r in rs) for rs in by_op.values())
    latest = onnx.__version__ != PROJECT_ONNX
    source = (f"onnx {onnx.__version__} from PyPI, opsets up to {onnx.defs.onnx_opset_version()}, in an environment of its own"
              if latest else f"Debian's python3-onnx {onnx.__version__}, opsets up to {onnx.defs.onnx_opset_version()}")
    lines = [
        f"# ONNX conformance{f': the node suite of onnx {onnx.__version__}' if latest else ''}",
        "",
        f"ONNX's backend node test cases (generated by `onnx.backend.test.case.node` from {source})",
        "run through `esgraph.onnx.load` → `esgraph.compile` → CPU run, compared with",
        "the suite's expected outputs at its own tolerances. Regenerate this page with",
        f"`make conformance{'-latest' if latest else ''}`.",
        "",
        "No input is frozen: where a case passes a shape operand (Reshape's shape, Slice's starts,",
        "TopK's k, ...) as a graph input, `esgraph.onnx.load` gives a `ValueDependentGraph`, which",
        "reads the operand's value at each run and compiles the graph for it, as ONNX Runtime reads",
        "such values on the host. Ops whose output sizes the data decides (NonZero, Unique,",
        "NonMaxSuppression, Compress with a computed condition) cut the compiled model into stages",
        "that run one after another, those ops on the host between them (docs/architecture.md).",
        "",
        f"**{passed} of {len(cases)} in-scope cases pass ({100 * passed / max(len(cases), 1):.1f}%);"
        f" {len(full)} of {len(in_scope)} in-scope op types pass every case.** Counting every op type and every case,",
        f"out of scope or not: {every} of {len(by_op)} op types pass every case.",
        "",
        "| op | cases | pass | status |",
        "|---|---:|---:|---|",
    ]
    for op in sorted(in_scope):
        rs = in_scope[op]
        ok = sum(r.status == suite.PASS for r in rs)
        kinds = collections.Counter(r.status for r in rs if r.status != suite.PASS)
        status = "all pass" if ok == len(rs) else ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        waited = sum(bool(r.shape_inputs) for r in rs if r.status == suite.PASS)
        if waited:
            status += f" ({waited} with shape operands read at run time)"
        lines.append(f"| {op} | {len(rs)} | {ok} | {status} |")
    lines += ["", "## Out of scope", ""]
    for why, ops in OUT_OF_SCOPE.items():
        present = sorted(op for op in ops if op in by_op)
        if present:
            lines.append(f"- {why}: {', '.join(present)}")
    for why, prefixes in OUT_OF_SCOPE_CASES.items():
        names = sorted(r.case for r in results if r.op not in SCOPE_OF and scope_of(r.case, r.op) == why)
        if names:
            lines.append(f"- {why}, cases of other ops: {', '.join(f'`{n}`' for n in names)}")
    lines += ["", "## Known deviations", ""]
    failing = {r.case for r in cases if r.status != suite.PASS}
    lines += [f"- `{name}`: {why}" for name, why in KNOWN_DEVIATIONS.items() if name in failing]
    lines += ["", "## Cases that do not pass", ""]
    for r in sorted((r for r in cases if r.status != suite.PASS), key=lambda r: (r.op, r.case)):
        lines.append(f"- `{r.case}` ({r.status}): {r.reason}")
    return "\n".join(lines) + "\n"


def render_models(models):
    """The model cases' section: each case's status, and the count of those in scope."""
    in_scope = [(c, r) for c, r in models if not model_scope(c)]
    passed = sum(r.status == suite.PASS for _, r in in_scope)
    lines = ["", "## Model cases", "",
             "ONNX's model test cases that come with their model (`onnx.backend.test.case.model`, kind \"simple\"; the",
             "\"real\" ones are downloads), run the same way.", "",
             f"**{passed} of {len(in_scope)} in-scope model cases pass ({passed} of {len(models)} in all).**", "",
             "| case | ops | status |", "|---|---|---|"]
    for case, r in models:
        ops = ", ".join(dict.fromkeys(n.op_type for n in case.model.graph.node))
        why = model_scope(case)
        status = f"out of scope ({why})" if why else "pass" if r.status == suite.PASS else f"{r.status}: {r.reason}"
        lines.append(f"| `{case.name}` | {ops} | {status} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
