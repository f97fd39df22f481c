"""TF1's while loops, as `convert_variables_to_constants_v2` lowers tf.while_loop by default:
per loop variable an Enter (its initial value) feeds a Merge with the NextIteration that brings
the next value around; the condition reads the Merges and ends in a LoopCond; a Switch on it
passes each value to the body (output 1) or out through an Exit (output 0). Values the loop
only reads enter through Enters marked is_constant.

Each loop (a frame, named by its Enters) becomes one node of its own here, `_EsgV1While`, whose
inputs are the loop variables' initial values and whose outputs the Exits read: the graph
outside has no cycle left. It converts to esgraph's while: the condition is the subgraph from
the Merges to the LoopCond, the body the one from the Switches' outputs to the NextIterations,
each converted on the loop values (`Importer.subgraph`)."""
from . import _schema
from ._refs import parse_ref

OP = "_EsgV1While"


class Loop:
    """One frame: per loop variable its Merge, Switch and NextIteration, and the LoopCond."""

    def __init__(self, merges, switches, nexts, loop_cond):
        self.merges, self.switches, self.nexts, self.loop_cond = merges, switches, nexts, loop_cond


class Malformed(Exception):
    """A frame whose nodes do not make the lowered loop's pattern."""


def rewrite(nodes):
    """`nodes` ({name: NodeDef}) with each frame replaced: a `_EsgV1While` node in its place,
    each Exit an Identity of its output. Returns (nodes, {loop node name: Loop}, {Enter name:
    (where, why)} for the frames that are not a lowered loop, left as they are: reported if the
    outputs reach them)."""
    readers = {}
    for node in nodes.values():
        for ref in node.input:
            readers.setdefault(parse_ref(ref)[0], []).append(node)
    frames = {}
    for node in nodes.values():
        if node.op == "Enter" and not (node.attr["is_constant"].b if "is_constant" in node.attr else False):
            frames.setdefault(node.attr["frame_name"].s.decode("utf-8", "replace"), []).append(node)
    nodes, loops, malformed = dict(nodes), {}, {}
    for frame, enters in sorted(frames.items()):
        try:
            loops[_loop_name(frame)] = _rewrite_frame(nodes, readers, frame, enters)
        except Malformed as e:
            for enter in enters:
                malformed[enter.name] = (f"while loop '{frame}'", str(e))
    return nodes, loops, malformed


def _loop_name(frame):
    return f"{frame}/__esgraph_while"


def _only(nodes, op, what):
    found = [n for n in nodes if n.op == op]
    if len(found) != 1:
        raise Malformed(f"{what}: {len(found)} {op} nodes where the lowered loop has one")
    return found[0]


def _inputs(node):
    return [r for r in node.input if not r.startswith("^")]


def _rewrite_frame(nodes, readers, frame, enters):
    merges, switches, nexts, exits, loop_conds = [], [], [], [], set()
    for enter in enters:
        if len(_inputs(enter)) != 1:
            raise Malformed(f"Enter '{enter.name}' has {len(_inputs(enter))} inputs")
        merge = _only(readers.get(enter.name, []), "Merge", f"Enter '{enter.name}'")
        # The Switch on the LoopCond (TF1's own condition may switch on a Merge too, for a tf.cond).
        switch = _only([n for n in readers.get(merge.name, []) if n.op == "Switch" and len(_inputs(n)) == 2
                        and parse_ref(n.input[1])[0] in nodes and nodes[parse_ref(n.input[1])[0]].op == "LoopCond"],
                       "Switch", f"Merge '{merge.name}'")
        sources = [parse_ref(r)[0] for r in _inputs(merge)]
        after = [nodes[s] for s in sources if s in nodes and nodes[s].op == "NextIteration"]
        if len(sources) != 2 or len(after) != 1 or len(_inputs(after[0])) != 1:
            raise Malformed(f"Merge '{merge.name}' does not join its Enter and one NextIteration")
        merges.append(merge)
        switches.append(switch)
        nexts.append(after[0])
        exits.append([n for n in readers.get(switch.name, []) if n.op == "Exit"])
        loop_conds.add(parse_ref(switch.input[1])[0])
    if len(loop_conds) != 1:
        raise Malformed(f"its Switches read {len(loop_conds)} LoopConds")
    loop_cond = nodes[next(iter(loop_conds))]
    if len(_inputs(loop_cond)) != 1:
        raise Malformed(f"LoopCond '{loop_cond.name}' has {len(_inputs(loop_cond))} inputs")
    loop = _schema.NodeDef(name=_loop_name(frame), op=OP)
    loop.input.extend(enter.input[0] for enter in enters)
    nodes[loop.name] = loop
    for k, readers_out in enumerate(exits):
        for exit_node in readers_out:
            identity = _schema.NodeDef(name=exit_node.name, op="Identity")
            identity.input.append(f"{loop.name}:{k}")
            nodes[exit_node.name] = identity
    return Loop(merges, switches, nexts, loop_cond)
