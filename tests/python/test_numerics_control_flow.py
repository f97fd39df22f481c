"""`if` and `while` compiled, against the same computation in numpy.

See numerics.py for the comparison rules."""
import numpy as np
import pytest

import esgraph
from esgraph import ops

from numerics import run, check, rng_for, normal, f32, f64, i64


@pytest.mark.parametrize("pred", [True, False])
def test_if_takes_the_branch_of_the_runtime_condition(pred):
    rng = rng_for(pred)
    x, w = normal(rng, (2, 3)), normal(rng, (3, 4))
    got = run(lambda p, t, m: ops.if_(p, lambda: (ops.exp(t), t @ m), lambda: (-t, ops.fill([2, 4], value=5.0))),
              np.array(pred), x, w)
    want = ([np.exp(x.astype(f64)), x.astype(f64) @ w] if pred else [-x, np.full((2, 4), 5.0)])
    for g, value in zip(got, want):
        check(g, np.asarray(value).astype(f32))


@pytest.mark.parametrize("n", [0, 1, 5])
def test_while_iterates_until_the_condition_fails(n):
    x = normal(rng_for(n), (3,), scale=1.0)

    def graph(limit, t):
        i0 = ops.fill([], value=0, dtype=esgraph.i64)
        return ops.while_([i0, t], lambda i, v: i < limit, lambda i, v: (i + 1, v * 2.0 + t))

    i, v = run(graph, np.array(n, i64), x)
    want = x.astype(f64)
    for _ in range(n):
        want = want * 2 + x
    check(i, np.array(n, i64))
    check(v, want.astype(f32))


# ---- 3. compile options and symbolic sizes ---------------------------------------------------
