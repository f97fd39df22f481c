"""The scalar expression language of elementwise ops (`compute:` in the YAML).

Expressions are parsed with Python's own parser and then held to a small grammar, so the same
text can later be lowered to C++ tile kernels and to Ascend C without ambiguity.
"""
from __future__ import annotations

import ast
import re
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


# Ascend C: the vector instructions of kernel_operator.h over f32 tiles in the Unified Buffer.
# An expression becomes one instruction per tensor-valued node, each writing a temporary tile;
# scalar subexpressions (literals, attributes) fold into the instructions' scalar operands.
ASCENDC_UNARY = {"exp": "Exp", "log": "Ln", "sqrt": "Sqrt", "rsqrt": "Rsqrt", "abs": "Abs", "tanh": "Tanh",
                 "erf": "Erf", "sin": "Sin", "cos": "Cos"}
_ASCENDC_BINARY = {ast.Add: "Add", ast.Sub: "Sub", ast.Mult: "Mul", ast.Div: "Div"}
# Ascend C's higher-level math: source and destination must not overlap, and it takes temporary
# space in the Unified Buffer (kernel_source.cpp reserves it).
ASCENDC_NO_OVERLAP = {"Tanh", "Erf", "Sin", "Cos"}


# Instructions with a scalar operand, and its position: Ascend C takes it as the tiles' own
# element type (`const T&`), so the scalar math, done in float, is cast once to the kernel's T.
_SCALAR_OPERAND = {"Adds": 2, "Muls": 2, "Maxs": 2, "Mins": 2, "Duplicate": 1}


