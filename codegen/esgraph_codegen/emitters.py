"""One emitter per generated file: its path under the output folder, its template and the
helpers the template needs beyond the shared naming filters."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List

from . import compute
from . import naming as n
from .model import DTYPES, Attr, Example, OpDef, OpSet


def dtype_enum(t: str) -> str:
    return {"bool": "Bool"}.get(t, t.upper())


# ---- C++ -------------------------------------------------------------------------------------
def cpp_template(op: OpDef) -> str:
    """Bodies are callables of any type: `fn()` (or `fn(params)`) returning a Tensor or a vector."""
    if not op.subgraphs:
        return ""
    return "template <" + ", ".join(f"class {n.camel(s.name)}" for s in op.subgraphs) + ">\n"


def cpp_params(op: OpDef) -> List[str]:
    params = ["GraphBuilder& builder"] if op.takes_builder else []
    for i in op.required_inputs:
        kind = "const std::vector<Tensor>&" if i.variadic else "const Tensor&"
        params.append(f"{kind} {n.cpp_name(i.name)}")
    params += [f"{n.camel(s.name)}&& {n.cpp_name(s.name)}" for s in op.subgraphs]
    params += [f"{n.cpp_attr_param(op, a)} {n.cpp_name(a.name)}" for a in op.required_attrs]
    return params


def builder_expr(op: OpDef) -> str:
    if op.takes_builder:
        return "builder.handle()"
    return f"detail::builder_of({n.cpp_name(op.required_inputs[0].name)})"


def c_args(op: OpDef) -> str:
    args = ["builder.handle()"] if op.takes_builder else []
    for i in op.required_inputs:
        args += [f"{i.name}_c.data(), {i.name}_c.size()"] if i.variadic else [f"{n.cpp_name(i.name)}.handle()"]
    args += [f"{s.name}_c" for s in op.subgraphs]
    for a in op.required_attrs:
        v = n.cpp_name(a.name)
        args.append({"list<int>": f"esg_i64_list{{{v}.data(), {v}.size()}}",
                     "list<float>": f"esg_f64_list{{{v}.data(), {v}.size()}}",
                     "dtype": f"static_cast<esg_dtype>({v})",
                     "enum": f"static_cast<{n.c_enum(op, a)}>({v})",
                     "string": f"{v}.c_str()"}.get(a.type, v))
    return ", ".join(args + ["options.c()"])


def expected_outputs(op: OpDef, ex: Example):
    """The example's expected tensors in result order (list outputs expanded)."""
    given = dict(ex.outputs)
    flat = []
    for o in op.outputs:
        t = given[o.name]
        flat += list(t) if o.is_list else [t]
    return flat


def range_str(a: Attr) -> str:
    lo, hi = a.range
    return f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"


def cpp_value(op: OpDef, a: Attr, value) -> str:
    if a.type == "enum":
        return f"esg::{n.cpp_enum(op, a)}::{n.camel(value)}"
    if a.type == "dtype":
        return f"esg::DType::{dtype_enum(value)}"
    if a.is_list:
        return "{" + ", ".join(n.c_literal(float(v) if a.type == "list<float>" else v) for v in value) + "}"
    if a.type == "float":
        return n.c_literal(float(value))
    return n.c_literal(value)


def example_args(op: OpDef, ex: Example) -> str:
    given = dict(ex.attrs)
    args = ["builder"] if op.takes_builder else []
    args += ["in_" + i.name for i in op.required_inputs]
    args += [cpp_value(op, a, given[a.name]) for a in op.required_attrs]
    opts = "esg::" + n.cpp_options(op) + "()"
    inputs = dict(ex.inputs)
    for f in op.option_fields:
        if isinstance(f, Attr) and f.name in given:
            opts += f".{n.cpp_name(f.name)}({cpp_value(op, f, given[f.name])})"
        elif not isinstance(f, Attr) and f.name in inputs:
            opts += f".{n.cpp_name(f.name)}(in_{f.name})"
    return ", ".join(args + [opts])


