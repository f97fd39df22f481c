"""What esgraph assumes of CANN's C interface, checked against CANN's own headers.

esgraph declares the AscendCL, aclnn and HCCL functions it loads itself (so that nothing of CANN
is needed to build), and its simulated device is declared from the same tables, so nothing else
would notice a parameter of the wrong width or an enum value that moved. This parses both sides
with libclang, the way a compiler sees them (typedefs resolved), and compares:

- every function esgraph loads: its return type, and its parameters' number, order, kind and
  width. A pointer matches a pointer whose target matches; `void*` matches any pointer, and an
  opaque struct matches an opaque struct (esgraph's handles are its own types). An enum matches
  an integer or enum of its width;
- every constant esgraph passes or compares, by value;
- every struct esgraph lays out as CANN does: its size, and each field's offset, kind and width.

esgraph's side is compiler_core/ascend/cann_interface.hpp (shipped in this package); CANN's is
a folder of its headers: an installation's `$ASCEND_HOME_PATH/include`, or any folder laid out
the same way (`scripts/cann-headers.sh` assembles one from CANN's public sources).

    python3 -m esgraph cann-headers [--cann-include DIR]
"""
import ctypes
import dataclasses
import functools
import os
import re
import shutil
import subprocess

# Where esgraph's side is: the package's copy of the backend's declarations.
OUR_INCLUDE = os.path.join(os.path.dirname(__file__), "_cann_interface")


class CannHeadersError(Exception):
    """The check cannot run: no libclang, or no headers where it looked."""


@dataclasses.dataclass(frozen=True)
class Finding:
    name: str    # CANN's name of the function, constant or struct
    detail: str  # what differs, or why it was not compared


@dataclasses.dataclass
class HeaderCheck:
    include: str
    compared: list = dataclasses.field(default_factory=list)      # names found on both sides and equal
    differences: list = dataclasses.field(default_factory=list)   # Findings: what differs
    undeclared: list = dataclasses.field(default_factory=list)    # names these headers do not declare
    unreadable: list = dataclasses.field(default_factory=list)    # declared where the headers did not parse
    problems: list = dataclasses.field(default_factory=list)      # the headers' own parse errors

    @property
    def passed(self):
        return not self.differences

    def table(self):
        lines = [f"CANN headers: {self.include}",
                 f"  {len(self.compared)} equal, {len(self.differences)} different, "
                 f"{len(self.undeclared)} not declared there, {len(self.unreadable)} unreadable"]
        lines += [f"  DIFFERENT {f.name}: {f.detail}" for f in self.differences]
        if self.undeclared:
            lines.append("  not declared: " + ", ".join(self.undeclared))
        if self.unreadable:
            lines.append("  unreadable (a type in the declaration did not parse): " + ", ".join(self.unreadable))
        lines += [f"  parse error: {p}" for p in self.problems]
        return "\n".join(lines) + "\n"


def _cindex():
    try:
        from clang import cindex
        cindex.Index.create()
        # Whether a declaration names a type the parse could not resolve (libclang has it; its
        # Python bindings do not declare it).
        invalid = cindex.conf.lib.clang_isInvalidDeclaration
        invalid.argtypes, invalid.restype = [cindex.Cursor], ctypes.c_uint
    except Exception as e:  # the module, or the libclang it loads
        raise CannHeadersError(f"the header check needs libclang's Python bindings (Debian: python3-clang): {e}") from e
    return cindex


def _invalid(cindex, cursor):
    return bool(cindex.conf.lib.clang_isInvalidDeclaration(cursor))


# ---- types as a compiler sees them: kind and width, typedefs resolved -------------------------

