"""If: both branches become esgraph bodies (outer values are captured automatically); a
condition known while importing keeps only the branch taken."""
import numpy as np

from ... import _C
from .registry import converts

ops = _C.ops


@converts("If")
def if_(n):
    if n.known(0):
        taken = "then_branch" if bool(np.asarray(n.const(0)).reshape(-1)[0]) else "else_branch"
        return n.subgraph(taken, inline=True)()
    return ops.if_(n.x(0), n.subgraph("then_branch"), n.subgraph("else_branch"))