def split_top_level(text: str) -> List[str]:
    """`a, f(b, c), d` -> ["a", "f(b, c)", "d"]: the arguments of a statement."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        current += ch
    return parts + [current.strip()]


def _cast_scalar_operand(statement: str) -> str:
    name = statement.split("(", 1)[0]
    if name not in _SCALAR_OPERAND:
        return statement
    args = split_top_level(statement[len(name) + 1:-2])
    k = _SCALAR_OPERAND[name]
    args[k] = f"static_cast<T>({args[k]})"
    return f"{name}({', '.join(args)});"


class NotLowerable(ValueError):
    """An expression outside what the Ascend C lowering covers (the op runs unfused there)."""


def to_ascendc(expr: str, inputs, attrs):
    """(statements, temporaries) for `expr` as Ascend C, or raises NotLowerable.

    Statements name tiles by placeholder: `$y` the result, `$i<k>` input k, `$t<k>` temporary k
    (all LocalTensor<float> of `$n` elements); `$p<k>` is attribute k's value, a float literal
    substituted when a kernel is generated (attributes are constants of the graph)."""
    inputs, attrs = list(inputs), list(attrs)
    code: List[str] = []
    temps = [0]

    def tile(*operands) -> str:
        # A temporary is read once, by its parent: the parent writes over it (the vector
        # instructions allow a destination equal to a source), so a chain needs one tile.
        for v in operands:
            if v.startswith("$t"):
                return v
        temps[0] += 1
        return f"$t{temps[0] - 1}"

    def scalar(text: str):
        return ("s", text)

    def emit(n: ast.AST):
        if isinstance(n, ast.Constant):
            return scalar(f"{float(n.value)!r}f")
        if isinstance(n, ast.Name):
            if n.id in inputs:
                return ("t", f"$i{inputs.index(n.id)}")
            return scalar(f"$p{attrs.index(n.id)}")
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            kind, v = emit(n.operand)
            if kind == "s":
                return scalar(f"(-({v}))")
            out = tile(v)
            code.append(f"Muls({out}, {v}, -1.0f, $n);")
            return ("t", out)
        if isinstance(n, ast.BinOp) and type(n.op) in _ASCENDC_BINARY:
            (lk, lv), (rk, rv) = emit(n.left), emit(n.right)
            sym = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}[type(n.op)]
            if lk == "s" and rk == "s":
                return scalar(f"({lv} {sym} {rv})")
            out = tile(lv, rv)
            if lk == "t" and rk == "t":
                code.append(f"{_ASCENDC_BINARY[type(n.op)]}({out}, {lv}, {rv}, $n);")
            elif isinstance(n.op, ast.Add):
                t, s = (lv, rv) if lk == "t" else (rv, lv)
                code.append(f"Adds({out}, {t}, {s}, $n);")
            elif isinstance(n.op, ast.Mult):
                t, s = (lv, rv) if lk == "t" else (rv, lv)
                code.append(f"Muls({out}, {t}, {s}, $n);")
            elif isinstance(n.op, ast.Sub) and lk == "t":
                code.append(f"Adds({out}, {lv}, -({rv}), $n);")
            elif isinstance(n.op, ast.Sub):  # s - t
                code.extend([f"Muls({out}, {rv}, -1.0f, $n);", f"Adds({out}, {out}, {lv}, $n);"])
            elif lk == "t":  # t / s
                code.append(f"Muls({out}, {lv}, 1.0f / ({rv}), $n);")
            else:  # s / t
                code.append(f"Reciprocal({out}, {rv}, $n);")
                if lv != "1.0f":
                    code.append(f"Muls({out}, {out}, {lv}, $n);")
            return ("t", out)
        if isinstance(n, ast.Call) and n.func.id in ("max", "min"):
            (lk, lv), (rk, rv) = (emit(a) for a in n.args)
            name = "Max" if n.func.id == "max" else "Min"
            if lk == "s" and rk == "s":
                cmp = ">" if n.func.id == "max" else "<"  # no <algorithm> on the AI Core
                return scalar(f"(({lv}) {cmp} ({rv}) ? ({lv}) : ({rv}))")
            out = tile(lv, rv)
            if lk == "t" and rk == "t":
                code.append(f"{name}({out}, {lv}, {rv}, $n);")
            else:
                t, s = (lv, rv) if lk == "t" else (rv, lv)
                code.append(f"{name}s({out}, {t}, {s}, $n);")
            return ("t", out)
        if isinstance(n, ast.Call) and n.func.id in ASCENDC_UNARY:
            kind, v = emit(n.args[0])
            if kind == "s":
                raise NotLowerable(f"`{ast.unparse(n)}` of a scalar")
            name = ASCENDC_UNARY[n.func.id]
            out = tile() if name in ASCENDC_NO_OVERLAP else tile(v)
            code.append(f"{name}({out}, {v}, $n);")
            return ("t", out)
        if isinstance(n, ast.Compare) or isinstance(n, ast.BoolOp):
            # Only between scalars (attributes, literals): a condition known per kernel.
            parts = [emit(v) for v in ([n.left, n.comparators[0]] if isinstance(n, ast.Compare) else n.values)]
            if any(k != "s" for k, _ in parts):
                raise NotLowerable(f"`{ast.unparse(n)}` compares tensors (masks are not lowered yet)")
            if isinstance(n, ast.Compare):
                return scalar(f"({parts[0][1]} {_CPP_CMPOPS[type(n.ops[0])]} {parts[1][1]})")
            return scalar("(" + (" && " if isinstance(n.op, ast.And) else " || ").join(v for _, v in parts) + ")")
        if isinstance(n, ast.Call) and n.func.id == "select":
            kind, cond = emit(n.args[0])
            if kind != "s":
                raise NotLowerable(f"`{ast.unparse(n)}` selects by a tensor (masks are not lowered yet)")
            out = tile()
            for i, branch in enumerate(n.args[1:]):
                code.append(f"if ({cond}) {{" if i == 0 else "} else {")
                bk, bv = emit(branch)
                code.append(f"Adds({out}, {bv}, 0.0f, $n);" if bk == "t" else f"Duplicate({out}, {bv}, $n);")
            code.append("}")
            return ("t", out)
        raise NotLowerable(f"`{ast.unparse(n)}` has no Ascend C lowering yet")

    kind, value = emit(parse(expr))
    if kind == "s":
        code.append(f"Duplicate($y, {value}, $n);")
    elif value.startswith("$t"):  # the last tile is the result: write it in place
        code = [re.sub(re.escape(value) + r"\b", "$y", c) for c in code]
    else:
        code.append(f"Adds($y, {value}, 0.0f, $n);")  # the result is an input: a copy
    code = [_cast_scalar_operand(c) for c in code]
    used = sorted({int(m) for c in code for m in re.findall(r"\$t(\d+)", c)})
    renumber = {old: new for new, old in enumerate(used)}
    code = [re.sub(r"\$t(\d+)", lambda m: f"$t{renumber[int(m.group(1))]}", c) for c in code]
    return code, len(used)
