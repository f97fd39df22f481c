"""Loads op_defs/*.yaml into the frozen model, checking everything an emitter relies on.

Every problem is reported as `file:line: what is wrong`, all of them in one run, so that a user
who edits the YAML sees every mistake at once rather than one per build.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import yaml

from . import compute
from .model import (ATTR_TYPES, DTYPE_GROUPS, DTYPES, Attr, Example, ExampleTensor, Input,
                    Location, OnnxNode, OpDef, OpSet, Output, OutputCount, Subgraph, TypeVar)

OP_KEYS = {"name", "since", "status", "summary", "doc", "type_vars", "inputs", "outputs", "attrs",
           "subgraphs", "infer", "compute", "examples", "onnx", "aten", "sized_by_data", "communicates",
           "static_form"}
OP_REQUIRED = ("name", "since", "summary", "outputs", "infer")
INPUT_KEYS = {"name", "type", "doc", "optional", "variadic", "min", "since"}
OUTPUT_KEYS = {"name", "type", "doc", "count"}
ATTR_KEYS = {"name", "type", "doc", "default", "required", "range", "values", "since", "axis_of"}
SUBGRAPH_KEYS = {"name", "params", "doc"}
EXAMPLE_KEYS = {"inputs", "attrs", "outputs"}
TENSOR_KEYS = {"dtype", "value", "shape"}
ONNX_KEYS = {"op", "attrs"}
STATUSES = ("stable", "experimental", "deprecated")
NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
TYPE_VAR_RE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
ONNX_OP_RE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
# An ATen overload as torch.ops.aten names it: `name.overload` (`add.Tensor`, `relu.default`).
ATEN_OP_RE = re.compile(r"^[a-z_][a-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")


class LoadError(Exception):
    """All problems found in a load, one `file:line: message` per line."""

    def __init__(self, problems: Sequence[str]):
        super().__init__("\n".join(problems))
        self.problems = list(problems)


class _Problems:
    def __init__(self) -> None:
        self.items: List[str] = []

    def add(self, loc: Location, message: str) -> None:
        self.items.append(f"{loc}: {message}")


class _Node:
    """A YAML node with its location, and the plain Python value of scalars."""

    def __init__(self, node: yaml.Node, file: str, loader: yaml.SafeLoader):
        self.node, self.file, self._loader = node, file, loader
        self.loc = Location(file, node.start_mark.line + 1)

    @property
    def is_map(self) -> bool:
        return isinstance(self.node, yaml.MappingNode)

    @property
    def is_seq(self) -> bool:
        return isinstance(self.node, yaml.SequenceNode)

    @property
    def is_scalar(self) -> bool:
        return isinstance(self.node, yaml.ScalarNode)

    def items(self) -> List[Tuple["_Node", "_Node"]]:
        return [(self._wrap(k), self._wrap(v)) for k, v in self.node.value]

    def elements(self) -> List["_Node"]:
        return [self._wrap(v) for v in self.node.value]

    def plain(self):
        return self._loader.construct_object(self.node, deep=True)

    def _wrap(self, n: yaml.Node) -> "_Node":
        return _Node(n, self.file, self._loader)


def _parse_file(path: Path, display: str, problems: _Problems) -> Optional[_Node]:
    text = path.read_text(encoding="utf-8")
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        problems.add(Location(display, line), f"not valid YAML: {getattr(e, 'problem', e)}")
        return None
    finally:
        loader.dispose()
    if root is None:
        problems.add(Location(display, 1), "empty file; expected a mapping with `ops:`")
        return None
    return _Node(root, display, loader)


def _mapping(node: _Node, allowed: set, what: str, problems: _Problems) -> Optional[Dict[str, _Node]]:
    if not node.is_map:
        problems.add(node.loc, f"{what} must be a mapping")
        return None
    out: Dict[str, _Node] = {}
    for k, v in node.items():
        key = k.plain()
        if not isinstance(key, str) or key not in allowed:
            problems.add(k.loc, f"unknown key `{key}` in {what} (allowed: {', '.join(sorted(allowed))})")
        elif key in out:
            problems.add(k.loc, f"duplicate key `{key}` in {what}")
        else:
            out[key] = v
    return out


def _scalar(fields: Dict[str, _Node], key: str, kind, what: str, problems: _Problems, default=None):
    node = fields.get(key)
    if node is None:
        return default
    value = node.plain() if node.is_scalar else None
    ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value, ok = float(value), True
    if not ok:
        problems.add(node.loc, f"`{key}` of {what} must be {_kind_name(kind)}, got {_describe(node)}")
        return default
    return value


def _kind_name(kind) -> str:
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}[kind]


def _describe(node: _Node) -> str:
    if node.is_map:
        return "a mapping"
    if node.is_seq:
        return "a list"
    return repr(node.plain())


def _seq(fields: Dict[str, _Node], key: str, what: str, problems: _Problems) -> List[_Node]:
    node = fields.get(key)
    if node is None:
        return []
    if not node.is_seq:
        problems.add(node.loc, f"`{key}` of {what} must be a list")
        return []
    return node.elements()


def _dtype_list(node: _Node, what: str, problems: _Problems) -> Tuple[str, ...]:
    names = [node] if node.is_scalar else node.elements() if node.is_seq else []
    if not names:
        problems.add(node.loc, f"{what} must be a dtype, a dtype group or a list of them")
    out: List[str] = []
    for n in names:
        v = n.plain()
        if v in DTYPE_GROUPS:
            out.extend(DTYPE_GROUPS[v])
        elif v in DTYPES:
            out.append(v)
        else:
            problems.add(n.loc, f"unknown dtype `{v}` in {what} (dtypes: {', '.join(DTYPES)}; "
                                f"groups: {', '.join(DTYPE_GROUPS)})")
    return tuple(dict.fromkeys(out))


def _check_attr_value(attr_type: str, values: Tuple[str, ...], value, rng) -> Optional[str]:
    """None when `value` fits the attribute, else what is wrong with it."""
    def scalar_ok(t, v):
        if t == "int":
            return isinstance(v, int) and not isinstance(v, bool)
        if t == "float":
            return isinstance(v, (int, float)) and not isinstance(v, bool)
        if t == "bool":
            return isinstance(v, bool)
        if t == "string":
            return isinstance(v, str)
        if t == "dtype":
            return v in DTYPES
        if t == "enum":
            return v in values
        return False

    if attr_type.startswith("list<"):
        elem = attr_type[5:-1]
        if not isinstance(value, list) or not all(scalar_ok(elem, v) for v in value):
            return f"expected a list of {elem}, got {value!r}"
        items = value
    else:
        if not scalar_ok(attr_type, value):
            expected = f"one of {', '.join(values)}" if attr_type == "enum" else attr_type
            hint = ""
            if attr_type == "float" and isinstance(value, str) and re.fullmatch(r"[-+]?\d+[eE][-+]?\d+", value):
                hint = " (YAML reads a number in e-notation without a dot as a string: write 1.0e-5)"
            return f"expected {expected}, got {value!r}{hint}"
        items = [value]
    if rng is not None and attr_type in ("int", "float", "list<int>", "list<float>"):
        lo, hi = rng
        for v in items:
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                return f"{v!r} is outside the range [{lo}, {hi}]"
    return None


def _example_tensor(node: _Node, what: str, problems: _Problems) -> Optional[ExampleTensor]:
    fields = _mapping(node, TENSOR_KEYS, what, problems)
    if fields is None:
        return None
    dtype = _scalar(fields, "dtype", str, what, problems)
    if dtype not in DTYPES:
        problems.add(node.loc, f"{what} needs a `dtype`, one of {', '.join(DTYPES)}")
        return None
    if ("value" in fields) == ("shape" in fields):
        problems.add(node.loc, f"{what} needs exactly one of `value` and `shape`")
        return None
    if "shape" in fields:
        shape = fields["shape"].plain()
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            problems.add(fields["shape"].loc, f"`shape` of {what} must be a list of sizes")
            return None
        return ExampleTensor(dtype, tuple(shape), None)
    value = fields["value"].plain()
    shape = _nested_shape(value)
    if shape is None:
        problems.add(fields["value"].loc, f"`value` of {what} is not a regular nested list of scalars")
        return None
    return ExampleTensor(dtype, shape, _freeze(value))


def _nested_shape(value) -> Optional[Tuple[int, ...]]:
    if isinstance(value, (bool, int, float)):
        return ()
    if not isinstance(value, list) or not value:
        return (0,) if value == [] else None
    shapes = {_nested_shape(v) for v in value}
    if len(shapes) != 1 or None in shapes:
        return None
    return (len(value),) + shapes.pop()


def _freeze(value):
    return tuple(_freeze(v) for v in value) if isinstance(value, list) else value


class _OpLoader:
    def __init__(self, node: _Node, rules: Sequence[str], problems: _Problems, api: Optional[int] = None):
        self.node, self.rules, self.p, self.api = node, rules, problems, api
        self.what = "op"
        self.since = 1

    def load(self) -> Optional[OpDef]:
        f = _mapping(self.node, OP_KEYS, "an op", self.p)
        if f is None:
            return None
        for key in OP_REQUIRED:
            if key not in f:
                self.p.add(self.node.loc, f"op {self._name(f)!s} is missing the required key `{key}`")
        name = _scalar(f, "name", str, "an op", self.p, "")
        self.what = f"op `{name}`"
        if name and not NAME_RE.match(name):
            self.p.add(f["name"].loc, f"op name `{name}` is not snake_case")
        since = _scalar(f, "since", int, self.what, self.p, 1)
        if since < 1:
            self.p.add(f["since"].loc, f"`since` of {self.what} must be a version >= 1")
        self.since = since
        if self.api is not None and since > self.api:
            self.p.add(f["since"].loc, f"`since` of {self.what} is {since}, newer than the API version "
                                       f"being developed ({self.api}, in VERSION)")
        status = _scalar(f, "status", str, self.what, self.p, "stable")
        if status not in STATUSES:
            self.p.add(f["status"].loc, f"`status` of {self.what} must be one of {', '.join(STATUSES)}")
        type_vars = self._type_vars(f)
        attrs = tuple(a for a in (self._attr(n) for n in _seq(f, "attrs", self.what, self.p)) if a)
        inputs = tuple(i for i in (self._input(n, type_vars) for n in _seq(f, "inputs", self.what, self.p)) if i)
        subgraphs = tuple(s for s in (self._subgraph(n, inputs) for n in _seq(f, "subgraphs", self.what, self.p)) if s)
        self.has_bodies = bool(subgraphs)
        outputs = tuple(o for o in (self._output(n, type_vars, attrs, inputs, subgraphs)
                                    for n in _seq(f, "outputs", self.what, self.p)) if o)
        if "outputs" in f and not outputs:
            self.p.add(f["outputs"].loc, f"{self.what} needs at least one output")
        self._check_signature(inputs, attrs, subgraphs, outputs, type_vars)
        self._check_axis_of(attrs, inputs, outputs)
        infer = _scalar(f, "infer", str, self.what, self.p, "")
        if "infer" in f and infer not in self.rules:
            self.p.add(f["infer"].loc, f"unknown inference rule `{infer}` in {self.what} "
                                       f"(known: {', '.join(self.rules)})")
        expr = _scalar(f, "compute", str, self.what, self.p)
        if expr is not None:
            names = [i.name for i in inputs] + [a.name for a in attrs]
            for problem in compute.check(expr, names):
                self.p.add(f["compute"].loc, f"`compute` of {self.what}: {problem}")
        examples = tuple(e for e in (self._example(n, inputs, attrs, outputs)
                                     for n in _seq(f, "examples", self.what, self.p)) if e)
        onnx = self._onnx(f["onnx"], attrs, subgraphs) if "onnx" in f else None
        aten = self._aten(f, inputs, attrs, subgraphs)
        sized_by_data = _scalar(f, "sized_by_data", bool, self.what, self.p, False)
        if sized_by_data and (subgraphs or expr is not None):
            self.p.add(f["sized_by_data"].loc, f"{self.what} cannot be `sized_by_data` with bodies or a `compute`")
        static_form = _scalar(f, "static_form", str, self.what, self.p, "")
        if static_form and not sized_by_data:
            self.p.add(f["static_form"].loc, f"{self.what} has a `static_form` but is not `sized_by_data` (the form is how it "
                                             f"runs once its operands' values are read)")
        communicates = _scalar(f, "communicates", bool, self.what, self.p, False)
        if communicates and (subgraphs or expr is not None or sized_by_data):
            self.p.add(f["communicates"].loc, f"{self.what} cannot `communicate` with bodies, a `compute` or `sized_by_data`")
        return OpDef(name=name, since=since, status=status,
                     summary=_scalar(f, "summary", str, self.what, self.p, ""),
                     doc=_scalar(f, "doc", str, self.what, self.p, ""),
                     type_vars=type_vars, inputs=inputs, outputs=outputs, attrs=attrs,
                     subgraphs=subgraphs, infer=infer, compute=expr, examples=examples,
                     loc=self.node.loc, onnx=onnx, aten=aten, sized_by_data=sized_by_data, static_form=static_form,
                     communicates=communicates)

    def _check_axis_of(self, attrs, inputs, outputs) -> None:
        """`axis_of` names an input or output whose position in a node is fixed."""
        tensors = {t.name for t in inputs + outputs}
        after_variadic = {i.name for k, i in enumerate(inputs) if any(p.variadic for p in inputs[:k])}
        for a in attrs:
            if a.axis_of is None:
                continue
            if a.axis_of not in tensors:
                self.p.add(a.loc, f"`axis_of` of attribute `{a.name}` of {self.what} names `{a.axis_of}`, "
                                  f"which is none of its inputs and outputs ({', '.join(sorted(tensors))})")
            elif a.axis_of in after_variadic:
                self.p.add(a.loc, f"`axis_of` of attribute `{a.name}` of {self.what} names `{a.axis_of}`, "
                                  f"which follows a variadic input")

    def _onnx(self, node: _Node, attrs, subgraphs) -> Optional[OnnxNode]:
        """`onnx: {op: IsInf, attrs: {positive: detect_positive}}`: the op exports as one ONNX
        node of that type, with every attribute under its own name or the one given."""
        what = f"`onnx` of {self.what}"
        f = _mapping(node, ONNX_KEYS, what, self.p)
        if f is None:
            return None
        if "op" not in f:
            self.p.add(node.loc, f"{what} needs `op`, the ONNX op type")
            return None
        op = _scalar(f, "op", str, what, self.p)
        if op is None:
            return None
        if not ONNX_OP_RE.match(op):
            self.p.add(f["op"].loc, f"`op` of {what} must be an ONNX op type (CamelCase, as `Relu`), got {op!r}")
            return None
        if subgraphs:
            # Bodies become ONNX subgraphs, which only a hand-written export builds.
            self.p.add(node.loc, f"{what}: an op with bodies cannot export as one node")
            return None
        renames: Dict[str, str] = {}
        anode = f.get("attrs")
        if anode is not None and not anode.is_map:
            self.p.add(anode.loc, f"`attrs` of {what} must be a mapping from attribute names to ONNX names")
        elif anode is not None:
            names = {a.name for a in attrs}
            for k, v in anode.items():
                attr, onnx_name = k.plain(), v.plain() if v.is_scalar else None
                if attr not in names:
                    self.p.add(k.loc, f"`attrs` of {what} renames `{attr}`, which is not an attribute of the op")
                elif attr in renames:
                    self.p.add(k.loc, f"`attrs` of {what} renames `{attr}` twice")
                elif not isinstance(onnx_name, str) or not NAME_RE.match(onnx_name):
                    self.p.add(v.loc, f"`attrs` of {what} renames `{attr}` to {_describe(v)}, not a snake_case name")
                else:
                    renames[attr] = onnx_name
        result = OnnxNode(op, tuple(renames.items()), node.loc)
        seen: Dict[str, str] = {}
        for a in attrs:
            onnx_name = result.attr_name(a.name)
            if onnx_name in seen:
                self.p.add(node.loc, f"{what} writes attributes `{seen[onnx_name]}` and `{a.name}` both as `{onnx_name}`")
            seen.setdefault(onnx_name, a.name)
        return result

    def _aten(self, f: Dict[str, _Node], inputs, attrs, subgraphs) -> Tuple[str, ...]:
        """`aten: [add.Tensor, add.Scalar]`: ATen overloads that compute this op exactly, their
        tensor arguments being its inputs in order and its attributes left at their defaults."""
        what = f"`aten` of {self.what}"
        names = []
        for n in _seq(f, "aten", self.what, self.p):
            op = n.plain() if n.is_scalar else None
            if not isinstance(op, str) or not ATEN_OP_RE.match(op):
                self.p.add(n.loc, f"{what} lists {_describe(n)}: an ATen overload is `name.overload`, as `add.Tensor`")
            elif op in names:
                self.p.add(n.loc, f"{what} lists `{op}` twice")
            else:
                names.append(op)
        if not names:
            return ()
        if subgraphs or any(i.variadic for i in inputs):
            self.p.add(f["aten"].loc, f"{what}: an op with bodies or a variadic input needs a converter of its own")
        required = [a.name for a in attrs if a.required]
        if required:
            self.p.add(f["aten"].loc, f"{what}: attribute(s) {', '.join(required)} have no default, which the ATen "
                                      f"arguments would have to set: convert it by hand")
        return tuple(names)

    @staticmethod
    def _name(f: Dict[str, _Node]) -> str:
        n = f.get("name")
        return f"`{n.plain()}`" if n is not None and n.is_scalar else "(unnamed)"

    def _type_vars(self, f) -> Tuple[TypeVar, ...]:
        node = f.get("type_vars")
        if node is None:
            return ()
        if not node.is_map:
            self.p.add(node.loc, f"`type_vars` of {self.what} must be a mapping")
            return ()
        out = []
        for k, v in node.items():
            name = k.plain()
            if not isinstance(name, str) or not TYPE_VAR_RE.match(name):
                self.p.add(k.loc, f"type variable `{name}` of {self.what} must be CapitalCase")
                continue
            out.append(TypeVar(name, _dtype_list(v, f"type variable `{name}`", self.p), k.loc))
        return tuple(out)

    def _type_ok(self, t: str, type_vars, extra: Iterable[str] = ()) -> bool:
        return t in DTYPES or any(tv.name == t for tv in type_vars) or t in extra

    def _input(self, node: _Node, type_vars) -> Optional[Input]:
        f = _mapping(node, INPUT_KEYS, f"an input of {self.what}", self.p)
        if f is None:
            return None
        name = _scalar(f, "name", str, f"an input of {self.what}", self.p, "")
        what = f"input `{name}` of {self.what}"
        t = _scalar(f, "type", str, what, self.p, "")
        if not self._type_ok(t, type_vars, ("any",)):
            self.p.add(node.loc, f"{what} has type `{t}`, which is neither a dtype nor a declared type variable")
        optional = _scalar(f, "optional", bool, what, self.p, False)
        variadic = _scalar(f, "variadic", bool, what, self.p, False)
        min_count = _scalar(f, "min", int, what, self.p, 1)
        if "min" in f and not variadic:
            self.p.add(f["min"].loc, f"`min` of {what} needs `variadic: true`")
        if min_count < 0:
            self.p.add(f["min"].loc, f"`min` of {what} cannot be negative")
        if variadic and optional:
            self.p.add(node.loc, f"{what} cannot be both variadic and optional")
        return Input(name, t, optional, variadic, min_count, self._since(f, what),
                     _scalar(f, "doc", str, what, self.p, ""), node.loc)

    def _attr(self, node: _Node) -> Optional[Attr]:
        f = _mapping(node, ATTR_KEYS, f"an attribute of {self.what}", self.p)
        if f is None:
            return None
        name = _scalar(f, "name", str, f"an attribute of {self.what}", self.p, "")
        what = f"attribute `{name}` of {self.what}"
        t = _scalar(f, "type", str, what, self.p, "")
        if t not in ATTR_TYPES:
            self.p.add(node.loc, f"{what} has unknown type `{t}` (types: {', '.join(ATTR_TYPES)})")
            return None
        values: Tuple[str, ...] = ()
        if t == "enum":
            vnode = f.get("values")
            values = tuple(vnode.plain()) if vnode is not None and vnode.is_seq else ()
            if not values or not all(isinstance(v, str) and NAME_RE.match(v) for v in values):
                self.p.add(node.loc, f"{what} is an enum and needs `values`, a list of snake_case names")
                return None
            if len(set(values)) != len(values):
                self.p.add(f["values"].loc, f"`values` of {what} repeats a value: {list(values)}")
        elif "values" in f:
            self.p.add(f["values"].loc, f"`values` of {what} is only for enums")
        rng = None
        if "range" in f:
            r = f["range"].plain()
            if (t not in ("int", "float", "list<int>", "list<float>") or not isinstance(r, list)
                    or len(r) != 2 or not all(v is None or isinstance(v, (int, float)) for v in r)):
                self.p.add(f["range"].loc, f"`range` of {what} must be [lo, hi] on a numeric type")
            elif r[0] is not None and r[1] is not None and r[0] > r[1]:
                self.p.add(f["range"].loc, f"`range` of {what} is empty: {r[0]} > {r[1]}")
            else:
                rng = (r[0], r[1])
        required = _scalar(f, "required", bool, what, self.p, False)
        has_default = "default" in f
        default = f["default"].plain() if has_default else None
        if required == has_default:
            self.p.add(node.loc, f"{what} needs exactly one of `default` and `required: true`")
        if has_default:
            problem = _check_attr_value(t, values, default, rng)
            if problem:
                self.p.add(f["default"].loc, f"default of {what}: {problem}")
            if t == "float" and isinstance(default, int):
                default = float(default)
            if isinstance(default, list):
                default = tuple(float(v) if t == "list<float>" else v for v in default)
        axis_of = _scalar(f, "axis_of", str, what, self.p)
        if axis_of is not None and t not in ("int", "list<int>"):
            self.p.add(f["axis_of"].loc, f"`axis_of` of {what} is only for int and list<int> attributes")
            axis_of = None
        return Attr(name, t, required, default, rng, values, self._since(f, what),
                    _scalar(f, "doc", str, what, self.p, ""), node.loc, axis_of)

    def _since(self, f, what: str) -> int:
        """An input's or attribute's own version; the op's when not given."""
        since = _scalar(f, "since", int, what, self.p, self.since)
        if since < self.since:
            self.p.add(f["since"].loc, f"`since` of {what} ({since}) is older than the op's ({self.since})")
        if self.api is not None and since > self.api:
            self.p.add(f["since"].loc, f"`since` of {what} is {since}, newer than the API version "
                                       f"being developed ({self.api}, in VERSION)")
        return since

    def _subgraph(self, node: _Node, inputs) -> Optional[Subgraph]:
        f = _mapping(node, SUBGRAPH_KEYS, f"a subgraph of {self.what}", self.p)
        if f is None:
            return None
        name = _scalar(f, "name", str, f"a subgraph of {self.what}", self.p, "")
        what = f"subgraph `{name}` of {self.what}"
        params = _scalar(f, "params", str, what, self.p)
        if params is not None and not any(i.name == params and i.variadic for i in inputs):
            self.p.add(f["params"].loc, f"`params` of {what} must name a variadic input")
        return Subgraph(name, params, _scalar(f, "doc", str, what, self.p, ""), node.loc)

    def _output(self, node: _Node, type_vars, attrs, inputs, subgraphs) -> Optional[Output]:
        f = _mapping(node, OUTPUT_KEYS, f"an output of {self.what}", self.p)
        if f is None:
            return None
        name = _scalar(f, "name", str, f"an output of {self.what}", self.p, "")
        what = f"output `{name}` of {self.what}"
        t = _scalar(f, "type", str, what, self.p, "")
        if t.startswith("attr:"):
            ref = next((a for a in attrs if a.name == t[5:]), None)
            if ref is None or ref.type != "dtype":
                self.p.add(node.loc, f"{what} takes its dtype from `{t[5:]}`, which is not a dtype attribute")
        elif t == "subgraph":
            if not subgraphs:
                self.p.add(node.loc, f"{what} has type `subgraph` but the op has no subgraphs")
        elif not self._type_ok(t, type_vars):
            self.p.add(node.loc, f"{what} has type `{t}`, which is neither a dtype nor a declared type variable")
        count = None
        if "count" in f:
            c = f["count"].plain()
            if not isinstance(c, dict) or len(c) != 1 or next(iter(c)) not in ("attr", "input", "subgraph"):
                self.p.add(f["count"].loc, f"`count` of {what} must be one of {{attr: X}}, {{input: X}}, {{subgraph: X}}")
            else:
                kind, ref = next(iter(c.items()))
                valid = {"attr": [a.name for a in attrs if a.type in ("int", "list<int>", "list<float>")],
                         "input": [i.name for i in inputs if i.variadic],
                         "subgraph": [s.name for s in subgraphs]}[kind]
                if ref not in valid:
                    self.p.add(f["count"].loc, f"`count` of {what} refers to {kind} `{ref}`, which is not "
                                               f"a {'list or int attribute' if kind == 'attr' else 'variadic input' if kind == 'input' else 'subgraph'} of the op")
                count = OutputCount(kind, ref)
        return Output(name, t, count, _scalar(f, "doc", str, what, self.p, ""), node.loc)

    def _check_signature(self, inputs, attrs, subgraphs, outputs, type_vars) -> None:
        seen: Dict[str, Location] = {}
        for item in (*inputs, *attrs, *subgraphs, *outputs):
            if not item.name:
                self.p.add(item.loc, f"an input, output, attribute or subgraph of {self.what} has no `name`")
                continue
            if not NAME_RE.match(item.name):
                self.p.add(item.loc, f"`{item.name}` in {self.what} is not snake_case")
            if item.name in seen:
                self.p.add(item.loc, f"duplicate name `{item.name}` in {self.what} (first at line {seen[item.name].line})")
            seen.setdefault(item.name, item.loc)
        optional_seen = False
        for i in inputs:
            if i.optional:
                optional_seen = True
            elif optional_seen:
                self.p.add(i.loc, f"required input `{i.name}` of {self.what} follows an optional input")
        variadic = [i for i in inputs if i.variadic]
        if len(variadic) > 1:
            self.p.add(variadic[1].loc, f"{self.what} has more than one variadic input "
                                        f"(`{variadic[0].name}` and `{variadic[1].name}`)")
        used = {i.type for i in inputs} | {o.type for o in outputs}
        for tv in type_vars:
            if tv.name not in used:
                self.p.add(tv.loc, f"type variable `{tv.name}` of {self.what} is declared but never used")
        if sum(o.is_list for o in outputs) and len(outputs) > 1:
            self.p.add(outputs[0].loc, f"{self.what}: an output with a `count` must be the only output")

    def _example(self, node: _Node, inputs, attrs, outputs) -> Optional[Example]:
        what = f"an example of {self.what}"
        f = _mapping(node, EXAMPLE_KEYS, what, self.p)
        if f is None:
            return None
        if self.has_bodies:
            self.p.add(node.loc, f"{self.what} has bodies; examples of ops with bodies are not supported")
            return None
        bad_tensors = set()

        def tensors(key, known: Dict[str, bool]):
            out = []
            group = f.get(key)
            if group is None:
                return ()
            if not group.is_map:
                self.p.add(group.loc, f"`{key}` of {what} must be a mapping")
                return ()
            for k, v in group.items():
                name = k.plain()
                if name not in known:
                    self.p.add(k.loc, f"{what} names {key[:-1]} `{name}`, which {self.what} does not have")
                    continue
                if known[name]:
                    if not v.is_seq:
                        self.p.add(v.loc, f"`{name}` in {what} is a list of tensors")
                        continue
                    ts = tuple(_example_tensor(e, f"`{name}` in {what}", self.p) for e in v.elements())
                    if None not in ts:
                        out.append((name, ts))
                    else:
                        bad_tensors.add(name)
                else:
                    t = _example_tensor(v, f"`{name}` in {what}", self.p)
                    if t is not None:
                        out.append((name, t))
                    else:
                        bad_tensors.add(name)
            return tuple(out)

        ins = tensors("inputs", {i.name: i.variadic for i in inputs})
        outs = tensors("outputs", {o.name: o.is_list for o in outputs})
        given = {n for n, _ in ins} | bad_tensors
        for i in inputs:
            if not i.optional and i.name not in given:
                self.p.add(node.loc, f"{what} lacks the required input `{i.name}`")
        out_names = {o.name for o in outputs}
        if {n for n, _ in outs} | (bad_tensors & out_names) != out_names:
            self.p.add(node.loc, f"{what} must give every output of the op")
        attr_values = []
        anode = f.get("attrs")
        if anode is not None and not anode.is_map:
            self.p.add(anode.loc, f"`attrs` of {what} must be a mapping")
        elif anode is not None:
            by_name = {a.name: a for a in attrs}
            for k, v in anode.items():
                a = by_name.get(k.plain())
                if a is None:
                    self.p.add(k.loc, f"{what} sets attribute `{k.plain()}`, which {self.what} does not have")
                    continue
                value = v.plain()
                problem = _check_attr_value(a.type, a.values, value, a.range)
                if problem:
                    self.p.add(v.loc, f"attribute `{a.name}` in {what}: {problem}")
                attr_values.append((a.name, tuple(value) if isinstance(value, list) else value))
        set_attrs = {n for n, _ in attr_values}
        for a in attrs:
            if a.required and a.name not in set_attrs:
                self.p.add(node.loc, f"{what} lacks the required attribute `{a.name}`")
        return Example(ins, tuple(attr_values), outs, node.loc)