def _shape(cindex, t):
    """A type as a comparable tuple: ("int", bits, signed), ("enum", bits), ("float", bits),
    ("void",), ("pointer", target), ("struct", bytes or None when opaque), ("array", n, element),
    ("function",)."""
    K = cindex.TypeKind
    t = t.get_canonical()
    if t.kind == K.POINTER:
        return ("pointer", _shape(cindex, t.get_pointee()))
    if t.kind == K.VOID:
        return ("void",)
    if t.kind == K.ENUM:
        return ("enum", 8 * t.get_size())
    if t.kind in (K.FLOAT, K.DOUBLE, K.LONGDOUBLE, K.HALF):
        return ("float", 8 * t.get_size())
    if t.kind == K.BOOL:
        return ("int", 8 * t.get_size(), False)
    if t.kind in (K.CHAR_S, K.SCHAR, K.SHORT, K.INT, K.LONG, K.LONGLONG, K.INT128, K.WCHAR):
        return ("int", 8 * t.get_size(), True)
    if t.kind in (K.CHAR_U, K.UCHAR, K.USHORT, K.UINT, K.ULONG, K.ULONGLONG, K.UINT128, K.CHAR16, K.CHAR32):
        return ("int", 8 * t.get_size(), False)
    if t.kind == K.CONSTANTARRAY:
        return ("array", t.get_array_size(), _shape(cindex, t.get_array_element_type()))
    if t.kind == K.RECORD:
        size = t.get_size()
        return ("struct", size if size > 0 else None)
    if t.kind in (K.FUNCTIONPROTO, K.FUNCTIONNOPROTO):
        return ("function",)
    return (t.kind.name.lower(),)


def _spell(shape):
    kind = shape[0]
    if kind == "int":
        return ("i" if shape[2] else "u") + str(shape[1])
    if kind in ("enum", "float"):
        return f"{kind}{shape[1]}"
    if kind == "pointer":
        return _spell(shape[1]) + "*"
    if kind == "struct":
        return "struct" if shape[1] is None else f"struct of {shape[1]} bytes"
    if kind == "array":
        return f"{_spell(shape[2])}[{shape[1]}]"
    return kind


def _same(ours, theirs, behind_pointer=False):
    """Whether two shapes are the same to the machine (see the module's rules)."""
    if ours[0] == "pointer" and theirs[0] == "pointer":
        a, b = ours[1], theirs[1]
        if a == ("void",) or b == ("void",):
            return True
        return _same(a, b, behind_pointer=True)
    if {ours[0], theirs[0]} <= {"enum", "int"} and "enum" in (ours[0], theirs[0]):
        return ours[1] == theirs[1]
    if ours[0] == "struct" and theirs[0] == "struct" and behind_pointer:
        return True  # handles: each side's own opaque type
    if ours[0] == "array" and theirs[0] == "array":
        return ours[1] == theirs[1] and _same(ours[2], theirs[2])
    return ours == theirs


# ---- the two sides -----------------------------------------------------------------------------

# esgraph's side: the tables of cann_interface.hpp made visible to libclang by name.
_OURS = """
#include "ascend/cann_interface.hpp"
namespace esg_check {
#define ESG_CHECK_VALUE(name, value) name = (long long)(value),
enum values : long long { ESG_CANN_CONSTANTS(ESG_CHECK_VALUE) };
#define ESG_CHECK_STRUCT(name, type) using name = type;
ESG_CANN_STRUCTS(ESG_CHECK_STRUCT)
}
"""
_SIDES = ("acl_side", "aclnn_side", "hccl_side")


