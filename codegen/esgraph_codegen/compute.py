"""The scalar expression language of elementwise ops (`compute:` in the YAML).

Expressions are parsed with Python's own parser and then held to a small grammar, so the same
text can later be lowered to C++ tile kernels and to Ascend C without ambiguity.
"""
from __future__ import annotations

import ast
import re
from typing import List, NamedTuple, Sequence

FUNCTIONS = {
    "abs": 1, "exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "sin": 1, "cos": 1, "tan": 1, "tanh": 1,
    "asin": 1, "acos": 1, "atan": 1, "sinh": 1, "cosh": 1, "asinh": 1, "acosh": 1, "atanh": 1,
    "erf": 1, "sigmoid": 1, "floor": 1, "ceil": 1, "round": 1, "sign": 1, "cast": 1, "f32": 1,
    "min": 2, "max": 2, "pow": 2, "shift_left": 2, "shift_right": 2, "select": 3,
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
_REFERENCE_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul"}
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
            if domain == "reference":  # integers wrap around there (scalar_math.hpp)
                return f"e_{_REFERENCE_BINOPS[type(n.op)]}({emit(n.left)}, {emit(n.right)})"
            return f"({emit(n.left)} {_CPP_BINOPS[type(n.op)]} {emit(n.right)})"
        if isinstance(n, ast.UnaryOp):
            if isinstance(n.op, ast.USub):
                return f"e_neg({emit(n.operand)})" if domain == "reference" else f"(-{emit(n.operand)})"
            return f"(!{emit(n.operand)})"
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
                 "erf": "Erf", "sin": "Sin", "cos": "Cos", "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan",
                 "sinh": "Sinh", "cosh": "Cosh", "asinh": "Asinh", "acosh": "Acosh", "floor": "Floor", "ceil": "Ceil",
                 "round": "Round", "sign": "Sign"}
# Functions Ascend C has no instruction for, lowered as their definition over `x`.
_ASCENDC_EXPANDED = {"sigmoid": "1 / (1 + exp(-x))"}
# Not lowered, and why (CANN's documentation of the instruction).
_ASCENDC_REFUSED = {"atanh": "Ascend C's Atanh is documented as invalid for |x| < 0.001",
                    "shift_left": "a shift of unsigned integers; the generated kernels compute over f32 tiles",
                    "shift_right": "a shift of unsigned integers; the generated kernels compute over f32 tiles"}
_ASCENDC_BINARY = {ast.Add: "Add", ast.Sub: "Sub", ast.Mult: "Mul", ast.Div: "Div"}
# Ascend C's higher-level math: source and destination must not overlap, and it takes a
# temporary buffer in the Unified Buffer ($s: kernel_source.cpp sizes it by CANN's rules). Round is half to even, as the
# CPU's; Sign gives 0 for NaN, as the CPU's.
ASCENDC_MATH = {"Tanh", "Erf", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Floor", "Ceil",
                "Round", "Sign", "Power"}


# Instructions with a scalar operand, and its position: Ascend C takes it as the tiles' own
# element type (`const T&`), so the scalar math, done in float, is cast once to the kernel's T.
# (Select's operand 3 is a scalar in its tensor-scalar mode only.)
_SCALAR_OPERAND = {"Adds": 2, "Muls": 2, "Maxs": 2, "Mins": 2, "Duplicate": 1, "CompareScalar": 2, "Select": 3}

# Comparisons of tiles give bit masks ($m<k>: one bit per element, uint8_t): Compare's modes,
# and the mode of the same comparison with its operands swapped.
_CMP_MODE = {ast.Lt: "LT", ast.LtE: "LE", ast.Gt: "GT", ast.GtE: "GE", ast.Eq: "EQ", ast.NotEq: "NE"}
_SWAPPED = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "EQ": "EQ", "NE": "NE"}


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
    if not re.fullmatch(r"\$[ity]\d*", args[k]):
        args[k] = f"static_cast<T>({args[k]})"
    return f"{name}({', '.join(args)});"


