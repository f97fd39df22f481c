"""If: both branches become esgraph bodies (outer values are captured automatically); a
condition known while importing keeps only the branch taken. Loop: unrolled while importing,
which needs the trip count and every iteration's condition known then."""
import numpy as np

from ... import _C
from .._sequences import carries_collections, is_collection
from .registry import Unsupported, converts

ops = _C.ops


@converts("If")
def if_(n):
    # Branches that give sequences or optionals are taken while importing: the condition is
    # read when a run brings it.
    if n.known(0) or any(carries_collections(n.attrs[b]) for b in ("then_branch", "else_branch")):
        taken = "then_branch" if bool(np.asarray(n.const(0, "cond")).reshape(-1)[0]) else "else_branch"
        return n.subgraph(taken, inline=True)()
    return ops.if_(n.x(0), n.subgraph("then_branch"), n.subgraph("else_branch"))


MAX_UNROLLED_ITERATIONS = 4096


class _RuntimeCondition(Unsupported):
    """Unrolling cannot go on (a condition known only at run time, or too many iterations);
    without scan outputs the loop becomes a while_ instead."""


@converts("Loop")
def loop(n):
    """Unrolled while importing when the trip count and every condition are known (and always
    for scan outputs, which stack per iteration); otherwise an esgraph while_ whose loop
    values are the iteration number, the condition and the carried values."""
    scan_outputs = n.num_outputs - (n.num_inputs - 2)
    known = all(n.known(i) or not n.has(i) for i in (0, 1))
    # Sequences and optionals carried through the loop are unrolled too: the trip count and
    # the condition are then read when a run brings them.
    collections = carries_collections(n.attrs["body"]) or any(is_collection(n.value(i)) for i in range(2, n.num_inputs))
    if scan_outputs or known or collections:
        try:
            return _unrolled(n)
        except _RuntimeCondition:
            if scan_outputs or collections:
                raise
    return _while_loop(n)


def _unrolled(n):
    trip = int(np.asarray(n.const(0, "M")).reshape(-1)[0]) if n.has(0) else None
    going = bool(np.asarray(n.const(1, "cond")).reshape(-1)[0]) if n.has(1) else True
    carried = [n.value(i) for i in range(2, n.num_inputs)]
    body = n.subgraph("body", inline=True)
    scans, i = None, 0
    if trip is not None and trip > MAX_UNROLLED_ITERATIONS:
        raise _RuntimeCondition(f"more than {MAX_UNROLLED_ITERATIONS} iterations to unroll")
    while going and (trip is None or i < trip):
        if i == MAX_UNROLLED_ITERATIONS:
            raise _RuntimeCondition(f"more than {MAX_UNROLLED_ITERATIONS} iterations to unroll")
        results = body(np.array(i, np.int64), np.array(going), *carried)
        if not isinstance(results[0], np.ndarray):
            raise _RuntimeCondition("a loop condition computed at run time, with scan outputs or sequences (which need unrolling)")
        going = bool(results[0].reshape(-1)[0])
        carried = results[1:1 + len(carried)]
        step = results[1 + len(carried):]
        scans = [[] for _ in step] if scans is None else scans
        for k, v in enumerate(step):
            scans[k].append(v)
        i += 1
    n_scans = n.num_outputs - len(carried)
    if n_scans and not scans:
        raise Unsupported("scan outputs of a loop that runs no iteration")
    stacked = []
    for values in scans or []:
        if all(isinstance(v, np.ndarray) for v in values):
            stacked.append(np.stack(values))
        else:
            stacked.append(ops.concat([ops.unsqueeze(n.tensor(v), [0]) for v in values], 0))
    return carried + stacked


def _while_loop(n):
    body = n.subgraph("body")
    trip = n.x(0)
    start = [n.tensor(np.array(0, np.int64)), n.x(1) if n.has(1) else n.tensor(np.array(True))]
    carried = [n.x(i) for i in range(2, n.num_inputs)]

    def condition(i, going, *values):
        return going if trip is None else ops.logical_and(going, i < trip)

    def step(i, going, *values):
        results = body(i, going, *values)
        return [i + 1, results[0]] + list(results[1:])

    return ops.while_(start + carried, condition, step)[2:]


def _run_scan(body, states, inputs, in_axes, in_dirs):
    """The unrolled steps: (final states, each step's scan outputs)."""
    lengths = {x.shape[a] for x, a in zip(inputs, in_axes)}
    if len(lengths) != 1 or not isinstance(next(iter(lengths)), int):
        raise Unsupported(f"scan inputs of static, equal lengths (got {sorted(map(str, lengths))})")
    length = lengths.pop()
    if length == 0:
        raise Unsupported("a scan over zero steps")
    if length > MAX_UNROLLED_ITERATIONS:
        raise Unsupported(f"more than {MAX_UNROLLED_ITERATIONS} steps to unroll")
    steps = []
    for t in range(length):
        slices = [ops.squeeze(ops.slice(x, [length - 1 - t if d else t], [(length - 1 - t if d else t) + 1], axes=[a]),
                              axes=[a]) for x, a, d in zip(inputs, in_axes, in_dirs)]
        results = body(*states, *slices)
        states = results[:len(states)]
        steps.append(results[len(states):])
    return states, steps


def _stack(n, values, axis, reverse=False):
    values = [n.tensor(v) for v in values]
    if reverse:
        values.reverse()
    axis = axis % (values[0].ndim + 1)
    return ops.concat([ops.unsqueeze(v, [axis]) for v in values], axis)


@converts("Scan")
def scan(n):
    """Unrolled over the (static) scan length: each step's body sees one slice of every scan
    input and the carried state; scan outputs are stacked along their axes. Scan-8 carries a
    leading batch axis, unrolled as well."""
    body = n.subgraph("body", inline=True)
    m = n.attr("num_scan_inputs")
    if n.opset >= 9:
        n_state = n.num_inputs - m
        inputs = [n.x(i) for i in range(n_state, n.num_inputs)]
        in_axes = [a % x.ndim for a, x in zip(n.attr("scan_input_axes", [0] * m), inputs)]
        states, steps = _run_scan(body, [n.value(i) for i in range(n_state)], inputs, in_axes,
                                  n.attr("scan_input_directions", [0] * m))
        k = n.num_outputs - n_state
        out_axes, out_dirs = n.attr("scan_output_axes", [0] * k), n.attr("scan_output_directions", [0] * k)
        return states + [_stack(n, [step[j] for step in steps], out_axes[j], out_dirs[j]) for j in range(k)]
    # Scan-8: (sequence_lens, states..., scan inputs...), every one with a batch axis first.
    if n.has(0):
        raise Unsupported("Scan-8 with sequence_lens")
    n_state = n.num_inputs - 1 - m
    batch = n.shape(1)[0] if n.num_inputs > 1 else None
    if not isinstance(batch, int):
        raise Unsupported("Scan-8 needs a static batch")
    def row(i, b):
        return ops.squeeze(ops.slice(n.x(i), [b], [b + 1], axes=[0]), axes=[0])
    finals, outputs = [], []
    for b in range(batch):
        states, steps = _run_scan(body, [row(1 + i, b) for i in range(n_state)],
                                  [row(1 + n_state + i, b) for i in range(m)], [0] * m, n.attr("directions", [0] * m))
        finals.append(states)
        outputs.append([_stack(n, [step[j] for step in steps], 0) for j in range(n.num_outputs - n_state)])
    return [_stack(n, [f[j] for f in finals], 0) for j in range(n_state)] + \
        [_stack(n, [o[j] for o in outputs], 0) for j in range(n.num_outputs - n_state)]
