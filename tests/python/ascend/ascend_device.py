"""What the Ascend tests share besides their fixtures (conftest.py): graphs of one function,
comparisons with the CPU, the successful calls of the simulator's log, the command line."""
import os
import subprocess
import sys

import numpy as np

import esgraph

RTOL, ATOL = 1e-5, 1e-5


def graph_of(fn, *shapes):
    with esgraph.GraphBuilder("g") as b:
        xs = [b.input(f"x{i}", esgraph.f32, list(s)) for i, s in enumerate(shapes)]
        out = fn(*xs)
        return b.build(list(out) if isinstance(out, (tuple, list)) else [out])


def both(graph, arrays, **options):
    """(CPU outputs, ascend-sim outputs) of one graph."""
    cpu = esgraph.compile(graph).run(list(arrays))
    sim = esgraph.compile(graph, backend="ascend-sim", **options).run(list(arrays))
    return cpu, sim


def check_same(graph, arrays, **options):
    cpu, sim = both(graph, arrays, **options)
    assert len(cpu) == len(sim)
    for c, s in zip(cpu, sim):
        assert s.dtype == c.dtype and s.shape == c.shape
        np.testing.assert_allclose(s, c, rtol=RTOL, atol=ATOL)


def calls(lines, name):
    """The successful calls of `name` in the log."""
    return [line for line in lines if line.split(" ")[0] == name and " FAILED " not in line]


def esgraph_cli(*args, **env):
    """`python3 -m esgraph *args` in a process of its own, with `env` added to the environment."""
    return subprocess.run([sys.executable, "-m", "esgraph", *args], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **env))
