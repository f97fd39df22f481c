"""StridedSlice's operands and masks as the numpy index they stand for, which both the tensor
converter (shape.py) and the one on symbolic sizes (sizes.py) apply."""
from .registry import Unsupported

_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def slice_spec(n, rank):
    """A tuple of one entry per input axis and new axis, in order: a slice (None where a mask
    says "from the start" or "to the end"), an int (one element, the axis dropped), or None (a
    new axis). The ellipsis, explicit or implied at the end, stands for the axes no entry names."""
    begin, end, strides = n.ints(1, "begin"), n.ints(2, "end"), n.ints(3, "strides")
    if not len(begin) == len(end) == len(strides):
        raise Unsupported(f"begin, end and strides of {len(begin)}, {len(end)} and {len(strides)} entries")
    masks = {k: n.attr(k, 0) for k in _MASKS}
    bit = lambda mask, i: (masks[mask] >> i) & 1  # noqa: E731
    named = sum(1 for i in range(len(begin)) if not bit("ellipsis_mask", i) and not bit("new_axis_mask", i))
    spec, ellipsis = [], False
    for i in range(len(begin)):
        if bit("ellipsis_mask", i):
            if ellipsis:
                raise Unsupported("two ellipses")
            ellipsis = True
            spec += [slice(None)] * (rank - named)
        elif bit("new_axis_mask", i):
            spec.append(None)
        elif bit("shrink_axis_mask", i):
            spec.append(begin[i])
        else:
            if strides[i] == 0:
                raise Unsupported("a stride of 0")
            spec.append(slice(None if bit("begin_mask", i) else begin[i], None if bit("end_mask", i) else end[i], strides[i]))
    spec += [slice(None)] * (rank - sum(1 for s in spec if s is not None))
    if sum(1 for s in spec if s is not None) != rank:
        raise Unsupported(f"slice entries {begin} for a rank-{rank} input")
    return tuple(spec)
