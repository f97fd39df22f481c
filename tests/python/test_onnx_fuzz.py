"""The ONNX importer under hypothesis: mutated models give a graph or an esgraph error, nothing else.

Seeds are ONNX's own node test models (the generators Debian's python3-onnx ships, as the
conformance suite uses them) and a few multi-node models. Each example takes one and mutates it
as a hostile or broken file would: its bytes (flips, cuts, splices), or its fields (op types,
inputs and outputs, attributes of the wrong type or at the edges, input shapes and dtypes,
initializers whose data does not fit, opsets). The importer must then return a graph or raise
an `esgraph.Error` (`FormatError`, `ImportFailed`, ...): a raw protobuf, numpy, onnx, Unicode or
Python exception, a MemoryError or a crash is a finding. Graphs that import are compiled and,
when small, run on zeros, under the same rule.

`make test` runs a few hundred examples; `make fuzz` runs for FUZZ_SECONDS
(ESG_FUZZ_SECONDS here), keeping what it finds in build/fuzz/hypothesis. Every finding fixed
stays as an explicit regression case at the end of this file.
"""
import os
import random
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import onnx  # scripts/install-deps.sh installs both: a missing one fails here, never skips
from hypothesis import HealthCheck, given, settings, strategies as st
from onnx import TensorProto, helper, numpy_helper

import esgraph
import esgraph.onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))
import onnx_node_suite  # noqa: E402

FUZZ_SECONDS = float(os.environ.get("ESG_FUZZ_SECONDS", "0"))
EXAMPLES = int(os.environ.get("ESG_ONNX_FUZZ_EXAMPLES", "150"))
EDGE_INTS = [0, 1, -1, 2, 3, -2, 2**31 - 1, 2**31, -2**31, 2**40, 2**62, 2**63 - 1, -2**63]
EDGE_FLOATS = [0.0, -0.0, 1.0, -1.0, 1e-45, 1e38, 1e308, float("inf"), float("-inf"), float("nan")]


def _multi_node_seeds():
    f = TensorProto.FLOAT
    mlp = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=-1)],
        "mlp", [helper.make_tensor_value_info("x", f, ["n", 4])], [helper.make_tensor_value_info("y", f, None)],
        initializer=[numpy_helper.from_array(np.ones((4, 3), np.float32), "w"),
                     numpy_helper.from_array(np.zeros(3, np.float32), "b")])
    shape = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
         helper.make_node("Gather", ["t", "i"], ["g"], axis=0), helper.make_node("Concat", ["g", "g"], ["y"], axis=1)],
        "shape", [helper.make_tensor_value_info("x", f, [2, 3])], [helper.make_tensor_value_info("y", f, None)],
        initializer=[numpy_helper.from_array(np.array([3, 2], np.int64), "s"),
                     numpy_helper.from_array(np.array([1, 0], np.int64), "i")])
    branch = lambda op, name: helper.make_graph(  # noqa: E731
        [helper.make_node(op, ["x"], [name])], name, [], [helper.make_tensor_value_info(name, f, [2])])
    cond = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch("Exp", "t"), else_branch=branch("Neg", "e"))],
        "cond", [helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_tensor_value_info("x", f, [2])],
        [helper.make_tensor_value_info("y", f, [2])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["go"], ["go_out"]), helper.make_node("Add", ["v", "v"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("go", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v", f, [2])],
        [helper.make_tensor_value_info("go_out", TensorProto.BOOL, []), helper.make_tensor_value_info("v_out", f, [2])])
    loop = helper.make_graph(
        [helper.make_node("Loop", ["n", "go", "x"], ["y"], body=body)], "loop",
        [helper.make_tensor_value_info("x", f, [2])], [helper.make_tensor_value_info("y", f, [2])],
        initializer=[numpy_helper.from_array(np.array(3, np.int64), "n"), numpy_helper.from_array(np.array(True), "go")])
    return [helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]) for g in (mlp, shape, cond, loop)]