def read_rules(path: Path) -> Tuple[str, ...]:
    """The inference rule names of compiler_core/ir/infer_rules.def, in their order."""
    return tuple(name for name, _ in read_rule_versions(path))


def read_rule_versions(path: Path) -> Tuple[Tuple[str, int], ...]:
    """(name, version) of every rule of compiler_core/ir/infer_rules.def."""
    return tuple((m[0], int(m[1])) for m in re.findall(r"^ESG_INFER_RULE\((\w+),\s*(\d+)\)", path.read_text(), re.M))


def load(paths: Sequence[Path], rules: Sequence[str], root: Optional[Path] = None,
         api: Optional[int] = None, top_keys: Iterable[str] = ("ops",)) -> OpSet:
    """Loads and checks every file; raises LoadError listing all problems found."""
    problems = _Problems()
    ops: List[OpDef] = []
    first: Dict[str, Location] = {}
    for path in sorted(paths):
        display = str(path.relative_to(root)) if root and path.is_relative_to(root) else str(path)
        doc = _parse_file(path, display, problems)
        if doc is None:
            continue
        fields = _mapping(doc, set(top_keys), "the file", problems)
        if fields is None:
            continue
        if "ops" not in fields or not fields["ops"].is_seq:
            problems.add(doc.loc, "the file needs `ops:`, a list of op entries")
            continue
        for node in fields["ops"].elements():
            op = _OpLoader(node, rules, problems, api).load()
            if op is None or not op.name:
                continue
            if op.name in first:
                problems.add(op.loc, f"duplicate op `{op.name}` (first defined at {first[op.name]})")
                continue
            first[op.name] = op.loc
            ops.append(op)
    _check_static_forms(ops, problems)
    _check_aten_claims(ops, problems)
    if problems.items:
        raise LoadError(problems.items)
    return OpSet(tuple(sorted(ops, key=lambda o: o.name)), tuple(rules))


