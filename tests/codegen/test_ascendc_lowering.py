"""The Ascend C lowering of compute expressions (compute.to_ascendc): its statement forms, what it
refuses, and — for every op of op_defs/ it lowers — that the statements, executed by a small
interpreter of the vector instructions over numpy arrays, give what the expression gives in numpy.
That catches a tile written over while still needed, a wrong operand order or a dropped sign."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from esgraph_codegen import compute, loader

REPO = Path(__file__).resolve().parents[2]
OP_DEFS, RULES_FILE = REPO / "op_defs", REPO / "compiler_core/ir/infer_rules.def"


def lower(expr, inputs=("x",), attrs=()):
    return compute.to_ascendc(expr, list(inputs), list(attrs))


def test_forms():
    assert lower("a + b", ("a", "b")) == (["Add($y, $i0, $i1, $n);"], 0, 0)
    # A chain writes over its own result: no temporary tile.
    assert lower("x / (1 + exp(-x))") == (["Muls($y, $i0, static_cast<T>(-1.0f), $n);", "Exp($y, $y, $n);",
                                          "Adds($y, $y, static_cast<T>(1.0f), $n);", "Div($y, $i0, $y, $n);"], 0, 0)
    # Functions without an instruction lower as their definition, over any argument.
    assert lower("sigmoid(x)") == lower("1 / (1 + exp(-x))")
    assert lower("sigmoid(2 * a + b)", ("a", "b")) == lower("1 / (1 + exp(-(2 * a + b)))", ("a", "b"))
    # Scalars fold into the instructions; attributes are placeholders.
    # Scalar operands are cast to the tiles' type T (float or half), as Ascend C takes them.
    assert lower("alpha * x + beta", attrs=("alpha", "beta")) == (["Muls($y, $i0, static_cast<T>($p0), $n);",
                                                                  "Adds($y, $y, static_cast<T>($p1), $n);"], 0, 0)
    assert lower("2 - x")[0] == ["Muls($y, $i0, static_cast<T>(-1.0f), $n);", "Adds($y, $y, static_cast<T>(2.0f), $n);"]
    assert lower("1 / x")[0] == ["Reciprocal($y, $i0, $n);"]
    assert lower("x")[0] == ["Adds($y, $i0, static_cast<T>(0.0f), $n);"]
    assert lower("(a + b) * (a - b)", ("a", "b")) == (["Add($y, $i0, $i1, $n);", "Sub($t0, $i0, $i1, $n);", "Mul($y, $y, $t0, $n);"], 1, 0)
    # The higher-level math never writes over its source.
    assert lower("tanh(exp(x))")[0] == ["Exp($t0, $i0, $n);", "Tanh($y, $t0, $s, $n);"]
    assert lower("max(x, -alpha)", attrs=("alpha",))[0] == ["Maxs($y, $i0, static_cast<T>((-($p0))), $n);"]
    assert lower("x + max(alpha, 2)", attrs=("alpha",))[0] == [
        "Adds($y, $i0, static_cast<T>((($p0) > (2.0f) ? ($p0) : (2.0f))), $n);"]
    statements = lower("select(k == 0, x, -x)", attrs=("k",)).statements
    assert statements[0] == "if (($p0 == 0.0f)) {" and "} else {" in statements and statements[-1] == "}"
    # Comparisons of tiles are bit masks; select by one picks per element; the mask instructions
    # run over $N (whole 256-byte repeats) and never write over their sources.
    assert lower("select(x >= 0, x, alpha * x)", attrs=("alpha",)) == ([
        "CompareScalar($m0, $i0, static_cast<T>(0.0f), CMPMODE::GE, $N);", "Muls($t0, $i0, static_cast<T>($p0), $n);",
        "Select($y, $m0, $i0, $t0, SELMODE::VSEL_TENSOR_TENSOR_MODE, $N);"], 1, 1)
    # A comparison's own result is 0 or 1, as the CPU's bools; the scalar on the left swaps the mode.
    assert lower("2 < x").statements == ["CompareScalar($m0, $i0, static_cast<T>(2.0f), CMPMODE::GT, $N);",
                                         "Duplicate($t0, static_cast<T>(1.0f), $N);",
                                         "Select($y, $m0, $t0, static_cast<T>(0.0f), SELMODE::VSEL_TENSOR_SCALAR_MODE, $N);"]
    # and/or/not of masks are bitwise over their 16-bit words.
    assert "Or($w2, $w0, $w1, $N / 16);" in lower("a > 0 or b > 0", ("a", "b")).statements
    assert "Not($w1, $w0, $N / 16);" in lower("not (a > b)", ("a", "b")).statements


@pytest.mark.parametrize("expr, why", [
    ("a < x < b", "chained comparisons"), ("atanh(x)", "invalid for |x| < 0.001"), ("lgamma(x)", "no Ascend C lowering"),
    ("exp(2)", "of a scalar"), ("pow(2, 3)", "of scalars"),
])
def test_refusals(expr, why):
    with pytest.raises(compute.NotLowerable, match=re.escape(why)):
        lower(expr)


# ---- executing the statements ------------------------------------------------------------------
UNARY = {"Exp": np.exp, "Ln": np.log, "Abs": np.abs, "Sqrt": np.sqrt, "Rsqrt": lambda v: 1 / np.sqrt(v),
         "Reciprocal": lambda v: 1 / v, "Relu": lambda v: np.maximum(v, 0), "Tanh": np.tanh,
         "Erf": np.vectorize(math.erf), "Sin": np.sin, "Cos": np.cos, "Tan": np.tan, "Asin": np.arcsin, "Acos": np.arccos,
         "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh, "Asinh": np.arcsinh, "Acosh": np.arccosh, "Floor": np.floor,
         "Ceil": np.ceil, "Round": np.round, "Sign": lambda v: np.nan_to_num(np.sign(v))}
BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Max": np.maximum, "Min": np.minimum}
SCALAR = {"Adds": np.add, "Muls": np.multiply, "Maxs": np.maximum, "Mins": np.minimum}


def scalar_value(text, attrs):
    text = re.sub(r"^static_cast<T>\((.*)\)$", r"\1", text)  # the cast to the tiles' type
    py = re.sub(r"\$p(\d+)", lambda m: repr(float(attrs[int(m.group(1))])), text)
    py = re.sub(r"(\d)f\b", r"\1", py).replace("std::max", "max").replace("std::min", "min")
    py = py.replace("&&", " and ").replace("||", " or ").replace("__builtin_inff()", "float('inf')")
    py = re.sub(r"\(([^()?]*) \? ([^():]*) : ([^()]*)\)", r"(\2 if \1 else \3)", py)  # the lowering's ?: of scalars
    return eval(py, {"inf": math.inf})  # noqa: S307 - the lowering's own scalar expressions


COMPARE = {"LT": np.less, "GT": np.greater, "EQ": np.equal, "LE": np.less_equal, "GE": np.greater_equal, "NE": np.not_equal}
BITWISE = {"And": np.logical_and, "Or": np.logical_or}


def execute(statements, inputs, attrs, n):
    """The statements' result ($y), with every tile a separate array (as in the Unified Buffer);
    a mask is an array of bools, under $m<k> and its 16-bit view $w<k> alike."""
    tiles = {f"$i{k}": v.copy() for k, v in enumerate(inputs)}
    tiles["$y"] = np.full(n, np.nan)
    masks = {}
    mask = lambda a: masks[a[2:]]  # noqa: E731 - $m3 and $w3 are one mask
    skipping = []  # per open `if`: whether its current branch is skipped
    for s in statements:
        if s.startswith("if ("):
            skipping.append(not scalar_value(s[3:-2], attrs))
            continue
        if s == "} else {":
            skipping[-1] = not skipping[-1]
            continue
        if s == "}":
            skipping.pop()
            continue
        if any(skipping):
            continue
        name, body = re.fullmatch(r"(\w+)\((.*)\);", s).groups()
        args = compute.split_top_level(body)
        # Mask instructions work in whole repeats ($N), bitwise ones in 16-bit words; the rest in $n.
        count = {"Compare": "$N", "CompareScalar": "$N", "Select": "$N", "And": "$N / 16", "Or": "$N / 16", "Not": "$N / 16"}
        assert args[-1] == count.get(name, "$N" if name == "Duplicate" and args[-1] == "$N" else "$n"), s
        # The higher-level math takes its temporary buffer before the count.
        assert (args[-2] == "$s") == (name in compute.ASCENDC_MATH), s
        dst = args[0]
        tile = lambda a: tiles[a] if a.startswith("$") and not a.startswith("$p") else None  # noqa: E731
        if name in ("Compare", "CompareScalar"):
            b = tile(args[2]) if name == "Compare" else scalar_value(args[2], attrs)
            masks[dst[2:]] = COMPARE[args[3].split("::")[1]](tile(args[1]), b)
            continue
        if name in BITWISE:
            masks[dst[2:]] = BITWISE[name](mask(args[1]), mask(args[2]))
            continue
        if name == "Not":
            masks[dst[2:]] = np.logical_not(mask(args[1]))
            continue
        if name == "Select":
            assert dst not in args[2:4], s  # never over a source
            b = tile(args[3]) if args[4].endswith("TENSOR_TENSOR_MODE") else scalar_value(args[3], attrs)
            tiles[dst] = np.where(mask(args[1]), tile(args[2]), b).astype(np.float64)
            continue
        if name == "Power":  # base and exponent, either a scalar
            operand = lambda a: tile(a) if tile(a) is not None else scalar_value(a, attrs)  # noqa: E731
            result = np.power(operand(args[1]), operand(args[2]))
        elif name in BINARY:
            result = BINARY[name](tile(args[1]), tile(args[2]))
        elif name in SCALAR:
            result = SCALAR[name](tile(args[1]), scalar_value(args[2], attrs))
        elif name in UNARY:
            result = UNARY[name](tile(args[1]))
        elif name == "Duplicate":
            result = np.full(n, scalar_value(args[1], attrs))
        else:
            raise AssertionError(f"unknown instruction {name}")
        tiles[dst] = np.asarray(result, dtype=np.float64)
    return tiles["$y"]


NUMPY = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v), "abs": np.abs, "tanh": np.tanh,
         "erf": np.vectorize(math.erf), "sin": np.sin, "cos": np.cos, "max": np.maximum, "min": np.minimum,
         "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
         "asinh": np.arcsinh, "acosh": np.arccosh, "floor": np.floor, "ceil": np.ceil, "round": np.round,
         "sign": lambda v: np.nan_to_num(np.sign(v)), "pow": np.power, "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
         "cast": lambda v: v,  # the value; the kernel converts it to the member's dtype
         "f32": lambda v: v,  # the tiles are f32: the value as it is
         "select": lambda c, a, b: a if c is True else b if c is False else np.where(np.not_equal(c, 0), a, b)}


def evaluate(node, scope):
    """The expression in numpy (functions and names apart: clip's attributes are `min` and `max`)."""
    import ast
    ev = lambda n: evaluate(n, scope)  # noqa: E731
    if isinstance(node, ast.Constant):
        return float(node.value)
    if isinstance(node, ast.Name):
        return scope[node.id]
    if isinstance(node, ast.Call):
        return NUMPY[node.func.id](*[ev(a) for a in node.args])
    if isinstance(node, ast.UnaryOp):
        v = ev(node.operand)
        if isinstance(node.op, ast.USub):
            return -v
        return not v if isinstance(v, bool) else np.logical_not(v)
    if isinstance(node, ast.BinOp):
        ops = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.divide}
        return ops[type(node.op)](ev(node.left), ev(node.right))
    if isinstance(node, ast.Compare):
        ops = {ast.Lt: np.less, ast.LtE: np.less_equal, ast.Gt: np.greater, ast.GtE: np.greater_equal,
               ast.Eq: np.equal, ast.NotEq: np.not_equal}
        r = ops[type(node.ops[0])](ev(node.left), ev(node.comparators[0]))
        return bool(r) if np.ndim(r) == 0 else r
    if isinstance(node, ast.BoolOp):
        values = [ev(v) for v in node.values]
        if all(isinstance(v, bool) for v in values):
            return all(values) if isinstance(node.op, ast.And) else any(values)
        combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
        out = np.not_equal(values[0], 0)
        for v in values[1:]:
            out = combine(out, np.not_equal(v, 0))
        return out
    raise AssertionError(ast.unparse(node))


