"""The compatibility checker: the current op set against every released one.

Each rule below names one way a change breaks callers of an older release: a C symbol or options
field that moves, a Python keyword that disappears, a default that changes what old code
computes, a graph file that no longer loads. Allowed changes — new ops, trailing optional
inputs, attributes with defaults, widened dtypes, enum values and ranges, docs — pass.
Ops marked `experimental` (then or now) are exempt. A violation can be accepted on purpose in
op_defs/history/compat_allowlist.yaml, naming the op, the rule, a reason and an expiry date.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import yaml

from .history import RuleInfo, Snapshot
from .model import DTYPE_GROUPS, DTYPES, Location, OpDef, OpSet

RULES = {
    "op-removed": "an op was removed or renamed",
    "since-edited": "the `since` of an op, input or attribute was edited",
    "since-wrong": "a new op, input or attribute must say `since: <api being developed>`",
    "input-removed": "an input was removed or renamed",
    "input-reordered": "inputs were reordered, or a new input was put before an old one",
    "input-added-required": "a new input is not optional",
    "input-changed": "an input became required or variadic, or stopped being variadic",
    "output-removed": "an output was removed or renamed",
    "output-added": "an output was added",
    "output-changed": "an output's type or count changed",
    "attr-removed": "an attribute was removed or renamed",
    "attr-reordered": "attributes were reordered, or a new attribute was put before an old one",
    "attr-added-required": "a new attribute has no default",
    "attr-became-required": "an attribute lost its default",
    "kind-changed": "an attribute turned into an input, or an input into an attribute",
    "type-changed": "the type of an input, output or attribute changed",
    "dtypes-narrowed": "an input or output accepts fewer dtypes",
    "enum-narrowed": "enum values were removed or reordered",
    "range-narrowed": "an attribute's range was narrowed",
    "default-changed": "an attribute's default changed",
    "subgraph-changed": "a body was removed, renamed, reordered, added or its parameters changed",
    "rule-changed": "the op's inference rule was replaced",
    "rule-not-bumped": "an inference rule's code changed without its version bumped in infer_rules.def",
    "allowlist-expired": "an allowlist entry is past its expiry date",
}


@dataclass(frozen=True)
class Violation:
    loc: Location
    rule: str
    op: str
    message: str
    api: int  # the released version it breaks

    def __str__(self) -> str:
        return f"{self.loc}: [{self.rule}] {self.op}: {self.message} (breaks API {self.api})"


@dataclass(frozen=True)
class AllowEntry:
    op: str
    rule: str
    reason: str
    expires: datetime.date
    loc: Location


class AllowlistError(Exception):
    pass


def read_allowlist(path: Path, display: str) -> List[AllowEntry]:
    if not path.exists():
        return []
    loader = yaml.SafeLoader(path.read_text())
    try:
        root = loader.get_single_node()
        entries = []
        if root is None:
            return []
        top = {k.value: v for k, v in root.value}
        if set(top) != {"allow"}:
            raise AllowlistError(f"{display}:1: the allowlist is a mapping with one key, `allow`")
        for node in top["allow"].value:
            line = node.start_mark.line + 1
            data = loader.construct_object(node, deep=True)
            if not isinstance(data, dict) or set(data) != {"op", "rule", "reason", "expires"}:
                raise AllowlistError(f"{display}:{line}: an entry needs exactly `op`, `rule`, `reason` and `expires`")
            if data["rule"] not in RULES:
                raise AllowlistError(f"{display}:{line}: unknown rule `{data['rule']}` (rules: {', '.join(RULES)})")
            if not isinstance(data["expires"], datetime.date) or not str(data["reason"]).strip():
                raise AllowlistError(f"{display}:{line}: `expires` must be a date (YYYY-MM-DD) and `reason` non-empty")
            entries.append(AllowEntry(data["op"], data["rule"], data["reason"], data["expires"], Location(display, line)))
        return entries
    finally:
        loader.dispose()


def _dtypes(op: OpDef, t: str) -> Optional[frozenset]:
    """The dtypes an input or output type admits; None for `any`, `subgraph` and `attr:`."""
    tv = op.type_var(t)
    if tv is not None:
        return frozenset(tv.dtypes)
    if t in DTYPES:
        return frozenset([t])
    if t in DTYPE_GROUPS:
        return frozenset(DTYPE_GROUPS[t])
    return None


class _OpCheck:
    def __init__(self, old: OpDef, new: OpDef, snap: Snapshot, api: int, latest_api: int, out: List[Violation]):
        self.old, self.new, self.snap, self.api, self.out = old, new, snap, api, out
        self.latest_api = latest_api  # elements absent from this release are the new ones

    def flag(self, rule: str, message: str, loc: Optional[Location] = None) -> None:
        self.out.append(Violation(loc or self.new.loc, rule, self.new.name, message, self.snap.api))

    def run(self, rules_now: Dict[str, RuleInfo]) -> None:
        old, new = self.old, self.new
        if old.since != new.since:
            self.flag("since-edited", f"`since` was {old.since}, is {new.since}")
        self.inputs()
        self.outputs()
        self.attrs()
        self.subgraphs()
        if old.infer != new.infer:
            self.flag("rule-changed", f"inference rule `{old.infer}` became `{new.infer}`")
        else:
            then, now = self.snap.rules.get(old.infer), rules_now.get(new.infer)
            if then and now and then.version == now.version and then.code_hash != now.code_hash:
                self.flag("rule-not-bumped", f"the code of rule `{new.infer}` changed since API {self.snap.api} "
                                             f"but its version is still {now.version}; bump it in infer_rules.def")

    def _since(self, old_el, new_el, what: str) -> None:
        if old_el.since != new_el.since:
            self.flag("since-edited", f"`since` of {what} was {old_el.since}, is {new_el.since}", new_el.loc)

    def _new_since(self, el, what: str) -> None:
        if self.snap.api == self.latest_api and el.since != self.api:
            self.flag("since-wrong", f"{what} is new since API {self.snap.api}; it needs `since: {self.api}`", el.loc)

    def inputs(self) -> None:
        old, new = self.old, self.new
        new_names = [i.name for i in new.inputs]
        new_attrs = {a.name for a in new.attrs}
        for pos, oi in enumerate(old.inputs):
            if oi.name not in new_names:
                rule = "kind-changed" if oi.name in new_attrs else "input-removed"
                self.flag(rule, f"input `{oi.name}` of API {self.snap.api} is gone" +
                          (" (it is an attribute now)" if rule == "kind-changed" else ""))
                continue
            ni = new.inputs[new_names.index(oi.name)]
            if new_names.index(oi.name) != pos:
                self.flag("input-reordered", f"input `{oi.name}` moved from position {pos} to {new_names.index(oi.name)}", ni.loc)
            if oi.optional and not ni.optional:
                self.flag("input-changed", f"input `{oi.name}` was optional and is required now", ni.loc)
            if oi.variadic != ni.variadic:
                self.flag("input-changed", f"input `{oi.name}` {'stopped being' if oi.variadic else 'became'} variadic", ni.loc)
            self._types(oi.type, ni.type, old, new, f"input `{oi.name}`", ni.loc)
            self._since(oi, ni, f"input `{oi.name}`")
        old_names = {i.name for i in old.inputs}
        for pos, ni in enumerate(new.inputs):
            if ni.name in old_names:
                continue
            if ni.name in {a.name for a in old.attrs}:
                self.flag("kind-changed", f"attribute `{ni.name}` of API {self.snap.api} is an input now", ni.loc)
                continue
            if not ni.optional:
                self.flag("input-added-required", f"new input `{ni.name}` must be optional", ni.loc)
            if pos < len(old.inputs):
                self.flag("input-reordered", f"new input `{ni.name}` comes before old ones; add inputs at the end", ni.loc)
            self._new_since(ni, f"input `{ni.name}`")

    def _types(self, t_old: str, t_new: str, old: OpDef, new: OpDef, what: str, loc: Location) -> None:
        d_old, d_new = _dtypes(old, t_old), _dtypes(new, t_new)
        if d_old is None or d_new is None:
            if t_old != t_new:
                self.flag("type-changed", f"{what} was of type `{t_old}`, is `{t_new}`", loc)
            return
        if not d_old <= d_new:
            self.flag("dtypes-narrowed", f"{what} no longer accepts {', '.join(sorted(d_old - d_new))}", loc)

    def outputs(self) -> None:
        old, new = self.old, self.new
        new_by = {o.name: o for o in new.outputs}
        for pos, oo in enumerate(old.outputs):
            no = new_by.get(oo.name)
            if no is None:
                self.flag("output-removed", f"output `{oo.name}` of API {self.snap.api} is gone")
                continue
            if new.outputs.index(no) != pos or oo.count != no.count:
                self.flag("output-changed", f"output `{oo.name}` changed position or count", no.loc)
            # An output typed by a type variable follows the inputs (whose dtypes are checked
            # there); any other change of an output's type changes what old callers receive.
            by_var = old.type_var(oo.type) is not None and new.type_var(no.type) is not None
            if not by_var and oo.type != no.type:
                self.flag("output-changed", f"output `{oo.name}` was of type `{oo.type}`, is `{no.type}`", no.loc)
        for no in new.outputs:
            if no.name not in {o.name for o in old.outputs}:
                self.flag("output-added", f"new output `{no.name}` changes what the op returns", no.loc)

    def attrs(self) -> None:
        old, new = self.old, self.new
        new_by = {a.name: a for a in new.attrs}
        new_inputs = {i.name for i in new.inputs}
        for pos, oa in enumerate(old.attrs):
            na = new_by.get(oa.name)
            if na is None:
                if oa.name not in new_inputs:  # an input now: reported with the inputs
                    self.flag("attr-removed", f"attribute `{oa.name}` of API {self.snap.api} is gone")
                continue
            what = f"attribute `{oa.name}`"
            # The core's typed views (generated from the current op set) read attributes by
            # position, and a library built from an older op set lays them out in its order.
            if new.attrs.index(na) != pos:
                self.flag("attr-reordered", f"{what} moved from position {pos} to {new.attrs.index(na)}; "
                                            f"add attributes at the end", na.loc)
            if oa.type != na.type:
                self.flag("type-changed", f"{what} was `{oa.type}`, is `{na.type}`", na.loc)
                continue
            if not oa.required and na.required:
                self.flag("attr-became-required", f"{what} lost its default", na.loc)
            elif not oa.required and oa.default != na.default:
                self.flag("default-changed", f"the default of {what} was {oa.default!r}, is {na.default!r}", na.loc)
            if oa.values and na.values[:len(oa.values)] != oa.values:
                self.flag("enum-narrowed", f"{what} had values {list(oa.values)}, has {list(na.values)}; "
                                           f"only appending keeps the C enum codes", na.loc)
            if oa.range or na.range:
                lo_o, hi_o = oa.range or (None, None)
                lo_n, hi_n = na.range or (None, None)
                if (lo_n is not None and (lo_o is None or lo_n > lo_o)) or (hi_n is not None and (hi_o is None or hi_n < hi_o)):
                    self.flag("range-narrowed", f"the range of {what} was [{lo_o}, {hi_o}], is [{lo_n}, {hi_n}]", na.loc)
            self._since(oa, na, what)
        old_names = {a.name for a in old.attrs}
        old_inputs = {i.name for i in old.inputs}
        for na in new.attrs:
            if na.name in old_names:
                continue
            if na.name in old_inputs:
                self.flag("kind-changed", f"input `{na.name}` of API {self.snap.api} is an attribute now", na.loc)
                continue
            if na.required:
                self.flag("attr-added-required", f"new attribute `{na.name}` needs a default", na.loc)
            self._new_since(na, f"attribute `{na.name}`")

    def subgraphs(self) -> None:
        old = [(s.name, s.params) for s in self.old.subgraphs]
        new = [(s.name, s.params) for s in self.new.subgraphs]
        if old != new:
            self.flag("subgraph-changed", f"bodies were {old}, are {new}")


def check(current: OpSet, rules_now: Dict[str, RuleInfo], history: Sequence[Snapshot], api: int) -> List[Violation]:
    """Every way `current` breaks a recorded op set."""
    out: List[Violation] = []
    latest = max((s.api for s in history), default=0)
    for snap in history:
        for old in snap.opset.ops:
            new = current.op(old.name)
            if old.status == "experimental" or (new is not None and new.status == "experimental"):
                continue
            if new is None:
                out.append(Violation(old.loc, "op-removed", old.name,
                                     f"op `{old.name}` of API {snap.api} is gone from op_defs/", snap.api))
                continue
            _OpCheck(old, new, snap, api, latest, out).run(rules_now)
    if history:
        known = {op.name for op in history[-1].opset.ops}
        for op in current.ops:
            if op.name not in known and op.since != api and op.status != "experimental":
                out.append(Violation(op.loc, "since-wrong", op.name,
                                     f"op `{op.name}` is new since API {latest}; it needs `since: {api}`", latest))
    return out


def apply_allowlist(violations: Iterable[Violation], allow: Sequence[AllowEntry],
                    today: datetime.date) -> Tuple[List[Violation], List[Violation]]:
    """(violations still standing, including expired entries; violations allowed)."""
    standing, allowed = [], []
    for e in allow:
        if e.expires < today:
            standing.append(Violation(e.loc, "allowlist-expired", e.op,
                                      f"the entry for rule `{e.rule}` expired on {e.expires} ({e.reason})", 0))
    live = [e for e in allow if e.expires >= today]
    for v in violations:
        (allowed if any(e.op == v.op and e.rule == v.rule for e in live) else standing).append(v)
    return standing, allowed