def _seeds():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = onnx_node_suite.collect()
    return [c.model.SerializeToString() for c in cases] + [m.SerializeToString() for m in _multi_node_seeds()]


SEEDS = _seeds()
OPS = sorted({onnx.ModelProto.FromString(s).graph.node[0].op_type for s in SEEDS if onnx.ModelProto.FromString(s).graph.node})


# ---- mutations -------------------------------------------------------------------------------
def _mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(4)
        if kind == 0 and b:  # flip a byte
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif kind == 1 and b:  # cut
            del b[rng.randrange(len(b)):]
        elif kind == 2:  # insert
            at = rng.randint(0, len(b))
            b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif b:  # splice a piece of another seed
            other = rng.choice(SEEDS)
            start = rng.randrange(len(other))
            at = rng.randint(0, len(b))
            b[at:at] = other[start:start + rng.randint(1, 64)]
    return bytes(b)


def _random_name(graph, rng):
    names = [v.name for v in graph.input] + [t.name for t in graph.initializer] + [o for n in graph.node for o in n.output]
    return rng.choice(names + ["", "undefined", "x" * 300, "\u00e9\u4e2d"]) if names else "undefined"


def _mutate_attribute(a, rng):
    kind = rng.randrange(6)
    if kind == 0:
        a.ClearField("ints")
        a.ints.extend(rng.choice(EDGE_INTS) for _ in range(rng.randint(0, 5)))
        a.type = onnx.AttributeProto.INTS
    elif kind == 1:
        a.i = rng.choice(EDGE_INTS)
        a.type = onnx.AttributeProto.INT
    elif kind == 2:
        a.f = rng.choice(EDGE_FLOATS)
        a.type = onnx.AttributeProto.FLOAT
    elif kind == 3:
        a.s = bytes(rng.randrange(256) for _ in range(rng.randint(0, 6)))  # maybe not UTF-8
        a.type = onnx.AttributeProto.STRING
    elif kind == 4:
        a.type = rng.choice(onnx.AttributeProto.AttributeType.values())  # may disagree with the field set
    else:
        a.name = rng.choice(["axis", "axes", "perm", "to", "value", "mode", "unknown", ""])


def _mutate_dims(t, rng):
    shape = t.type.tensor_type.shape
    if rng.random() < 0.3:
        t.type.tensor_type.elem_type = rng.randrange(25)
    for d in shape.dim:
        r = rng.random()
        if r < 0.3:
            d.dim_value = rng.choice([0, 1, 2, 2**31, 2**40, 2**62, -1])
        elif r < 0.4:
            d.dim_param = rng.choice(["n", "", "\u00e9"])
    if rng.random() < 0.2:
        shape.dim.add().dim_value = rng.choice([0, 1, 3, 2**40])


def _mutate_initializer(t, rng):
    kind = rng.randrange(4)
    if kind == 0 and t.dims:
        t.dims[rng.randrange(len(t.dims))] = rng.choice(EDGE_INTS)
    elif kind == 1:
        t.data_type = rng.randrange(25)
    elif kind == 2 and t.raw_data:
        t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data))]
    else:
        t.dims.append(rng.choice([0, 2, 2**20]))