@functools.lru_cache(maxsize=None)
def _builtin_headers():
    """libclang's argument naming its builtin headers (stddef.h, ...): those of the machine's
    clang. The libclang of PyPI's `libclang` wheel (a TensorFlow dependency, whose `clang`
    module comes before Debian's) ships none; Debian's finds its own, the same ones."""
    clang = shutil.which("clang")
    if clang is None:
        return []
    try:
        found = subprocess.run([clang, "-print-resource-dir"], capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return []
    return [f"-resource-dir={found}"] if found and os.path.isdir(os.path.join(found, "include")) else []


def _parse(cindex, text, include_dirs, language="c++"):
    tu = cindex.Index.create().parse(
        "esg_check.cpp", args=["-x", language, "-std=c++17" if language == "c++" else "-std=c11"] +
        _builtin_headers() + [f"-I{d}" for d in include_dirs],
        unsaved_files=[("esg_check.cpp", text)],
        options=cindex.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD | cindex.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES)
    errors = [f"{d.location.file}:{d.location.line}: {d.spelling}" if d.location.file else d.spelling
              for d in tu.diagnostics if d.severity >= cindex.Diagnostic.Error]
    return tu, errors


def _children(cursor, *path):
    """The declarations in the namespace at `path` under `cursor`, over all its openings."""
    level = [cursor]
    for name in path:
        level = [c for parent in level for c in parent.get_children() if c.spelling == name]
    return [c for namespace in level for c in namespace.get_children()]


def _function(cindex, cursor):
    return (_shape(cindex, cursor.result_type), [_shape(cindex, a.type) for a in cursor.get_arguments()])


def _fields(cindex, t):
    """A struct's size and its fields as (name, offset in bytes, shape)."""
    t = t.get_canonical()
    return t.get_size(), [(f.spelling, f.get_field_offsetof() // 8, _shape(cindex, f.type)) for f in t.get_fields()]


def ours(cindex=None):
    """esgraph's side: {"functions": name -> (result, [params]), "constants": name -> value,
    "structs": name -> (size, fields)}."""
    cindex = cindex or _cindex()
    tu, errors = _parse(cindex, _OURS, [OUR_INCLUDE])
    if errors:
        raise CannHeadersError("esgraph's own declarations do not parse: " + "; ".join(errors[:3]))
    functions = {}
    for side in _SIDES:
        for c in _children(tu.cursor, "esg", "ascend", "cann", side):
            if c.kind == cindex.CursorKind.FUNCTION_DECL:
                functions[c.spelling] = _function(cindex, c)
    constants, structs = {}, {}
    for c in _children(tu.cursor, "esg_check"):
        if c.kind == cindex.CursorKind.ENUM_DECL:
            constants = {e.spelling: e.enum_value for e in c.get_children()}
        elif c.kind == cindex.CursorKind.TYPE_ALIAS_DECL:
            structs[c.spelling] = _fields(cindex, c.underlying_typedef_type)
    return {"functions": functions, "constants": constants, "structs": structs}


def _headers_naming(include, names):
    """The headers under `include` that mention any of `names`, relative to it, sorted."""
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\b")
    found = []
    for root, _, files in os.walk(include):
        for f in files:
            if f.endswith((".h", ".hpp")):
                path = os.path.join(root, f)
                with open(path, errors="replace") as text:
                    if pattern.search(text.read()):
                        found.append(os.path.relpath(path, include))
    return sorted(found)


def theirs(include, names, cindex=None):
    """CANN's side for `names` (ours()'s): the same dict, of what the headers under `include`
    declare, with "unreadable": the names whose declarations did not parse; and the headers'
    own parse errors."""
    cindex = cindex or _cindex()
    wanted = set(names["functions"]) | set(names["constants"]) | set(names["structs"])
    # The headers that declare the functions and structs; their constants come with them (a
    # constant's name also appears in the comments of every header whose functions return it).
    headers = _headers_naming(include, set(names["functions"]) | set(names["structs"]))
    if not headers:
        raise CannHeadersError(f"no header under {include} declares any function esgraph loads")
    # In CANN's order of use: its headers include the C standard ones only where they start.
    text = "#include <stddef.h>\n#include <stdint.h>\n" + "".join(f'#include "{h}"\n' for h in headers)
    tu, problems = _parse(cindex, text, [include])
    functions, declared_values, structs, unreadable = {}, set(), {}, set()
    for c in tu.cursor.walk_preorder():
        name = c.spelling
        if name not in wanted:
            continue
        if c.kind == cindex.CursorKind.FUNCTION_DECL and c.linkage != cindex.LinkageKind.EXTERNAL:
            continue  # a C++ convenience overload (static inline), not what the library exports
        if c.kind in (cindex.CursorKind.FUNCTION_DECL, cindex.CursorKind.TYPEDEF_DECL) and _invalid(cindex, c):
            unreadable.add(name)
        elif c.kind == cindex.CursorKind.FUNCTION_DECL and name in names["functions"]:
            functions[name] = _function(cindex, c)
        elif c.kind in (cindex.CursorKind.ENUM_CONSTANT_DECL, cindex.CursorKind.VAR_DECL,
                        cindex.CursorKind.MACRO_DEFINITION) and name in names["constants"]:
            declared_values.add(name)
        elif c.kind in (cindex.CursorKind.TYPEDEF_DECL, cindex.CursorKind.STRUCT_DECL) and name in names["structs"]:
            if c.type.get_canonical().get_size() > 0:
                structs[name] = _fields(cindex, c.type)
    constants = {}
    if declared_values:
        # The values as the compiler computes them, whether enumerators, constants or macros.
        text += "enum esg_check_values : long long {\n" + "".join(
            f"  esg_check_{n} = (long long)({n}),\n" for n in sorted(declared_values)) + "};\n"
        tu, _ = _parse(cindex, text, [include])
        for c in tu.cursor.get_children():
            if c.kind == cindex.CursorKind.ENUM_DECL and c.spelling == "esg_check_values":
                constants = {e.spelling[len("esg_check_"):]: e.enum_value for e in c.get_children()}
    return {"functions": functions, "constants": constants, "structs": structs, "unreadable": unreadable}, problems


# ---- the comparison ----------------------------------------------------------------------------

def _compare_function(name, ours_fn, theirs_fn):
    (our_result, our_params), (their_result, their_params) = ours_fn, theirs_fn
    out = []
    if not _same(our_result, their_result):
        out.append(f"returns {_spell(their_result)}, esgraph expects {_spell(our_result)}")
    if len(our_params) != len(their_params):
        out.append(f"takes {len(their_params)} parameters, esgraph passes {len(our_params)}")
    for i, (a, b) in enumerate(zip(our_params, their_params)):
        if not _same(a, b):
            out.append(f"parameter {i + 1} is {_spell(b)}, esgraph passes {_spell(a)}")
    return [Finding(name, d) for d in out]


def _compare_struct(name, ours_struct, theirs_struct):
    (our_size, our_fields), (their_size, their_fields) = ours_struct, theirs_struct
    out = []
    if our_size != their_size:
        out.append(f"is {their_size} bytes, esgraph lays out {our_size}")
    if len(our_fields) != len(their_fields):
        out.append(f"has {len(their_fields)} fields, esgraph lays out {len(our_fields)}")
    for (our_name, our_at, a), (their_name, their_at, b) in zip(our_fields, their_fields):
        if our_at != their_at or not _same(a, b):
            out.append(f"field {their_name} is {_spell(b)} at byte {their_at}, esgraph's {our_name} is "
                       f"{_spell(a)} at byte {our_at}")
    return [Finding(name, d) for d in out]


def check(include=None):
    """Compares esgraph's side with the headers under `include` (default
    `$ASCEND_HOME_PATH/include`); a HeaderCheck."""
    if include is None:
        home = os.environ.get("ASCEND_HOME_PATH")
        if not home:
            raise CannHeadersError("no headers to check: give --cann-include DIR, or set ASCEND_HOME_PATH")
        include = os.path.join(home, "include")
    if not os.path.isdir(include):
        raise CannHeadersError(f"no such folder of CANN headers: {include}")
    cindex = _cindex()
    mine = ours(cindex)
    cann, problems = theirs(include, mine, cindex)
    result = HeaderCheck(include=include, problems=problems)
    for kind, compare in (("functions", _compare_function), ("structs", _compare_struct)):
        for name, ours_decl in sorted(mine[kind].items()):
            if name in cann["unreadable"] or name not in cann[kind]:
                (result.unreadable if name in cann["unreadable"] else result.undeclared).append(name)
                continue
            found = compare(name, ours_decl, cann[kind][name])
            (result.differences.extend(found) if found else result.compared.append(name))
    for name, value in sorted(mine["constants"].items()):
        if name not in cann["constants"]:
            result.undeclared.append(name)
        elif cann["constants"][name] != value:
            result.differences.append(Finding(name, f"is {cann['constants'][name]}, esgraph uses {value}"))
        else:
            result.compared.append(name)
    return result
