"""Names and types of an op's parts in each language. Every emitter asks here, so the C, C++
and Python spellings of one op can never drift apart."""
from __future__ import annotations

from .model import CPP_KEYWORDS, PY_KEYWORDS, Attr, Input, OpDef

C_KEYWORDS = CPP_KEYWORDS | {"restrict", "_Bool"}

C_ATTR_TYPES = {"int": "int64_t", "float": "double", "bool": "bool", "string": "const char*",
                "dtype": "esg_dtype", "list<int>": "esg_i64_list", "list<float>": "esg_f64_list"}
CPP_ATTR_PARAM = {"int": "int64_t", "float": "double", "bool": "bool", "string": "const std::string&",
                  "dtype": "DType", "list<int>": "const std::vector<int64_t>&",
                  "list<float>": "const std::vector<double>&"}
PY_ATTR_TYPES = {"int": "int", "float": "float", "bool": "bool", "string": "str", "dtype": "DTypeLike",
                 "list<int>": "Sequence[int]", "list<float>": "Sequence[float]"}


def camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def c_name(name: str) -> str:
    return name + "_" if name in C_KEYWORDS else name


def cpp_name(name: str) -> str:
    return name + "_" if name in CPP_KEYWORDS else name


def py_name(name: str) -> str:
    return name + "_" if name in PY_KEYWORDS else name


def c_fn(op: OpDef) -> str:
    return f"esg_{op.name}"


def c_options(op: OpDef) -> str:
    return f"esg_{op.name}_options"


def cpp_options(op: OpDef) -> str:
    return f"{camel(op.name)}Options"


def c_enum(op: OpDef, attr: Attr) -> str:
    return f"esg_{op.name}_{attr.name}"


def c_enum_value(op: OpDef, attr: Attr, value: str) -> str:
    return f"ESG_{op.name}_{attr.name}_{value}".upper()


def cpp_enum(op: OpDef, attr: Attr) -> str:
    return f"{camel(op.name)}{camel(attr.name)}"


def c_attr_type(op: OpDef, attr: Attr) -> str:
    return c_enum(op, attr) if attr.type == "enum" else C_ATTR_TYPES[attr.type]


def cpp_attr_param(op: OpDef, attr: Attr) -> str:
    return cpp_enum(op, attr) if attr.type == "enum" else CPP_ATTR_PARAM[attr.type]


def py_attr_type(op: OpDef, attr: Attr) -> str:
    if attr.type == "enum":
        return "Literal[" + ", ".join(repr(v) for v in attr.values) + "]"
    return PY_ATTR_TYPES[attr.type]


def is_input(field) -> bool:
    return isinstance(field, Input)


def c_literal(value) -> str:
    """A C/C++ literal for a scalar default."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value == float("inf"):
            return "INFINITY"
        if value == float("-inf"):
            return "-INFINITY"
        if value != value:
            return "NAN"
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def py_literal(value) -> str:
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "math.inf" if value > 0 else "-math.inf"
    if isinstance(value, tuple):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    return repr(value)


def c_params(op: OpDef):
    """(type, name) of every positional C parameter, in order, options pointer last."""
    params = []
    if op.takes_builder:
        params.append(("esg_builder*", "builder"))
    for i in op.required_inputs:
        if i.variadic:
            params += [("const esg_tensor*", c_name(i.name)), ("size_t", c_name(i.name) + "_count")]
        else:
            params.append(("esg_tensor", c_name(i.name)))
    for s in op.subgraphs:
        params.append(("esg_subgraph", c_name(s.name)))
    for a in op.required_attrs:
        params.append((c_attr_type(op, a), c_name(a.name)))
    params.append((f"const {c_options(op)}*", "options"))
    return params


FILTERS = {f.__name__: f for f in (camel, c_name, cpp_name, py_name, c_fn, c_options, cpp_options,
                                   c_enum, c_enum_value, cpp_enum, c_attr_type, cpp_attr_param,
                                   py_attr_type, c_literal, py_literal, c_params)}
TESTS = {"input": is_input}