def _mutate_model(data: bytes, rng: random.Random) -> bytes:
    model = onnx.ModelProto.FromString(data)
    g = model.graph
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(8)
        if kind == 0 and g.node:
            rng.choice(g.node).op_type = rng.choice(OPS)
        elif kind == 1 and g.node:
            n = rng.choice(g.node)
            if n.input and rng.random() < 0.5:
                del n.input[rng.randrange(len(n.input))]
            else:
                n.input.insert(rng.randint(0, len(n.input)), _random_name(g, rng))
        elif kind == 2 and g.node:
            n = rng.choice(g.node)
            if n.attribute:
                _mutate_attribute(rng.choice(n.attribute), rng)
            else:
                a = n.attribute.add()
                a.name = rng.choice(["axis", "perm", "to", "keepdims"])
                _mutate_attribute(a, rng)
        elif kind == 3 and g.input:
            _mutate_dims(rng.choice(g.input), rng)
        elif kind == 4 and g.initializer:
            _mutate_initializer(rng.choice(g.initializer), rng)
        elif kind == 5 and model.opset_import:
            model.opset_import[0].version = rng.choice([0, 1, 6, 9, 11, 13, 17, 18, 19, 99, -1])
        elif kind == 6 and g.node:
            n = rng.choice(g.node)
            if n.output:
                n.output[rng.randrange(len(n.output))] = _random_name(g, rng)
        elif g.output:
            g.output[rng.randrange(len(g.output))].name = _random_name(g, rng)
    return model.SerializeToString()


# ---- the property ------------------------------------------------------------------------------
def check_import(data: bytes):
    """Loads `data` with the import's folding capped at 64 MiB; a graph, or an esgraph error. A
    graph that loads compiles (or refuses with an esgraph error) and, when its inputs are small and
    static, runs on zeros."""
    try:
        # Folding within a cap: a mutated shape (2**40 elements) is left to the graph, not filled.
        graph = esgraph.onnx.load(data, base_dir=None, max_memory_bytes=64 << 20)
    except esgraph.Error:
        return
    try:
        model = esgraph.compile(graph, threads=1, max_loop_iterations=64)
    except (esgraph.Error, MemoryError):
        # MemoryError is ESG_ERR_OUT_OF_MEMORY: a model asking for more than the machine has (a
        # ConvTranspose over a 154 GB weight input did), refused cleanly rather than crashing.
        return
    if isinstance(graph, esgraph.onnx.ValueDependentGraph):
        return  # its graph waits for a run's values, which zeros would not be
    info = graph.inspect()
    inputs = []
    for v in info["inputs"]:
        spec = info["values"][v]
        shape = spec["shape"]
        if any(not isinstance(d, int) for d in shape) or int(np.prod(shape, dtype=np.int64)) > 4096:
            return
        inputs.append(np.zeros(shape, spec["dtype"].numpy))
    for v in info["outputs"]:  # a model may legitimately ask for outputs beyond this machine's memory
        shape = info["values"][v]["shape"]
        if any(not isinstance(d, int) for d in shape) or int(np.prod(shape, dtype=np.float64)) > 1 << 20:
            return
    if model.stats()["arena_bytes"] > 1 << 24:
        return
    try:
        model.run(inputs)
    except esgraph.Error:
        pass


def _one_example(seed_index, mutation_seed, structured):
    rng = random.Random(mutation_seed)
    data = SEEDS[seed_index % len(SEEDS)]
    data = _mutate_model(data, rng) if structured else _mutate_bytes(data, rng)
    check_import(data)


def _settings(examples):
    database = None
    if FUZZ_SECONDS:
        from hypothesis.database import DirectoryBasedExampleDatabase
        database = DirectoryBasedExampleDatabase(str(Path(__file__).resolve().parents[2] / "build/fuzz/hypothesis"))
    return settings(max_examples=examples, deadline=None, database=database, derandomize=not FUZZ_SECONDS,
                    suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("structured", [False, True], ids=["bytes", "fields"])
def test_mutated_models_import_or_fail_with_an_esgraph_error(structured):
    @_settings(EXAMPLES)
    @given(st.integers(0, len(SEEDS) - 1), st.integers(0, 2**32))
    def run(seed_index, mutation_seed):
        _one_example(seed_index, mutation_seed, structured)

    deadline = time.monotonic() + FUZZ_SECONDS
    examples = 0
    while True:
        run()
        examples += EXAMPLES
        if time.monotonic() >= deadline:
            break
    if FUZZ_SECONDS:
        print(f"\nonnx importer fuzz ({'fields' if structured else 'bytes'}): {examples} examples in {FUZZ_SECONDS:.0f} s")


# ---- what the fuzzing found, kept as plain cases ------------------------------------------------
def _model(nodes, inputs, outputs, initializers=(), name="m"):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)


