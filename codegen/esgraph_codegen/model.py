"""Frozen model of the op set, built by the loader and read by every emitter.

Each element remembers where it was written (file and line), so that every later check — the
emitters' and the compatibility checker's — can point the user at the YAML that caused it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Tuple, Union

DTYPES = ("f32", "f16", "bf16", "f64", "i8", "i16", "i32", "i64", "u8", "bool", "u16", "u32", "u64")
# The C enum values of the dtypes; append-only, like every enum of the C ABI.
DTYPE_CODES = {name: code for code, name in enumerate(DTYPES, start=1)}
DTYPE_GROUPS = {
    "float": ("f32", "f16", "bf16", "f64"),
    "int": ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"),
}
DTYPE_GROUPS["numeric"] = DTYPE_GROUPS["float"] + DTYPE_GROUPS["int"]
DTYPE_GROUPS["all"] = DTYPE_GROUPS["numeric"] + ("bool",)

ATTR_TYPES = ("int", "float", "bool", "string", "dtype", "enum", "list<int>", "list<float>")

PY_KEYWORDS = frozenset(
    "False None True and as assert async await break class continue def del elif else except "
    "finally for from global if import in is lambda nonlocal not or pass raise return try while "
    "with yield".split())
CPP_KEYWORDS = frozenset(
    "and bool break case catch char class const continue default delete do double else enum "
    "explicit export extern false float for friend goto if inline int long namespace new not "
    "operator or private protected public register return short signed sizeof static struct "
    "switch template this throw true try typedef typename union unsigned using virtual void "
    "volatile while xor".split())


@dataclass(frozen=True)
class Location:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class TypeVar:
    name: str
    dtypes: Tuple[str, ...]
    loc: Location


@dataclass(frozen=True)
class Input:
    name: str
    type: str            # a type variable's name, a dtype, or "any"
    optional: bool
    variadic: bool
    min_count: int
    since: int
    doc: str
    loc: Location


@dataclass(frozen=True)
class OutputCount:
    kind: str            # "attr", "input" or "subgraph"
    ref: str


@dataclass(frozen=True)
class Output:
    name: str
    type: str            # a type variable, a dtype, "attr:<name>" or "subgraph"
    count: Optional[OutputCount]
    doc: str
    loc: Location

    @property
    def is_list(self) -> bool:
        return self.count is not None


Scalar = Union[int, float, bool, str]


@dataclass(frozen=True)
class Attr:
    name: str
    type: str
    required: bool
    default: Union[Scalar, Tuple[Scalar, ...], None]
    range: Optional[Tuple[Optional[float], Optional[float]]]
    values: Tuple[str, ...]  # enum values, in their C order
    since: int
    doc: str
    loc: Location
    # An axis (int) or axes (list<int>) of the named input's or output's rank; negative values
    # count from its end, and the core's typed view of the attribute hands them out normalized.
    axis_of: Optional[str] = None

    @property
    def is_list(self) -> bool:
        return self.type.startswith("list<")


@dataclass(frozen=True)
class Subgraph:
    name: str
    params: Optional[str]   # name of the variadic input whose tensors the body receives
    doc: str
    loc: Location


@dataclass(frozen=True)
class ExampleTensor:
    dtype: str
    shape: Tuple[int, ...]
    value: object            # nested lists, or None when only the shape is given


@dataclass(frozen=True)
class Example:
    inputs: Tuple[Tuple[str, Union[ExampleTensor, Tuple[ExampleTensor, ...]]], ...]
    attrs: Tuple[Tuple[str, object], ...]
    outputs: Tuple[Tuple[str, Union[ExampleTensor, Tuple[ExampleTensor, ...]]], ...]
    loc: Location


@dataclass(frozen=True)
class OnnxNode:
    """The one ONNX node an op exports as, when that node is the same computation: its op type,
    and the ONNX names of the attributes whose names differ (every attribute is written)."""
    op: str
    renames: Tuple[Tuple[str, str], ...]   # (attribute, its ONNX name)
    loc: Location

    def attr_name(self, attr: str) -> str:
        return dict(self.renames).get(attr, attr)


@dataclass(frozen=True)
class OpDef:
    name: str
    since: int
    status: str
    summary: str
    doc: str
    type_vars: Tuple[TypeVar, ...]
    inputs: Tuple[Input, ...]
    outputs: Tuple[Output, ...]
    attrs: Tuple[Attr, ...]
    subgraphs: Tuple[Subgraph, ...]
    infer: str
    compute: Optional[str]
    examples: Tuple[Example, ...]
    loc: Location
    # None for ops whose ONNX export is written by hand (python/esgraph/onnx/_exporter.py).
    onnx: Optional[OnnxNode] = None
    # The ATen overloads ("relu.default") that are this op exactly: their tensor arguments are
    # the op's inputs in order, their other arguments left at ATen's defaults. The torch
    # frontend converts them through one generic converter; the rest it converts by hand.
    aten: Tuple[str, ...] = ()
    # Some output size is known only once the op has run (nonzero's count): runs stop before it.
    sized_by_data: bool = False
    # The op of fixed sizes it runs as once the inputs named like that op's attributes are read
    # (reshape_to as reshape): "" for none.
    static_form: str = ""
    # Exchanges data with other ranks (a collective, send, recv): never folded, merged or dropped.
    communicates: bool = False

    # --- the positional/optional split every binding follows -------------------------------
    @property
    def required_inputs(self) -> Tuple[Input, ...]:
        return tuple(i for i in self.inputs if not i.optional)

    @property
    def optional_inputs(self) -> Tuple[Input, ...]:
        return tuple(i for i in self.inputs if i.optional)

    @property
    def required_attrs(self) -> Tuple[Attr, ...]:
        return tuple(a for a in self.attrs if a.required)

    @property
    def optional_attrs(self) -> Tuple[Attr, ...]:
        return tuple(a for a in self.attrs if not a.required)

    @property
    def option_fields(self) -> Tuple[Union[Input, Attr], ...]:
        """Optional inputs and attributes in options-struct order: by `since`, then inputs
        before attributes, then as written. Fields added later therefore always append."""
        fields = [(e.since, 0, i, e) for i, e in enumerate(self.optional_inputs)]
        fields += [(e.since, 1, i, e) for i, e in enumerate(self.optional_attrs)]
        return tuple(e for *_, e in sorted(fields, key=lambda t: t[:3]))

    @property
    def takes_builder(self) -> bool:
        """Ops without a required tensor input get the builder as their first argument."""
        return not self.required_inputs

    @property
    def returns_list(self) -> bool:
        return len(self.outputs) != 1 or self.outputs[0].is_list

    def type_var(self, name: str) -> Optional[TypeVar]:
        return next((t for t in self.type_vars if t.name == name), None)


@dataclass(frozen=True)
class Project:
    """What VERSION says, and the hand-written C functions with their API versions."""
    version: str = "0.0.0"
    api: int = 1
    core_symbols: Tuple[Tuple[int, str], ...] = ()

    @property
    def version_parts(self) -> Tuple[int, int, int]:
        major, minor, patch = (int(p) for p in self.version.split("."))
        return major, minor, patch


@dataclass(frozen=True)
class OpSet:
    ops: Tuple[OpDef, ...]
    infer_rules: Tuple[str, ...] = field(default=())
    project: Project = field(default_factory=Project)

    def op(self, name: str) -> Optional[OpDef]:
        return next((o for o in self.ops if o.name == name), None)