# ---- op registry -------------------------------------------------------------------------------
def type_var_ref(op: OpDef, t: str) -> str:
    idx = [tv.name for tv in op.type_vars]
    if t in idx:
        return str(idx.index(t))
    return "InputSchema::kAny" if t == "any" else "InputSchema::kFixed"


def output_type(op: OpDef, o) -> str:
    tvs = [tv.name for tv in op.type_vars]
    if o.type in tvs:
        return f"OutputType::TypeVar, {tvs.index(o.type)}, DType::Invalid, -1"
    if o.type in DTYPES:
        return f"OutputType::Fixed, -1, DType::{dtype_enum(o.type)}, -1"
    if o.type == "subgraph":
        return "OutputType::FromSubgraph, -1, DType::Invalid, -1"
    ref = [a.name for a in op.attrs].index(o.type[5:])
    return f"OutputType::FromAttr, -1, DType::Invalid, {ref}"


def count(op: OpDef, o) -> str:
    if o.count is None:
        return "OutputCount::One, -1"
    pools = {"attr": [a.name for a in op.attrs], "input": [i.name for i in op.inputs],
             "subgraph": [s.name for s in op.subgraphs]}
    kind = {"attr": "FromAttr", "input": "FromInput", "subgraph": "FromSubgraph"}[o.count.kind]
    return f"OutputCount::{kind}, {pools[o.count.kind].index(o.count.ref)}"


def input_index(op: OpDef, name) -> int:
    return -1 if name is None else [i.name for i in op.inputs].index(name)


def attr_schema(op: OpDef, a: Attr) -> str:
    kinds = {"int": "Int", "float": "Float", "bool": "Bool", "string": "String", "dtype": "DType",
             "enum": "Enum", "list<int>": "IntList", "list<float>": "FloatList"}
    i, f, s, ints, floats, size = "0", "0.0", "nullptr", "nullptr", "nullptr", "0"
    d = a.default
    if not a.required:
        if a.type in ("int", "bool"):
            i = n.c_literal(int(d))
        elif a.type == "enum":
            i = str(a.values.index(d))
        elif a.type == "dtype":
            i = f"static_cast<int64_t>(DType::{dtype_enum(d)})"
        elif a.type == "float":
            f = n.c_literal(float(d))
        elif a.type == "string":
            s = n.c_literal(d)
        elif d:
            ints, floats = (f"{op.name}_{a.name}_default", "nullptr") if a.type == "list<int>" else ("nullptr", f"{op.name}_{a.name}_default")
            size = str(len(d))
    lo, hi = a.range if a.range else (None, None)
    values = (f"{op.name}_{a.name}_values", len(a.values)) if a.type == "enum" else ("nullptr", 0)
    return (f'{{"{a.name}", AttrKind::{kinds[a.type]}, {n.c_literal(a.required)}, {i}, {f}, {s}, {ints}, {floats}, '
            f'{size}, {n.c_literal(lo is not None)}, {n.c_literal(hi is not None)}, '
            f'{n.c_literal(float(lo or 0))}, {n.c_literal(float(hi or 0))}, {values[0]}, {values[1]}}}')


def span(name: str, items) -> str:
    return f"{{{name}, {len(items)}}}" if items else "{}"


# ---- Python --------------------------------------------------------------------------------------
def _py_default(op: OpDef, a: Attr) -> str:
    d = a.default
    if a.type == "enum" or a.type == "string" or a.type == "dtype":
        return f'std::string("{d}")'
    if a.is_list:
        elem = "int64_t" if a.type == "list<int>" else "double"
        return f"std::vector<{elem}>{{{', '.join(n.c_literal(v) for v in d)}}}"
    return n.c_literal(float(d) if a.type == "float" else d)


PY_CPP_TYPES = {"int": "int64_t", "float": "double", "bool": "bool", "string": "std::string",
                "enum": "std::string", "dtype": "py::object", "list<int>": "std::vector<int64_t>",
                "list<float>": "std::vector<double>"}