def test_a_name_that_is_not_utf8_is_a_format_error():
    data = bytearray(_model([helper.make_node("Relu", ["x"], ["y"])], [X], [Y], name="keepdims").SerializeToString())
    at = data.index(b"keepdims")
    data[at + 1] = 0xE5  # "k\xe5epdims": protobuf hands this string over as bytes
    with pytest.raises(esgraph.FormatError, match=r"model.graph.name is not UTF-8 text"):
        esgraph.onnx.load(bytes(data))


def test_an_attribute_whose_type_disagrees_with_its_value_is_reported_with_its_node():
    node = helper.make_node("Softmax", ["x"], ["y"], axis=0)
    node.attribute[0].type = onnx.AttributeProto.TENSOR  # says TENSOR, holds an int
    with pytest.raises(esgraph.onnx.ImportFailed, match=r"Softmax -> y: attribute 'axis' is malformed"):
        esgraph.onnx.load(_model([node], [X], [Y]))
    node.attribute[0].type = onnx.AttributeProto.SPARSE_TENSOR  # reads as an empty sparse tensor
    with pytest.raises(esgraph.onnx.ImportFailed, match=r"Softmax -> y: .*`axis` takes an int, got a SparseTensorProto"):
        esgraph.onnx.load(_model([node], [X], [Y]))


def test_an_initializer_whose_data_does_not_fill_its_dims_is_reported():
    w = numpy_helper.from_array(np.ones(3, np.float32), "w")
    w.dims[:] = [3, 2**20]
    with pytest.raises(esgraph.onnx.ImportFailed, match=r"initializer 'w': malformed: cannot reshape"):
        esgraph.onnx.load(_model([helper.make_node("Add", ["x", "w"], ["y"])], [X], [Y], [w]))


def test_an_output_naming_an_optional_output_left_out_is_reported():
    # Dropout's mask is optional; the model names it as an output though the node leaves it out.
    node = helper.make_node("Dropout", ["x"], ["y", ""])
    mask = helper.make_tensor_value_info("", TensorProto.BOOL, None)
    with pytest.raises(esgraph.Error):
        esgraph.onnx.load(_model([node], [X], [Y, mask]))


def test_a_string_constant_is_a_dtype_error_not_a_numpy_one():
    s = helper.make_tensor("s", TensorProto.STRING, [1], [b"text"])
    with pytest.raises(esgraph.Error):
        esgraph.onnx.load(_model([helper.make_node("Identity", ["s"], ["y"])], [X], [Y], [s]))
    with esgraph.GraphBuilder():
        with pytest.raises(esgraph.DTypeError, match="numpy dtype <U4 has no esgraph dtype"):
            esgraph.constant(np.array(["text"]))


def test_an_if_whose_condition_is_empty_is_refused_at_run_time():
    """A bool[0] condition was read past its buffer (a crash the field mutations found)."""
    branch = lambda op, name: helper.make_graph(  # noqa: E731
        [helper.make_node(op, ["x"], [name])], name, [], [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=branch("Exp", "t"), else_branch=branch("Neg", "e"))
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [0])
    model = esgraph.compile(esgraph.onnx.load(_model([node], [c, X], [Y])))
    with pytest.raises(esgraph.InvalidArgumentError, match="`if`: its condition has 0 elements; it must have exactly one"):
        model(np.zeros(0, np.bool_), np.ones(2, np.float32))
    assert np.allclose(esgraph.compile(esgraph.onnx.load(_model([node], [helper.make_tensor_value_info("c", TensorProto.BOOL, [])
                                                                          , X], [Y])))(np.bool_(True), np.ones(2, np.float32)), np.e)