def _check_aten_claims(ops: Sequence[OpDef], problems: _Problems) -> None:
    """An ATen overload converts to one op: two claiming it would make the frontend's choice
    depend on the order the files load in."""
    claimed: Dict[str, str] = {}
    for op in ops:
        for overload in op.aten:
            if overload in claimed:
                problems.add(op.loc, f"`aten` of `{op.name}` claims `{overload}`, which `{claimed[overload]}` claims already")
            claimed.setdefault(overload, op.name)


_OPERAND_ATTR_TYPES = ("int", "float", "list<int>")  # what a tensor's values can stand for
_INTEGER_DTYPES = {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"}


def _check_static_forms(ops: Sequence[OpDef], problems: _Problems) -> None:
    """An op's `static_form` names an op it runs as once its operands' values are read
    (eval/sized_kernels.cpp, as_static): each input named like one of the form's attributes is
    read as it (an integer tensor for an int or list<int>), the other inputs are the form's
    inputs in order (optional where the form's are), each attribute of its own is one of the
    form's scalars, of the same type (an enum with the same values), passed on, every required
    attribute of the form is given one way or the other, and the outputs are the form's."""
    by_name = {op.name: op for op in ops}
    for op in ops:
        if not op.static_form:
            continue
        what = f"`static_form` of op `{op.name}`"
        form = by_name.get(op.static_form)
        if form is None or form.sized_by_data or form.subgraphs:
            problems.add(op.loc, f"{what} names `{op.static_form}`, which is no op of fixed sizes without bodies")
            continue
        form_attrs = {a.name: a for a in form.attrs}
        type_vars = {t.name: set(t.dtypes) for t in op.type_vars}
        read = [i for i in op.inputs if i.name in form_attrs]
        for i in read:
            want = form_attrs[i.name]
            if want.type not in _OPERAND_ATTR_TYPES or i.variadic:
                problems.add(i.loc, f"{what}: input `{i.name}` stands for `{op.static_form}`'s attribute of type "
                                    f"{want.type}, which a tensor's values cannot give")
            elif want.type != "float" and not type_vars.get(i.type, {i.type}) <= _INTEGER_DTYPES:
                problems.add(i.loc, f"{what}: input `{i.name}` stands for an integer attribute; it must be of integer types")
            elif i.optional and want.required:
                problems.add(i.loc, f"{what}: input `{i.name}` is optional but `{op.static_form}`'s attribute is required")
        rest = [i for i in op.inputs if i.name not in form_attrs]
        if (len(rest) != len(form.inputs) or any(i.variadic or f.variadic for i, f in zip(rest, form.inputs))
                or any(i.optional != f.optional for i, f in zip(rest, form.inputs))):
            problems.add(op.loc, f"{what}: its other inputs ({', '.join(i.name for i in rest) or 'none'}) are not "
                                 f"`{op.static_form}`'s ({', '.join(i.name for i in form.inputs) or 'none'}), one for one, "
                                 f"optional alike, none variadic")
        own = {a.name: a for a in op.attrs}
        for a in op.attrs:
            f = form_attrs.get(a.name)
            if (f is None or f.type != a.type or a.is_list or a.type == "string" or f.values != a.values
                    or a.name in {i.name for i in read}):
                problems.add(a.loc, f"{what}: attribute `{a.name}` is not a scalar attribute of `{op.static_form}` "
                                    f"of the same type")
        for f in form.attrs:
            if f.required and f.name not in own and f.name not in {i.name for i in read}:
                problems.add(op.loc, f"{what}: `{op.static_form}`'s required attribute `{f.name}` is given by no input or attribute")
        if [o.type for o in op.outputs] != [o.type for o in form.outputs]:
            problems.add(op.loc, f"{what}: its outputs are not `{op.static_form}`'s, one for one and of the same types")


def load_dir(op_defs: Path, rules_file: Path, api: Optional[int] = None) -> OpSet:
    root = op_defs.resolve().parent
    return load(sorted(op_defs.resolve().glob("*.yaml")), read_rules(rules_file), root, api)
