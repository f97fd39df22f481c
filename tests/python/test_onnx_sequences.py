"""ONNX sequences and optionals: lowered to their tensors while importing, the model taking and
giving them as lists of arrays (None for an empty optional). References are numpy list work."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import esgraph
import esgraph.onnx

from onnx_models import F32, I64, make, rand, vi

SEQ_F32 = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F32, None))


def seq_vi(name, elem=F32):
    return helper.make_value_info(name, helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem, None)))


def opt_vi(name, inner):
    return helper.make_value_info(name, helper.make_optional_type_proto(inner))


def compiled(model, **load_kwargs):
    return esgraph.compile(esgraph.onnx.load(model, **load_kwargs))


def scalar(v):
    return np.array(v, np.int64)


def test_split_then_pick_at_a_run_time_position_is_one_graph():
    # Equal pieces: SequenceAt gathers at run time, so new positions compile nothing.
    model = make([helper.make_node("SplitToSequence", ["x"], ["s"], axis=1, keepdims=0),
                  helper.make_node("SequenceAt", ["s", "p"], ["y"])],
                 [vi("x", F32, [2, 3, 4]), vi("p", I64, [])], [vi("y", F32, None)], opset=13)
    g = esgraph.onnx.load(model)
    assert not isinstance(g, esgraph.onnx.ValueDependentGraph)
    m = esgraph.compile(g)
    x = rand(2, 3, 4)
    for p in (0, 2, -1, -3):
        np.testing.assert_array_equal(m.run([x, scalar(p)])[0], x[:, p, :])


def test_elements_of_different_shapes_read_the_position_at_run_time():
    model = make([helper.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]),
                  helper.make_node("SequenceErase", ["s", "e"], ["s2"]),
                  helper.make_node("SequenceAt", ["s2", "p"], ["y"])],
                 [vi("a", F32, [1, 2]), vi("b", F32, [2, 2]), vi("c", F32, [3, 2]), vi("e", I64, []), vi("p", I64, [])],
                 [vi("y", F32, None)], opset=13)
    g = esgraph.onnx.load(model)
    assert isinstance(g, esgraph.onnx.ValueDependentGraph) and "e" in g.shape_inputs
    m = esgraph.compile(g)
    xs = [rand(1, 2, seed=1), rand(2, 2, seed=2), rand(3, 2, seed=3)]
    for e, p in ((0, 0), (0, 1), (-1, 1), (1, -1)):
        rest = xs[:e] + xs[e + 1:] if e >= 0 else xs[:e]
        np.testing.assert_array_equal(m.run(xs + [scalar(e), scalar(p)])[0], rest[p])
    assert set(g.shape_inputs) == {"e", "p"}  # the erase's result told the importer p fixes a shape too


def test_sequence_inputs_and_outputs_are_lists():
    model = make([helper.make_node("SequenceInsert", ["s", "t", "p"], ["s2"]),
                  helper.make_node("SequenceLength", ["s2"], ["n"]),
                  helper.make_node("ConcatFromSequence", ["s2"], ["cat"], axis=0, new_axis=1)],
                 [seq_vi("s"), vi("t", F32, [3]), vi("p", I64, [])],
                 [seq_vi("s2"), vi("n", I64, []), vi("cat", F32, None)], opset=13)
    m = compiled(model)
    s = [rand(3, seed=k) for k in range(3)]
    t = rand(3, seed=9)
    for p in (0, 3, -1):
        want = list(s)
        want.insert(p if p >= 0 else p + len(s), t)
        got, n, cat = m.run([s, t, scalar(p)])
        assert isinstance(got, list) and len(got) == 4
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        assert int(n) == 4
        np.testing.assert_array_equal(cat, np.stack(want))
    # Another length is another graph; an empty sequence is one too.
    got, n, _ = m.run([s[:1], t, scalar(0)])
    assert len(got) == 2 and int(n) == 2
    assert m.stats()["graphs"] >= 2


def test_sequence_structure_given_at_load_makes_one_graph():
    model = make([helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=-1)],
                 [seq_vi("s")], [vi("y", F32, None)], opset=13)
    m = compiled(model, input_shapes={"s": [[2, 1], [2, 3]]})
    a, b = rand(2, 1), rand(2, 3)
    np.testing.assert_array_equal(m.run([[a, b]])[0], np.concatenate([a, b], -1))
    with pytest.raises(esgraph.Error, match="takes 2 input|input"):
        m.run([[a]])


def test_loop_builds_a_sequence_over_a_run_time_trip_count():
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Cast", ["i"], ["f"], to=F32),
         helper.make_node("Unsqueeze", ["f", "zero"], ["f1"]),
         helper.make_node("SequenceInsert", ["acc", "f1"], ["acc_out"])],
        "body", [vi("i", I64, []), vi("c", TensorProto.BOOL, []), seq_vi("acc")],
        [vi("c_out", TensorProto.BOOL, []), seq_vi("acc_out")],
        initializer=[helper.make_tensor("zero", I64, [1], [0])])
    model = make([helper.make_node("SequenceEmpty", [], ["empty"], dtype=F32),
                  helper.make_node("Loop", ["m", "", "empty"], ["out"], body=body),
                  helper.make_node("ConcatFromSequence", ["out"], ["y"], axis=0)],
                 [vi("m", I64, [])], [vi("y", F32, None), seq_vi("out")], opset=13)
    m = compiled(model)
    y, out = m.run([scalar(4)])
    np.testing.assert_array_equal(y, np.arange(4, dtype=np.float32))
    assert len(out) == 4


def test_optional_inputs_empty_and_present():
    tensor = helper.make_tensor_type_proto(F32, [2])
    model = make([helper.make_node("OptionalHasElement", ["o"], ["has"]),
                  helper.make_node("Identity", ["o"], ["same"])],
                 [opt_vi("o", tensor)], [vi("has", TensorProto.BOOL, []), opt_vi("same", tensor)], opset=15)
    m = compiled(model)
    x = rand(2)
    has, same = m.run([x])
    assert bool(has) and np.array_equal(same, x)
    has, same = m.run([None])
    assert not bool(has) and same is None


def test_if_giving_sequences_reads_its_condition_at_run_time():
    def branch(name, op):
        return helper.make_graph([helper.make_node("SplitToSequence", ["x"], ["s"], axis=op)], name, [], [seq_vi("s")])
    model = make([helper.make_node("If", ["c"], ["s"], then_branch=branch("t", 0), else_branch=branch("e", 1))],
                 [vi("c", TensorProto.BOOL, []), vi("x", F32, [2, 3])], [seq_vi("s")], opset=13)
    m = compiled(model)
    x = rand(2, 3)
    assert len(m.run([np.array(True), x])[0]) == 2
    got = m.run([np.array(False), x])[0]
    assert len(got) == 3 and np.array_equal(got[1], x[:, 1:2])


def test_sequence_map_runs_its_body_per_element():
    body = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "add",
                             [vi("a", F32, None), vi("b", F32, None)], [vi("y", F32, None)])
    model = make([helper.make_node("SequenceMap", ["s", "t"], ["r"], body=body)],
                 [seq_vi("s"), vi("t", F32, [3])], [seq_vi("r")], opset=17)
    m = compiled(model)
    s, t = [rand(3, seed=1), rand(2, 3, seed=2)], rand(3, seed=3)
    got = m.run([s, t])[0]
    for g, x in zip(got, s):
        np.testing.assert_allclose(g, x + t)


# Bad input: each is a clear error naming what is wrong.

def test_position_out_of_range_fails_that_run_by_name():
    model = make([helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
                  helper.make_node("SequenceErase", ["s", "p"], ["s2"]),
                  helper.make_node("ConcatFromSequence", ["s2"], ["y"], axis=0)],
                 [vi("a", F32, [1]), vi("b", F32, [1]), vi("p", I64, [])], [vi("y", F32, None)], opset=13)
    m = compiled(model)
    a, b = rand(1), rand(1)
    with pytest.raises(esgraph.onnx.ImportFailed, match=r"position 2 is outside \[-2, 1\]"):
        m.run([a, b, scalar(2)])
    np.testing.assert_array_equal(m.run([a, b, scalar(0)])[0], b)  # the model runs on


def test_a_sequence_where_a_tensor_is_expected_is_refused():
    model = make([helper.make_node("SequenceConstruct", ["a"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
                 [vi("a", F32, [2])], [vi("y", F32, None)], opset=13)
    with pytest.raises(esgraph.onnx.ImportFailed, match="Relu.*is a sequence, where a tensor is expected"):
        esgraph.onnx.load(model)


def test_mixed_element_types_are_refused():
    model = make([helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
                  helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
                 [vi("a", F32, [2]), vi("b", I64, [2])], [vi("y", F32, None)], opset=13)
    with pytest.raises(esgraph.onnx.ImportFailed, match="elements of different types: f32, i64"):
        esgraph.onnx.load(model)


def test_get_element_of_an_empty_optional_is_refused():
    tensor = helper.make_tensor_type_proto(F32, [2])
    model = make([helper.make_node("OptionalGetElement", ["o"], ["y"])], [opt_vi("o", tensor)], [vi("y", F32, None)], opset=15)
    m = compiled(model)
    with pytest.raises(esgraph.onnx.ImportFailed, match="OptionalGetElement of an empty optional"):
        m.run([None])


def test_a_sequence_input_given_a_number_is_refused():
    model = make([helper.make_node("SequenceLength", ["s"], ["n"])], [seq_vi("s")], [vi("n", I64, [])], opset=13)
    m = compiled(model)
    with pytest.raises(esgraph.InvalidArgumentError, match="input `s` is a sequence: give a list of arrays, got int"):
        m.run([3])
    assert int(m.run([[rand(2), rand(3)]])[0]) == 2


def test_a_loop_whose_condition_the_data_decides_cannot_carry_a_sequence():
    body = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["r"], keepdims=0),
         helper.make_node("Greater", ["r", "zero"], ["c_out"]),
         helper.make_node("SequenceInsert", ["acc", "x"], ["acc_out"])],
        "body", [vi("i", I64, []), vi("c", TensorProto.BOOL, []), seq_vi("acc")],
        [vi("c_out", TensorProto.BOOL, []), seq_vi("acc_out")],
        initializer=[helper.make_tensor("zero", F32, [], [0.0])])
    model = make([helper.make_node("SequenceEmpty", [], ["empty"]),
                  helper.make_node("Loop", ["m", "", "empty"], ["out"], body=body),
                  helper.make_node("SequenceLength", ["out"], ["n"])],
                 [vi("m", I64, []), vi("x", F32, [2])], [vi("n", I64, [])], opset=13)
    m = compiled(model)
    with pytest.raises(esgraph.onnx.ImportFailed, match="loop condition computed at run time"):
        m.run([scalar(3), rand(2)])


# esgraph's own sequence_at, the op SequenceAt of one shape imports as.

def test_sequence_at_in_python_picks_at_run_time_and_names_a_bad_position():
    with esgraph.GraphBuilder("pick") as b:
        xs = [b.input(f"x{k}", esgraph.f32, [2, 3]) for k in range(3)]
        p = b.input("p", esgraph.i64, [])
        y = esgraph.ops.sequence_at(xs, p)
    m = esgraph.compile(b.build([y]))
    values = [rand(2, 3, seed=k) for k in range(3)]
    for at in (0, 2, -1, -3):
        np.testing.assert_array_equal(m.run(values + [scalar(at)])[0], values[at])
    with pytest.raises(esgraph.InvalidArgumentError, match=r"sequence_at: position -4 is outside a sequence of 3 element\(s\)"):
        m.run(values + [scalar(-4)])
    with esgraph.GraphBuilder("odd") as b:
        with pytest.raises(esgraph.ShapeError, match=r"elements\[1\] \[3\] differs from elements\[0\] \[2\]"):
            esgraph.ops.sequence_at([b.input("a", esgraph.f32, [2]), b.input("c", esgraph.f32, [3])], b.input("p", esgraph.i32, []))


def test_sequence_at_exports_as_onnx_sequence_ops_onnx_runtime_runs():
    ort = pytest.importorskip("onnxruntime")
    with esgraph.GraphBuilder("pick") as b:
        xs = [b.input(f"x{k}", esgraph.f32, [4]) for k in range(3)]
        y = esgraph.ops.sequence_at(xs, b.input("p", esgraph.i64, []))
        y.name = "y"
    model = esgraph.onnx.to_model(b.build([y]))
    assert [n.op_type for n in model.graph.node] == ["SequenceConstruct", "SequenceAt"]
    values = [rand(4, seed=k) for k in range(3)]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {**{f"x{k}": v for k, v in enumerate(values)}, "p": scalar(-2)})[0]
    np.testing.assert_array_equal(got, values[1])


def test_a_sequence_of_constants_is_built_in_the_models_graph():
    # SplitToSequence of an initializer: its elements belong to the model, not to folding's scratch graph.
    w = rand(4, 3, seed=4)
    model = make([helper.make_node("SplitToSequence", ["w"], ["s"], axis=0, keepdims=0),
                  helper.make_node("ConcatFromSequence", ["s"], ["c"], axis=1, new_axis=1),
                  helper.make_node("Add", ["c", "x"], ["y"])],
                 [vi("x", F32, [3, 4])], [vi("y", F32, None), seq_vi("s")], [helper.make_tensor("w", F32, [4, 3], w.ravel())],
                 opset=13)
    x = rand(3, 4, seed=5)
    y, s = compiled(model).run([x])
    np.testing.assert_array_equal(y, w.T + x)
    assert len(s) == 4 and np.array_equal(s[2], w[2])


def test_symbolic_sizes_in_a_sequence_wait_for_the_runs_shapes():
    model = make([helper.make_node("Shape", ["x"], ["n"]),
                  helper.make_node("SequenceConstruct", ["n", "n"], ["s"]),
                  helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)],
                 [vi("x", F32, ["N", 3])], [vi("y", I64, None)], opset=13)
    m = compiled(model)
    np.testing.assert_array_equal(m.run([rand(5, 3)])[0], [5, 3, 5, 3])


def test_what_a_sequence_input_cannot_do_is_named():
    # A sequence input's element used as a shape: its values are not frozen by constants=.
    model = make([helper.make_node("SequenceAt", ["s", "zero"], ["shape"]),
                  helper.make_node("Reshape", ["x", "shape"], ["y"])],
                 [seq_vi("s", I64), vi("x", F32, [6])], [vi("y", F32, None)], [helper.make_tensor("zero", I64, [], [0])],
                 opset=13)
    m = compiled(model)
    with pytest.raises(esgraph.onnx.ImportFailed, match=r"Reshape.*input 1 \(shape\) must be a constant"):
        m.run([[np.array([2, 3], np.int64)], rand(6)])
    with pytest.raises(esgraph.onnx.ImportFailed, match=r"constants\['s'\]: freezes tensors; this input is a sequence"):
        esgraph.onnx.load(model, constants={"s": np.zeros(2)})


def test_an_optional_tensor_takes_an_array_as_a_list():
    tensor = helper.make_tensor_type_proto(F32, [2, 2])
    model = make([helper.make_node("OptionalGetElement", ["o"], ["y"])], [opt_vi("o", tensor)], [vi("y", F32, None)], opset=15)
    np.testing.assert_array_equal(compiled(model).run([[[1.0, 2.0], [3.0, 4.0]]], cast=True)[0], [[1, 2], [3, 4]])
