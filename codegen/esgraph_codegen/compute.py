"""The scalar expression language of elementwise ops (`compute:` in the YAML).

Expressions are parsed with Python's own parser and then held to a small grammar, so the same
text can later be lowered to C++ tile kernels and to Ascend C without ambiguity.
"""
from __future__ import annotations

import ast
from typing import List, Sequence

FUNCTIONS = {
    "abs": 1, "exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "sin": 1, "cos": 1, "tan": 1, "tanh": 1,
    "asin": 1, "acos": 1, "atan": 1, "sinh": 1, "cosh": 1, "asinh": 1, "acosh": 1, "atanh": 1,
    "erf": 1, "floor": 1, "ceil": 1, "round": 1, "sign": 1, "cast": 1,
    "min": 2, "max": 2, "pow": 2, "select": 3,
}
_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div)
_CMPOPS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)


def parse(expr: str) -> ast.expr:
    return ast.parse(expr.strip(), mode="eval").body


def check(expr: str, names: Sequence[str]) -> List[str]:
    """Problems with `expr` given the op's input and attribute names; empty when it is valid."""
    try:
        tree = parse(expr)
    except SyntaxError as e:
        return [f"cannot parse `{expr.strip()}`: {e.msg}"]
    problems: List[str] = []

    def visit(n: ast.AST) -> None:
        if isinstance(n, ast.Constant):
            if isinstance(n.value, bool) or not isinstance(n.value, (int, float)):
                problems.append(f"only numeric literals are allowed, not {n.value!r}")
        elif isinstance(n, ast.Name):
            if n.id not in names:
                problems.append(f"unknown name `{n.id}` (inputs and attributes: {', '.join(names)})")
        elif isinstance(n, ast.BinOp) and isinstance(n.op, _BINOPS):
            visit(n.left), visit(n.right)
        elif isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.Not)):
            visit(n.operand)
        elif isinstance(n, ast.BoolOp):
            for v in n.values:
                visit(v)
        elif isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], _CMPOPS):
            visit(n.left), visit(n.comparators[0])
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.keywords:
            arity = FUNCTIONS.get(n.func.id)
            if arity is None:
                problems.append(f"unknown function `{n.func.id}` (functions: {', '.join(sorted(FUNCTIONS))})")
            elif arity != len(n.args):
                problems.append(f"`{n.func.id}` takes {arity} argument(s), got {len(n.args)}")
            for a in n.args:
                visit(a)
        else:
            problems.append(f"`{ast.unparse(n)}` is not part of the expression language")

    visit(tree)
    return problems


# The helpers have the expression language's names with a prefix per compute domain: e_* are
# the evaluator's (compiler_core/eval/scalar_math.hpp, double or int64), f_* the CPU backend's
# f32 ones (compiler_core/cpu/vector_math.hpp).
DOMAINS = {"reference": "e_", "f32": "f_"}
_CPP_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}
_CPP_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


def to_cpp(expr: str, inputs, attrs, domain: str = "reference") -> str:
    """The expression as C++ over `in[i]` (the op's inputs, in order) and `attr[j]` (its
    attributes, in order), using the helpers of `domain` (see DOMAINS). In the reference domain
    integer literals stay int64 so integer math stays exact; in f32 every literal is a float."""
    inputs, attrs, prefix = list(inputs), list(attrs), DOMAINS[domain]

    def literal(value) -> str:
        if domain == "f32":
            return f"{float(value)!r}f"
        return repr(value) if isinstance(value, float) else f"int64_t{{{value}}}"

    def emit(n: ast.AST) -> str:
        if isinstance(n, ast.Constant):
            return literal(n.value)
        if isinstance(n, ast.Name):
            return f"in[{inputs.index(n.id)}]" if n.id in inputs else f"attr[{attrs.index(n.id)}]"
        if isinstance(n, ast.BinOp):
            if isinstance(n.op, ast.Div):
                return f"{prefix}div({emit(n.left)}, {emit(n.right)})"
            return f"({emit(n.left)} {_CPP_BINOPS[type(n.op)]} {emit(n.right)})"
        if isinstance(n, ast.UnaryOp):
            return f"(-{emit(n.operand)})" if isinstance(n.op, ast.USub) else f"(!{emit(n.operand)})"
        if isinstance(n, ast.BoolOp):
            if domain == "f32":  # both sides evaluated: no branch, so the loop vectorizes
                op = " & " if isinstance(n.op, ast.And) else " | "
                return "(" + op.join(f"({emit(v)} != 0.0f)" for v in n.values) + ")"
            op = " && " if isinstance(n.op, ast.And) else " || "
            return "(" + op.join(emit(v) for v in n.values) + ")"
        if isinstance(n, ast.Compare):
            return f"({emit(n.left)} {_CPP_CMPOPS[type(n.ops[0])]} {emit(n.comparators[0])})"
        if isinstance(n, ast.Call):
            return f"{prefix}{n.func.id}({', '.join(emit(a) for a in n.args)})"
        raise ValueError(f"cannot translate {ast.unparse(n)}")

    return emit(parse(expr))
