"""TF2's functional control flow: If and While (and their Stateless forms) take their branches
and bodies from the function library; they become esgraph's if and while, whose bodies capture
outer values. A condition known while importing keeps only the branch taken."""
from ... import _C
from .registry import Unsupported, converts

ops = _C.ops


def _function(n, attr):
    name = n.attr(attr)
    if not name:
        raise Unsupported(f"no function in attribute '{attr}'")
    return name


@converts("If", "StatelessIf")
def if_(n):
    args = [n.value(i) for i in range(1, n.num_inputs)]
    then_name, else_name = _function(n, "then_branch"), _function(n, "else_branch")
    if n.known(0):
        taken = then_name if bool(n.const(0).reshape(-1)[0]) else else_name
        return n.importer.function(taken, args)
    condition = n.x(0)
    if condition.ndim:
        condition = ops.reshape(condition, [])
    return _as_list(ops.if_(condition, lambda: n.importer.function(then_name, args, body=True),
                            lambda: n.importer.function(else_name, args, body=True)))


@converts("While", "StatelessWhile")
def while_(n):
    cond_name, body_name = _function(n, "cond"), _function(n, "body")
    init = [n.x(i) for i in range(n.num_inputs)]

    def condition(*values):
        (c,) = n.importer.function(cond_name, list(values), body=True)
        return ops.reshape(c, []) if c.ndim else c

    return _as_list(ops.while_(init, condition, lambda *values: n.importer.function(body_name, list(values), body=True)))


def _as_list(y):
    return list(y) if isinstance(y, (list, tuple)) else [y]
