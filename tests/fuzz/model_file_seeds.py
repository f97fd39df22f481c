"""Writes model_file_fuzzer's seed corpus (corpus/model_file_fuzzer/): a few small compiled-model
files, each with a kind of plan the loader checks, truncations of one, and hostile files with
their checksums right (regression_*: each was a finding, and must stay refused). Run it again
when the file format changes (the seeds must load, else the fuzzer starts from the header's
refusals):

    PYTHONPATH=build/default/python .venv/bin/python tests/fuzz/model_file_seeds.py
"""
import os
import pathlib
import struct
import sys

import numpy as np

import esgraph
from esgraph import ops

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
from model_files import EXACT_PLAN, ModelFile  # noqa: E402 (tests/python: rewrites a file, checksums and all)

OUT = pathlib.Path(__file__).resolve().parent / "corpus" / "model_file_fuzzer"
LIMIT = 64 * 1024  # each seed small: libFuzzer mutates every byte of it
rng = np.random.default_rng(0)


def weights(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def zeros(model, graph_inputs):
    return [np.zeros(shape, dtype=np.float32) for shape in graph_inputs]


def save(name, model):
    path = OUT / f"{name}.esgm"
    model.save(path)
    size = path.stat().st_size
    assert size < LIMIT, f"{name}: {size} bytes"
    back = esgraph.load_model(path)  # every seed loads
    print(f"{path.name}: {size} bytes; {back.stats()['plans']} plans compiled after load")
    return path


def mlp():
    """A static MLP: an exact plan, a fused epilogue, constants."""
    with esgraph.GraphBuilder("mlp") as b:
        x = b.input("x", esgraph.f32, [2, 16])
        h = ops.relu(x @ weights(16, 8) + weights(8))
        y = ops.softmax(h @ weights(8, 4))
    return esgraph.compile(b.build([y]), threads=1)


def conv_symbolic():
    """A conv net of a symbolic batch, compiled without a size and run at two: symbolic plans
    (their largest sizes, what a binding checks), blocked formats and reorders."""
    with esgraph.GraphBuilder("convnet") as b:
        x = b.input("x", esgraph.f32, ["batch", 3, 8, 8])
        h = ops.relu(ops.conv2d(x, weights(4, 3, 3, 3), bias=weights(4), pads=[1, 1, 1, 1]))
        h = ops.max_pool2d(h, [2, 2], strides=[2, 2])
        h = ops.reshape(h, [-1, 4 * 4 * 4])
        y = h @ weights(64, 5)
    model = esgraph.compile(b.build([y]), threads=1)
    for batch in (1, 3):
        model.run([np.zeros((batch, 3, 8, 8), np.float32)])
    return model


def branches_on_streams():
    """Two independent branches on two streams: waits, events, several launches per stream."""
    with esgraph.GraphBuilder("branches") as b:
        x = b.input("x", esgraph.f32, [4, 8])
        left = ops.tanh(x @ weights(8, 8)) * 2.0
        right = ops.sigmoid(x @ weights(8, 8)) + 1.0
        y = ops.concat([left, right], axis=1)
        z = ops.layer_norm(y)
    return esgraph.compile(b.build([z, left]), streams=2, threads=2)


def loop_and_branch():
    """A while loop and an if: bodies, a plan per set of input shapes (no symbolic plan)."""
    with esgraph.GraphBuilder("control") as b:
        x = b.input("x", esgraph.f32, ["n", 3])
        p = b.input("p", esgraph.bool_, [])
        i, v = ops.while_([b.constant(np.int64(0)), x], lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0 + 1.0))
        y = ops.if_(p, lambda: ops.exp(v), lambda: -v)
    model = esgraph.compile(b.build([y, i]), threads=1)
    for n in (1, 2):
        model.run([np.zeros((n, 3), np.float32), np.array(True)])
    return model


def single_op(dtype, outputs):
    """x: dtype[2,16] -> cast(x, f32) * 2 (and exp(x) for a second output): a plan per one set of shapes."""
    with esgraph.GraphBuilder("m") as b:
        x = b.input("x", dtype, [2, 16])
        y = [ops.cast(x, "f32") * 2.0, ops.exp(x)][:outputs]
    return esgraph.compile(b.build(y), threads=1)


def refused(name, data):
    path = OUT / f"regression_{name}.esgm"
    path.write_bytes(data)
    try:
        esgraph.load_model(path, max_memory_bytes=1 << 24)
    except esgraph.FormatError as e:
        print(f"{path.name}: refused: {e}")
        return
    except esgraph.LimitError as e:
        print(f"{path.name}: refused: {e}")
        return
    raise AssertionError(f"{path.name} loads")


def with_plan_of(model, donor, tmp):
    """`model`'s file with its plan replaced by `donor`'s (the same input shapes)."""
    model.save(tmp / "model.esgm")
    donor.save(tmp / "donor.esgm")
    f, d = ModelFile((tmp / "model.esgm").read_bytes()), ModelFile((tmp / "donor.esgm").read_bytes())
    f.replace(f.section(EXACT_PLAN)[0], d.section(EXACT_PLAN)[1])
    return f.bytes()


def hostile():
    tmp = OUT / ".tmp"
    tmp.mkdir(exist_ok=True)
    try:
        # A plan reading an f64 input where the model takes f32: the kernels read past the caller's buffer.
        refused("plan_input_dtype", with_plan_of(single_op(esgraph.f32, 1), single_op(esgraph.f64, 1), tmp))
        # A plan with one output in a model of two: a run checked the second buffer against no output.
        refused("plan_output_count", with_plan_of(single_op(esgraph.f32, 2), single_op(esgraph.f32, 1), tmp))
        # An arena of 2^40 bytes: beyond max_memory_bytes, refused before anything is allocated.
        mlp().save(tmp / "mlp.esgm")
        f = ModelFile((tmp / "mlp.esgm").read_bytes())
        index, plan = f.section(EXACT_PLAN)
        plan = bytearray(plan)
        struct.pack_into("<q", plan, len(plan) - 9 * 8, 1 << 40)  # the first of the record's nine figures
        f.replace(index, bytes(plan))
        refused("arena_beyond_limit", f.bytes())
    finally:
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    save("mlp", mlp())
    conv = save("conv_symbolic_batch", conv_symbolic())
    save("branches_two_streams", branches_on_streams())
    save("loop_and_if", loop_and_branch())
    data = conv.read_bytes()
    for name, n in (("truncated_header", 40), ("truncated_table", 64 + 32 * 2), ("truncated_half", len(data) // 2)):
        (OUT / f"conv_symbolic_batch_{name}.esgm").write_bytes(data[:n])
    hostile()
    print(f"{len(os.listdir(OUT))} seeds in {OUT}")


if __name__ == "__main__":
    main()