def py_bound_params(op: OpDef) -> List[str]:
    """The C++ declarations taking each Python parameter from the call's CallArgs, in order:
    required inputs, bodies and attributes, then the options with their defaults."""
    lines, at = [], 0
    for i in op.required_inputs:
        lines.append(f"py::object {n.py_name(i.name)} = call.{'tensors' if i.variadic else 'object'}({at});")
        at += 1
    for s in op.subgraphs:
        lines.append(f"py::function {n.py_name(s.name)} = call.get<py::function>({at});")
        at += 1
    for a in op.required_attrs:
        t = PY_CPP_TYPES[a.type]
        lines.append(f"py::object {n.py_name(a.name)} = call.object({at});" if a.type == "dtype" else
                     f"{t} {n.py_name(a.name)} = call.get<{t}>({at});")
        at += 1
    for f in op.option_fields:
        name = n.py_name(f.name)
        if n.is_input(f):
            lines.append(f"py::object {name} = call.object({at});")
        elif f.type == "dtype":
            lines.append(f'py::object {name} = call.has({at}) ? call.object({at}) : py::str("{f.default}");')
        else:
            t = PY_CPP_TYPES[f.type]
            lines.append(f"{t} {name} = call.has({at}) ? call.get<{t}>({at}) : {t}({_py_default(op, f)});")
        at += 1
    return lines


def py_arg_type(op: OpDef, i) -> str:
    """The ArgType literal of an input: its type variable's index or its fixed dtype."""
    tvs = [tv.name for tv in op.type_vars]
    if i.type in tvs:
        return f"ArgType{{{tvs.index(i.type)}, {{}}}}"
    if i.type in DTYPES:
        return f"ArgType{{-1, esg::DType::{dtype_enum(i.type)}}}"
    return "ArgType{}"


def py_lift(op: OpDef) -> str:
    """The Lift of a call: every tensor argument with its type (a variadic one as the list)."""
    singles = ", ".join(f"{{{n.py_name(i.name)}, {py_arg_type(op, i)}}}" for i in op.inputs if not i.variadic)
    lists = [f"{{{n.py_name(i.name)}, {py_arg_type(op, i)}}}" for i in op.inputs if i.variadic]
    return f"Lift lift({{{singles}}}{', ' + lists[0] if lists else ''});"


def py_call_args(op: OpDef) -> str:
    args = ["lift.builder()"] if op.takes_builder else []
    for i in op.required_inputs:
        v = n.py_name(i.name)
        args.append(f"lift.all({v}, {py_arg_type(op, i)})" if i.variadic else f"lift({v}, {py_arg_type(op, i)})")
    for s in op.subgraphs:
        args.append(f"lift.body({n.py_name(s.name)})" if s.params else f"lift.branch({n.py_name(s.name)})")
    for a in op.required_attrs:
        v = n.py_name(a.name)
        if a.type == "enum":
            values = ", ".join(f'"{x}"' for x in a.values)
            v = f'static_cast<esg::{n.cpp_enum(op, a)}>(enum_index("{op.name}", "{a.name}", {v}, {{{values}}}))'
        elif a.type == "dtype":
            v = f"to_dtype({v})"
        args.append(v)
    return ", ".join(args + ["options"])


PY_SPEC_KINDS = {"int": "Int", "float": "Float", "bool": "Bool", "string": "String", "enum": "String", "dtype": "DType",
                 "list<int>": "Ints", "list<float>": "Floats"}


def py_param_specs(op: OpDef) -> str:
    """The ParamSpec list of an op's Python parameters, in order, for CallArgs."""
    specs = [f'{{"{n.py_name(i.name)}", ParamSpec::{"Tensors" if i.variadic else "Tensor"}, false}}' for i in op.required_inputs]
    specs += [f'{{"{n.py_name(s.name)}", ParamSpec::Body, false}}' for s in op.subgraphs]
    specs += [f'{{"{n.py_name(a.name)}", ParamSpec::{PY_SPEC_KINDS[a.type]}, false}}' for a in op.required_attrs]
    specs += [f'{{"{n.py_name(f.name)}", ParamSpec::{"Tensor" if n.is_input(f) else PY_SPEC_KINDS[f.type]}, true}}'
              for f in op.option_fields]
    return "{" + ", ".join(specs) + "}"