class Lowering(NamedTuple):
    statements: List[str]
    temps: int  # tiles of T: $t0 …
    masks: int  # bit masks: $m0 … (their uint16_t views: $w0 …)


class NotLowerable(ValueError):
    """An expression outside what the Ascend C lowering covers (the op runs unfused there)."""


def to_ascendc(expr: str, inputs, attrs) -> Lowering:
    """`expr` as Ascend C statements, or raises NotLowerable.

    Statements name tiles by placeholder: `$y` the result, `$i<k>` input k, `$t<k>` temporary k
    (all LocalTensor<T> of `$n` elements); `$p<k>` is attribute k's value, a float literal
    substituted when a kernel is generated (attributes are constants of the graph).

    A comparison of tiles is a bit mask `$m<k>` (LocalTensor<uint8_t>; `$w<k>` is the same
    bits as uint16_t, which the bitwise instructions take). The mask instructions run over `$N`
    elements, `$n` rounded up to a whole 256 bytes of T (their granule; tiles are sized so), and
    the bitwise ones over `$N / 16` words. A mask becomes a value of 0 or 1 where arithmetic or
    the result needs one, as the CPU's bools are."""
    inputs, attrs = list(inputs), list(attrs)
    code: List[str] = []
    temps = [0]
    masks = [0]

    def mask() -> str:
        # A mask is written once and read by its parent: none is shared, so none is reused.
        masks[0] += 1
        return f"$m{masks[0] - 1}"

    def as_mask(kind: str, v: str) -> str:
        if kind == "m":
            return v
        if kind == "s":  # a condition known per kernel: its tile of 0 or 1, then the mask
            t = tile()
            code.append(f"Duplicate({t}, ({v} ? 1.0f : 0.0f), $N);")
            kind, v = "t", t
        m = mask()
        code.append(f"CompareScalar({m}, {v}, 0.0f, CMPMODE::NE, $N);")
        return m

    def as_tile(kind: str, v: str) -> str:
        if kind != "m":
            return v
        one, out = tile(), tile()
        code.extend([f"Duplicate({one}, 1.0f, $N);", f"Select({out}, {v}, {one}, 0.0f, SELMODE::VSEL_TENSOR_SCALAR_MODE, $N);"])
        return out

    def bits(m: str) -> str:
        return "$w" + m[2:]

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
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            kind, v = emit(n.operand)
            if kind == "s":
                return scalar(f"(!({v}))")
            if kind == "t":  # not x: x == 0
                m = mask()
                code.append(f"CompareScalar({m}, {v}, 0.0f, CMPMODE::EQ, $N);")
                return ("m", m)
            m = mask()
            code.append(f"Not({bits(m)}, {bits(v)}, $N / 16);")
            return ("m", m)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            kind, v = tile_of(emit(n.operand))
            if kind == "s":
                return scalar(f"(-({v}))")
            out = tile(v)
            code.append(f"Muls({out}, {v}, -1.0f, $n);")
            return ("t", out)
        if isinstance(n, ast.BinOp) and type(n.op) in _ASCENDC_BINARY:
            (lk, lv), (rk, rv) = tile_of(emit(n.left)), tile_of(emit(n.right))
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
            (lk, lv), (rk, rv) = (tile_of(emit(a)) for a in n.args)
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
        if isinstance(n, ast.Call) and n.func.id in ("cast", "f32"):
            # The value itself: the kernel converts each result to its member's dtype
            # (kernel_source.cpp), as the CPU stores each result in its dtype; the tiles are f32
            # already, so f32() rounds nothing.
            return emit(n.args[0])
        if isinstance(n, ast.Call) and n.func.id in _ASCENDC_EXPANDED:
            argument = n.args[0]

            class Substitute(ast.NodeTransformer):
                def visit_Name(self, name):
                    return argument if name.id == "x" else name  # not the functions called

            return emit(Substitute().visit(parse(_ASCENDC_EXPANDED[n.func.id])))
        if isinstance(n, ast.Call) and n.func.id in _ASCENDC_REFUSED:
            raise NotLowerable(f"`{ast.unparse(n)}`: {_ASCENDC_REFUSED[n.func.id]}")
        if isinstance(n, ast.Call) and n.func.id == "pow":
            (bk, bv), (ek, ev) = (tile_of(emit(a)) for a in n.args)
            if bk == "s" and ek == "s":
                raise NotLowerable(f"`{ast.unparse(n)}` of scalars")
            base = bv if bk == "t" else f"static_cast<T>({bv})"
            exponent = ev if ek == "t" else f"static_cast<T>({ev})"
            out = tile()  # never over a source
            code.append(f"Power({out}, {base}, {exponent}, $s, $n);")
            return ("t", out)
        if isinstance(n, ast.Call) and n.func.id in ASCENDC_UNARY:
            kind, v = tile_of(emit(n.args[0]))
            if kind == "s":
                raise NotLowerable(f"`{ast.unparse(n)}` of a scalar")
            name = ASCENDC_UNARY[n.func.id]
            out = tile() if name in ASCENDC_MATH else tile(v)
            code.append(f"{name}({out}, {v}, $s, $n);" if name in ASCENDC_MATH else f"{name}({out}, {v}, $n);")
            return ("t", out)
        if isinstance(n, ast.Compare):
            if len(n.ops) != 1:
                raise NotLowerable(f"`{ast.unparse(n)}`: chained comparisons")
            (lk, lv), (rk, rv) = tile_of(emit(n.left)), tile_of(emit(n.comparators[0]))
            if lk == "s" and rk == "s":
                return scalar(f"({lv} {_CPP_CMPOPS[type(n.ops[0])]} {rv})")
            mode, m = _CMP_MODE[type(n.ops[0])], mask()
            if lk == "t" and rk == "t":
                code.append(f"Compare({m}, {lv}, {rv}, CMPMODE::{mode}, $N);")
            elif lk == "t":
                code.append(f"CompareScalar({m}, {lv}, {rv}, CMPMODE::{mode}, $N);")
            else:
                code.append(f"CompareScalar({m}, {rv}, {lv}, CMPMODE::{_SWAPPED[mode]}, $N);")
            return ("m", m)
        if isinstance(n, ast.BoolOp):
            parts = [emit(v) for v in n.values]
            if all(k == "s" for k, _ in parts):
                return scalar("(" + (" && " if isinstance(n.op, ast.And) else " || ").join(v for _, v in parts) + ")")
            ms = [as_mask(k, v) for k, v in parts]
            name = "And" if isinstance(n.op, ast.And) else "Or"
            out = ms[0]
            for other in ms[1:]:
                m = mask()
                code.append(f"{name}({bits(m)}, {bits(out)}, {bits(other)}, $N / 16);")
                out = m
            return ("m", out)
        if isinstance(n, ast.Call) and n.func.id == "select":
            kind, cond = emit(n.args[0])
            if kind != "s":
                m = as_mask(kind, cond)
                (ak, av), (bk, bv) = (tile_of(emit(a)) for a in n.args[1:])
                if ak == "s":  # Select takes its scalar second: the first one as a tile
                    t = tile()
                    code.append(f"Duplicate({t}, {av}, $N);")
                    ak, av = "t", t
                out = tile()
                mode = "TENSOR_TENSOR" if bk == "t" else "TENSOR_SCALAR"
                code.append(f"Select({out}, {m}, {av}, {bv}, SELMODE::VSEL_{mode}_MODE, $N);")
                return ("t", out)
            out = tile()
            for i, branch in enumerate(n.args[1:]):
                code.append(f"if ({cond}) {{" if i == 0 else "} else {")
                bk, bv = tile_of(emit(branch))
                code.append(f"Adds({out}, {bv}, 0.0f, $n);" if bk == "t" else f"Duplicate({out}, {bv}, $n);")
            code.append("}")
            return ("t", out)
        raise NotLowerable(f"`{ast.unparse(n)}` has no Ascend C lowering yet")

    def tile_of(value):
        kind, v = value
        return ("t", as_tile(kind, v)) if kind == "m" else value

    kind, value = tile_of(emit(parse(expr)))
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
    return Lowering(code, len(used), masks[0])
