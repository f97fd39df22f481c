"""Tensors crossing between PyTorch and esgraph by DLPack, without copies where the layout allows.

numpy has no bfloat16: a bf16 tensor crosses as its bit patterns (int16 in DLPack, uint16 in
the numpy array esgraph reads, as esgraph's Python API takes bf16), and comes back the same
way. A tensor that is not contiguous (channels_last, a transposed view) is made contiguous
first: esgraph's kernels read dense row-major buffers. Every output is a new buffer that
esgraph hands over and never reuses.
"""
import numpy as np
import torch


def to_esgraph(t):
    """A CPU tensor as a numpy array over the same memory."""
    if t.device.type != "cpu":
        raise ValueError(f"an input on {t.device}: esgraph takes CPU tensors (its Ascend backend copies them itself)")
    t = t.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return np.from_dlpack(t.view(torch.int16)).view(np.uint16)
    return np.from_dlpack(t)


def to_torch(a, dtype):
    """esgraph's output array as a tensor of `dtype` over the same memory (bf16 from its bits).
    An output esgraph holds read-only (a constant of the graph) is copied: DLPack cannot mark
    a tensor read-only, and the caller may write to what it is given."""
    if not a.flags.writeable:
        a = a.copy()
    if dtype == torch.bfloat16:
        return torch.from_dlpack(a.view(np.int16)).view(torch.bfloat16)
    t = torch.from_dlpack(a)
    if dtype is not None and t.dtype != dtype:  # a converter's result of another dtype than PyTorch's
        raise TypeError(f"esgraph computed a {t.dtype} output where PyTorch's graph has {dtype} (a converter's error)")
    return t