def py_signature(op: OpDef) -> str:
    """The op's Python signature, names and defaults: `leaky_relu(x, *, alpha=0.01)`."""
    params = [n.py_name(i.name) for i in op.required_inputs]
    params += [n.py_name(s.name) for s in op.subgraphs]
    params += [n.py_name(a.name) for a in op.required_attrs]
    if op.option_fields:
        params.append("*")
    params += [f"{n.py_name(f.name)}=None" if n.is_input(f) else f"{n.py_name(f.name)}={n.py_literal(f.default)}"
               for f in op.option_fields]
    return f"{n.py_name(op.name)}({', '.join(params)})"


def py_return(op: OpDef) -> str:
    """What the Python function returns: control flow gives its only result as a tensor."""
    if op.subgraphs:
        return "Union[Tensor, List[Tensor]]"
    return "List[Tensor]" if op.returns_list else "Tensor"


def pyi_params(op: OpDef) -> str:
    params = []
    for i in op.required_inputs:
        params.append(f"{n.py_name(i.name)}: {'Sequence[TensorLike]' if i.variadic else 'TensorLike'}")
    for s in op.subgraphs:
        params.append(f"{n.py_name(s.name)}: Callable[..., Union[Tensor, Sequence[Tensor]]]")
    params += [f"{n.py_name(a.name)}: {n.py_attr_type(op, a)}" for a in op.required_attrs]
    if op.option_fields:
        params.append("*")
    for f in op.option_fields:
        if n.is_input(f):
            params.append(f"{n.py_name(f.name)}: Optional[TensorLike] = None")
        else:
            params.append(f"{n.py_name(f.name)}: {n.py_attr_type(op, f)} = {n.py_literal(f.default)}")
    return ", ".join(params)


def onnx_one_node(op: OpDef) -> str:
    """The exporter's entry of an op with `onnx:`: (ONNX op type, ((attribute, ONNX name, type), …))."""
    attrs = [f'("{a.name}", "{op.onnx.attr_name(a.name)}", "{a.type}")' for a in op.attrs]
    return f'("{op.onnx.op}", ({", ".join(attrs)}{"," if len(attrs) == 1 else ""}))'


def aten_operands(op: OpDef) -> str:
    """The generic ATen converter's entry of an op: each input's type variable (or its fixed
    dtype group), so that ATen's type promotion is applied among the inputs that share one."""
    types = [f'"{i.type}"' for i in op.inputs]
    return f'("{op.name}", ({", ".join(types)}{"," if len(types) == 1 else ""}))'


HELPERS: Dict[str, Callable] = {f.__name__: f for f in (
    dtype_enum, expected_outputs, range_str, cpp_template, cpp_params, builder_expr, c_args, example_args, type_var_ref, output_type, count,
    input_index, attr_schema, span, py_bound_params, py_arg_type, py_lift, py_call_args, pyi_params,
    py_param_specs, py_signature, py_return,
    onnx_one_node, aten_operands)}


@dataclass(frozen=True)
class Emitter:
    output: str      # path under the output folder
    template: str
    core: bool = False  # the compilation core's own view of the op set: from the current one only


# ---- the core's typed attribute views ----------------------------------------------------------
VIEW_TYPES = {"int": "int64_t", "float": "double", "bool": "bool", "string": "std::string_view",
              "dtype": "DType", "list<int>": "Span<int64_t>", "list<float>": "Span<double>"}


def view_type(op: OpDef, a: Attr) -> str:
    if a.axis_of:
        return "std::vector<size_t>" if a.is_list else "size_t"
    return n.cpp_enum(op, a) if a.type == "enum" else VIEW_TYPES[a.type]


