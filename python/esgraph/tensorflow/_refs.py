"""How a GraphDef names tensors, and the value of one whose node failed."""


class _Poisoned:
    """The output of a node that failed to convert; its consumers are skipped silently."""


POISONED = _Poisoned()


def parse_ref(ref):
    """A NodeDef input, "name", "name:k" or "^name" (a control input), as (name, k, control)."""
    if ref.startswith("^"):
        return ref[1:], 0, True
    name, _, index = ref.rpartition(":")
    if name and index.isdigit():
        return name, int(index), False
    return ref, 0, False


def tensor_key(ref):
    name, index, _ = parse_ref(ref)
    return f"{name}:{index}"