def lowered_ops():
    opset = loader.load_dir(OP_DEFS, RULES_FILE)
    for op in opset.ops:
        if not op.compute:
            continue
        try:
            compute.to_ascendc(op.compute, [i.name for i in op.inputs], [a.name for a in op.attrs])
        except compute.NotLowerable:
            continue
        yield op


def attr_values(op):
    """Each attribute's default (enum: its index), and for enums every index."""
    values = []
    for a in op.attrs:
        if a.type == "enum":
            values.append(list(range(len(a.values))))
        else:
            values.append([float(a.default) if a.default is not None else 0.5])
    combos = [[]]
    for options in values:
        combos = [c + [v] for c in combos for v in options]
    return combos


@pytest.mark.parametrize("op", list(lowered_ops()), ids=lambda op: op.name)
def test_statements_compute_the_expression(op):
    rng = np.random.default_rng(0)
    n = 257
    positive = bool(re.search(r"log\(|sqrt\(|/", op.compute))
    inputs = []
    for _ in op.inputs:
        v = rng.uniform(0.2, 2.0, n)
        inputs.append(v if positive else v * rng.choice([-1.0, 1.0], n))
    for v in inputs[1:]:  # equal operands at every third element, for the comparisons
        v[::3] = inputs[0][::3]
    names = [i.name for i in op.inputs]
    for attrs in attr_values(op):
        statements = compute.to_ascendc(op.compute, names, [a.name for a in op.attrs]).statements
        for s in statements:
            if s.split("(")[0] in compute.ASCENDC_MATH:
                dst, src = compute.split_top_level(s[s.index("(") + 1:-2])[:2]
                assert dst != src, s
        scope = dict(zip(names, inputs), **{a.name: v for a, v in zip(op.attrs, attrs)})
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # outside asin's, acosh's, pow's domains: NaN
            got = execute(statements, inputs, attrs, n)
            want = np.broadcast_to(np.asarray(evaluate(compute.parse(op.compute), scope), dtype=np.float64), (n,))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f"{op.name} with attributes {attrs}")