def _rank_of(op: OpDef, tensor: str) -> str:
    """The reader's expression for the rank of an input or output (the first of a variadic one;
    the loader refuses inputs after a variadic one, whose position varies)."""
    for i, inp in enumerate(op.inputs):
        if inp.name == tensor:
            return f"r.input_rank({i})"
    names = [o.name for o in op.outputs]
    return f"r.output_rank({names.index(tensor)})"


def view_groups(ops) -> List[List[OpDef]]:
    """Ops with attributes, grouped where their attributes are the same (names, types, defaults,
    ranges, enum values and axis sources): a group shares one view type, so code that serves
    several of them (the reductions, argmax and argmin, the pools) reads one type."""
    def key(op: OpDef):
        return tuple((a.name, a.type, a.required, a.default, a.range, a.values,
                      a.axis_of and _rank_of(op, a.axis_of)) for a in op.attrs)
    groups: Dict[tuple, List[OpDef]] = {}
    for op in ops:
        if op.attrs:
            groups.setdefault(key(op), []).append(op)
    return list(groups.values())


def view_read(op: OpDef, a: Attr, index: int) -> str:
    """The statement that sets attribute `a` (at `index` in the node) in its view."""
    member = n.cpp_name(a.name)
    d = a.default
    if a.is_list:
        elem = "int64_t" if a.type == "list<int>" else "double"
        values = ", ".join(n.c_literal(v) for v in d) if d else ""
        default = f"Span<{elem}>(d_{member}, {len(d)})" if d else f"Span<{elem}>()"
        static = f"static constexpr {elem} d_{member}[] = {{{values}}}; " if d else ""
        read = f"r.{'ints' if a.type == 'list<int>' else 'floats'}({index}, {default})"
        if a.axis_of:
            read = f"r.axes({read}, {_rank_of(op, a.axis_of)})"
        return f"{static}{member} = {read};"
    if a.required:
        default = {"float": "0.0", "string": '""'}.get(a.type, "0")
    elif a.type == "enum":
        default = str(a.values.index(d))
    elif a.type == "dtype":
        default = f"static_cast<int64_t>(DType::{dtype_enum(d)})"
    else:
        default = n.c_literal(float(d) if a.type == "float" else d)
    if a.type == "float":
        return f"{member} = r.f({index}, {default});"
    if a.type == "string":
        return f"{member} = r.str({index}, {default});"
    read = f"r.i({index}, {default})"
    if a.axis_of:
        return f"{member} = r.axis({read}, {_rank_of(op, a.axis_of)});"
    cast = {"bool": "", "dtype": "static_cast<DType>", "enum": f"static_cast<{n.cpp_enum(op, a)}>"}.get(a.type)
    if a.type == "bool":
        return f"{member} = {read} != 0;"
    return f"{member} = {cast}({read});" if cast else f"{member} = {read};"


def version_nodes(opset: OpSet):
    """(node name, symbols) per API version, oldest first: the linker version script."""
    by_api = {}
    for since, sym in opset.project.core_symbols:
        by_api.setdefault(since, []).append(sym)
    for op in opset.ops:
        by_api.setdefault(op.since, []).extend([n.c_fn(op), n.c_options(op) + "_init_"])
    last = max([opset.project.api, *by_api])
    return [(f"ESGRAPH_API_{v}", sorted(by_api.get(v, []))) for v in range(1, last + 1)]


def compute_cpp(op: OpDef, domain: str = "reference") -> str:
    return compute.to_cpp(op.compute, [i.name for i in op.inputs], [a.name for a in op.attrs], domain)


def ascendc_lowering(op: OpDef):
    """The op's compute expression as Ascend C statements (empty with a reason when none)."""
    from types import SimpleNamespace
    try:
        lowered = compute.to_ascendc(op.compute, [i.name for i in op.inputs], [a.name for a in op.attrs])
        return SimpleNamespace(statements=lowered.statements, temps=lowered.temps, masks=lowered.masks, reason="")
    except compute.NotLowerable as e:
        return SimpleNamespace(statements=[], temps=0, masks=0, reason=str(e).replace("\\", "\\\\").replace('"', '\\"'))


