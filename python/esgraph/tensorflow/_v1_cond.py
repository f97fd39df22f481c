"""TF1's conditionals, as `convert_variables_to_constants_v2` lowers tf.cond by default: a
Switch sends its data to one of two outputs by a predicate, each branch computes from one, and
a Merge passes on whichever branch ran.

Both branches are computed here, and each Merge selects: Switch passes its data to both outputs,
what a branch computes carries a guard (the (predicate, branch) pairs it lies under, from its
inputs and its control inputs, as a branch's constants hang on its pivot), and a Merge of the two
branches of one predicate is where(predicate, true branch, false branch). Exact for branches that
compute (as inference graphs' do); a branch that would fail on the data of the other is not
guarded. TF1's loops are _v1_loop.py's."""
import numpy as np

from .. import _C
from ._layout import Nchw
from ._refs import POISONED, parse_ref, tensor_key

ops = _C.ops


def _key(ref):
    name, _, control = parse_ref(ref)
    return name, tensor_key(ref), control


def guard_of(importer, proto):
    """The longest guard among the node's inputs and control inputs (nested conditionals extend
    the outer one)."""
    best = ()
    for ref in proto.input:
        name, key, control = _key(ref)
        guard = importer.node_guards.get(name, ()) if control else importer.guards.get(key, ())
        if len(guard) > len(best):
            best = guard
    return best


def convert(importer, proto):
    """A Switch or a Merge."""
    keys = [_key(r)[1] for r in proto.input if not r.startswith("^")]
    missing = [k for k in keys if k not in importer.values]
    if missing:
        return importer._fail(proto, f"reads '{missing[0]}', which no node of the graph makes")
    if any(importer.values[k] is POISONED for k in keys):
        return importer._poison(proto)
    guard = guard_of(importer, proto)
    if proto.op == "Switch":
        if len(keys) != 2:
            return importer._fail(proto, f"a Switch of {len(keys)} inputs (it takes data and a predicate)")
        data, predicate = keys
        for branch in (0, 1):  # output 0 is the false branch, output 1 the true one
            importer.values[f"{proto.name}:{branch}"] = importer.values[data]
            importer.guards[f"{proto.name}:{branch}"] = guard + ((predicate, bool(branch)),)
        importer.node_guards[proto.name] = guard
        return None
    # Merge: the last pair of its inputs' guards names the predicate and the branch of each.
    guards = [importer.guards.get(k, ()) for k in keys]
    if len(keys) != 2 or not all(guards) or guards[0][-1][0] != guards[1][-1][0] or guards[0][-1][1] == guards[1][-1][1]:
        return importer._fail(proto, "a Merge that is not of the two branches of one Switch (a v1 loop's, or another form)")
    predicate = guards[0][-1][0]
    true_input = 0 if guards[0][-1][1] else 1
    outer = guards[0][:-1]
    on_true, on_false = importer.values[keys[true_input]], importer.values[keys[1 - true_input]]
    condition = importer.values[predicate]
    if isinstance(condition, Nchw) or any(d != 1 for d in condition.shape):
        return importer._fail(proto, f"its Switch's predicate is not one boolean (shape {tuple(condition.shape)})")
    if isinstance(condition, np.ndarray):  # known while importing: the branch taken
        taken = bool(condition.reshape(-1)[0])
        value, index = (on_true, true_input) if taken else (on_false, 1 - true_input)
        importer.values[f"{proto.name}:0"], importer.values[f"{proto.name}:1"] = value, np.array(index, np.int32)
    else:
        condition = ops.reshape(condition, []) if condition.ndim else condition
        if isinstance(on_true, Nchw) and isinstance(on_false, Nchw):
            value = Nchw(ops.where(condition, on_true.tensor, on_false.tensor))
        else:
            value = ops.where(condition, importer.tf_layout(on_true), importer.tf_layout(on_false))
        index = ops.where(condition, importer.as_tensor(np.array(true_input, np.int32)),
                          importer.as_tensor(np.array(1 - true_input, np.int32)))
        importer.values[f"{proto.name}:0"], importer.values[f"{proto.name}:1"] = value, index
    for k in (0, 1):
        if outer:
            importer.guards[f"{proto.name}:{k}"] = outer
    if outer:
        importer.node_guards[proto.name] = outer
    return None