def _flat(value):
    if isinstance(value, tuple):
        return [v for x in value for v in _flat(x)]
    return [value]


def _tensors(spec):
    return list(spec) if isinstance(spec, tuple) else [spec]


def example_has_values(op: OpDef, ex: Example) -> bool:
    tensors = [t for _, s in ex.inputs + ex.outputs for t in _tensors(s)]
    return all(t.value is not None for t in tensors)


def example_value_calls(op: OpDef, ex: Example) -> List[str]:
    """The ExampleCase calls of an example: inputs in schema order, attributes, outputs."""
    def tensor(t):
        values = ", ".join(n.c_literal(float(v)) for v in _flat(t.value))
        return f"DType::{dtype_enum(t.dtype)}, {{{', '.join(map(str, t.shape))}}}, {{{values}}}"

    given, calls = dict(ex.inputs), []
    for i in op.inputs:
        if i.name not in given:
            calls.append(".absent()")
        else:
            calls += [f".input({tensor(t)})" for t in _tensors(given[i.name])]
    for idx, a in enumerate(op.attrs):
        value = dict(ex.attrs).get(a.name)
        if value is None:
            continue
        if a.type == "list<int>":
            calls.append(f".ints({idx}, {{{', '.join(map(str, value))}}})")
        else:
            ctor = {"int": lambda: f"of_int({value})", "float": lambda: f"of_float({n.c_literal(float(value))})",
                    "bool": lambda: f"of_bool({n.c_literal(value)})",
                    "dtype": lambda: f"of_dtype(DType::{dtype_enum(value)})",
                    "enum": lambda: f"of_enum({a.values.index(value)})"}[a.type]()
            calls.append(f".attr({idx}, AttrArg::{ctor})")
    calls += [f".expect({tensor(t)})" for t in expected_outputs(op, ex)]
    return calls


HELPERS["version_nodes"] = version_nodes
HELPERS["example_has_values"] = example_has_values
HELPERS["example_value_calls"] = example_value_calls
HELPERS["compute_cpp"] = compute_cpp
HELPERS["ascendc_lowering"] = ascendc_lowering
HELPERS["view_type"] = view_type
HELPERS["view_read"] = view_read
HELPERS["view_groups"] = view_groups

EMITTERS = (
    Emitter("include/esgraph/c/ops.h", "c_ops.h.j2"),
    Emitter("include/esgraph/c/version.h", "c_version.h.j2"),
    Emitter("src/esgraph.map", "esgraph.map.j2"),
    Emitter("src/ops_c.cpp", "c_ops.cpp.j2"),
    Emitter("src/ir/ops.gen.hpp", "ops.gen.hpp.j2"),
    Emitter("core/ir/op_kind.gen.hpp", "op_kind.gen.hpp.j2", core=True),
    Emitter("core/ir/op_attrs.gen.hpp", "op_attrs.gen.hpp.j2", core=True),
    Emitter("src/op_registry.cpp", "op_registry.cpp.j2"),
    Emitter("src/eval/elementwise.gen.cpp", "eval_elementwise.cpp.j2"),
    Emitter("src/cpu/elementwise_f32.gen.cpp", "cpu_elementwise_f32.cpp.j2"),
    Emitter("src/ascend/ascendc_ops.gen.cpp", "ascendc_ops.cpp.j2"),
    Emitter("include/esgraph/ops.hpp", "cpp_ops.hpp.j2"),
    Emitter("python/py_ops.cpp", "py_ops.cpp.j2"),
    Emitter("python/esgraph/ops.pyi", "ops.pyi.j2"),
    Emitter("python/esgraph/onnx/_export_table.py", "onnx_export_table.py.j2"),
    Emitter("python/esgraph/torch/_aten_table.py", "aten_table.py.j2"),
    Emitter("docs/ops.md", "ops.md.j2"),
    Emitter("tests/op_examples_test.cpp", "op_examples_test.cpp.j2"),
    Emitter("tests/op_values_test.cpp", "op_values_test.cpp.j2"),
)
