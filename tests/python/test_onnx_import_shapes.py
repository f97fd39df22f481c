"""Shapes through the ONNX importer: shape operands known at import, symbolic dimensions, and
outputs that alias an input or each other.

See onnx_models.py for the helpers."""
import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import esgraph  # noqa: E402
import esgraph.onnx  # noqa: E402

from onnx_models import vi, init, i64, make, rand, close, F32, I64  # noqa: E402


# Shape operands known at import
def shape_chain(dims):
    """Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])): x as [batch, rest]."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "minus_one"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    return make(nodes, [vi("x", F32, dims)], [vi("y", F32, None)],
                [i64("zero", 0), i64("axes", [0]), i64("minus_one", [-1])])


def test_shape_chain_with_a_static_input_is_folded():
    graph = esgraph.onnx.load(shape_chain([2, 3, 4]))
    text = graph.to_text()
    assert "reshape(%x) {shape=[2,-1]}" in text
    for folded in ("shape", "gather", "unsqueeze", "concat"):
        assert f" = {folded}(" not in text  # computed while importing, not in the graph
    assert graph.node_count == 1  # the reshape alone
    x = rand(2, 3, 4, seed=23)
    close(esgraph.compile(graph)(x), x.reshape(2, 12))


def test_shape_chain_with_a_symbolic_batch_is_one_symbolic_graph():
    """torch's `x.reshape(x.shape[0], -1)`: the batch read from Shape is x's own first
    dimension, Reshape's 0, so one graph serves every batch (issue 47, item 5: a graph was
    imported and compiled for each batch a run brought)."""
    graph = esgraph.onnx.load(shape_chain(["N", 3, 4]))
    assert isinstance(graph, esgraph.Graph)
    assert "reshape(%x) {shape=[0,-1]} : f32[N,12]" in graph.to_text()
    assert graph.node_count == 1
    model = esgraph.compile(graph)
    for n in (2, 5, 2, 1, 37):
        x = rand(n, 3, 4, seed=n)
        np.testing.assert_array_equal(model(x), x.reshape(n, 12))


def _sizes_model(nodes, x_dims, inits):
    return make(nodes, [vi("x", F32, x_dims)], [vi("y", F32, None)], inits)


def _size_of(dim, name):
    """Nodes reading dimension `dim` of x as a 1-D size `name`."""
    return [helper.make_node("Shape", ["x"], [f"{name}_shape"]),
            helper.make_node("Gather", [f"{name}_shape", f"{name}_at"], [f"{name}_0d"], axis=0),
            helper.make_node("Unsqueeze", [f"{name}_0d", "axes"], [name])], [i64(f"{name}_at", dim)]


def test_shape_arithmetic_on_symbolic_sizes_resolves_into_reshape():
    """[b, t, 8] -> [b*t, 8] and [b, t*2, 4]: products, quotients and differences of the sizes
    a model reads, each left as Reshape's one -1 where it is not x's own dimension (b is x's
    first dimension, not that of the [b*t, 8] made from x)."""
    b_nodes, b_init = _size_of(0, "b")
    t_nodes, t_init = _size_of(1, "t")
    nodes = b_nodes + t_nodes + [
        helper.make_node("Mul", ["b", "t"], ["bt"]),
        helper.make_node("Mul", ["t", "six"], ["t6"]),
        helper.make_node("Sub", ["t6", "t"], ["t5"]),             # 5t
        helper.make_node("Div", ["t5", "five"], ["t1"]),          # t again
        helper.make_node("Mul", ["t1", "two"], ["t2"]),
        helper.make_node("Concat", ["bt", "eight"], ["flat_shape"], axis=0),
        helper.make_node("Reshape", ["x", "flat_shape"], ["flat"]),
        helper.make_node("Concat", ["b", "t2", "four"], ["split_shape"], axis=0),
        helper.make_node("Reshape", ["x", "split_shape"], ["y"]),
    ]
    inits = b_init + t_init + [i64("axes", [0]), i64("six", [6]), i64("five", [5]), i64("two", [2]),
                               i64("eight", [8]), i64("four", [4])]
    model = make(nodes, [vi("x", F32, ["b", "t", 8])], [vi("y", F32, None), vi("flat", F32, None)], inits)
    text = esgraph.onnx.load(model).to_text()
    assert "reshape(%x) {shape=[-1,8]}" in text and "reshape(%x) {shape=[0,-1,4]}" in text
    compiled = esgraph.compile(esgraph.onnx.load(model))
    for b, t in ((2, 3), (1, 1), (4, 7)):
        x = rand(b, t, 8, seed=b * t)
        y, flat = compiled(x)
        np.testing.assert_array_equal(y, x.reshape(b, t * 2, 4))
        np.testing.assert_array_equal(flat, x.reshape(b * t, 8))
    # flat's own first size is b*t, not b: a reshape of flat to [b, 2t, 4] has two sizes unknown
    model.graph.node[-1].input[0] = "flat"
    assert isinstance(esgraph.onnx.load(model), esgraph.onnx.ValueDependentGraph)


def test_size_of_a_symbolic_tensor_is_a_size_too():
    """Size of [b, 3, 4] is b*12: a flatten to [Size(x)] is a reshape to [-1] for every b (it was
    a graph per batch)."""
    nodes = [helper.make_node("Size", ["x"], ["n"]), helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Reshape", ["x", "n1"], ["y"])]
    graph = esgraph.onnx.load(_sizes_model(nodes, ["b", 3, 4], [i64("axes", [0])]))
    assert isinstance(graph, esgraph.Graph) and "reshape(%x) {shape=[-1]}" in graph.to_text()
    model = esgraph.compile(graph)
    for b in (1, 6):
        x = rand(b, 3, 4, seed=b)
        np.testing.assert_array_equal(model(x), x.reshape(-1))


def test_slice_to_a_symbolic_size_and_expand_to_its_own_shape():
    """`x[:, :x.shape[1]]` and `x.expand(x.shape)`, as torch exports them (the Equal/Where
    torch puts before Expand included): x as it is, in one graph."""
    t_nodes, t_init = _size_of(1, "t")
    nodes = t_nodes + [
        helper.make_node("Slice", ["x", "zero", "t", "one"], ["sliced"]),
        helper.make_node("Shape", ["x"], ["whole"]),
        helper.make_node("Equal", ["whole", "minus_ones"], ["is_minus_one"]),
        helper.make_node("Where", ["is_minus_one", "ones", "whole"], ["target"]),
        helper.make_node("Expand", ["sliced", "target"], ["y"]),
    ]
    inits = t_init + [i64("axes", [0]), i64("zero", [0]), i64("one", [1]), i64("minus_ones", [-1, -1]), i64("ones", [1, 1])]
    graph = esgraph.onnx.load(_sizes_model(nodes, ["b", "t"], inits))
    assert isinstance(graph, esgraph.Graph) and "expand" not in graph.to_text()
    model = esgraph.compile(graph)
    for b, t in ((2, 3), (5, 1)):
        x = rand(b, t, seed=t)
        np.testing.assert_array_equal(model(x), x)


@pytest.mark.parametrize("dtype", [F32, TensorProto.BOOL])
def test_expand_of_a_symbolic_size_and_static_ones(dtype):
    """torch's `x.expand(x.shape[0], 2, 4)` of an [b, 1, 4] and a new leading axis of 3: x's
    own b kept, the static axes broadcast, exactly (-0 and NaN as they were; bools too), in one
    graph (a graph per batch before)."""
    b_nodes, b_init = _size_of(0, "b")
    nodes = b_nodes + [helper.make_node("Concat", ["three", "b", "two", "four"], ["target"], axis=0),
                       helper.make_node("Expand", ["x", "target"], ["y"])]
    model = make(nodes, [vi("x", dtype, ["b", 1, 4])], [vi("y", dtype, None)],
                 b_init + [i64("axes", [0]), i64("three", [3]), i64("two", [2]), i64("four", [4])])
    graph = esgraph.onnx.load(model)
    assert isinstance(graph, esgraph.Graph)
    compiled = esgraph.compile(graph)
    for b in (1, 5):
        x = rand(b, 1, 4, seed=b)
        x.flat[:2] = [-0.0, np.nan]
        x = x > 0 if dtype == TensorProto.BOOL else x
        got = compiled(x)
        np.testing.assert_array_equal(got, np.broadcast_to(x, (3, b, 2, 4)))
        if dtype == F32:
            assert np.signbit(got.flat[0])


@pytest.mark.parametrize("case", ["negative", "difference", "opset 9", "inlined if"])
def test_sizes_that_may_be_negative_old_opsets_and_inlined_bodies_match_onnx_runtime(case):
    """Sizes compared with -1 only when they cannot be negative (-b is -1 at b = 1; b - t may be
    too); opset 9's Slice and an If whose condition is known read the sizes too, or leave the
    graph to the run's shapes (each failed the import or gave wrong values before)."""
    ort = pytest.importorskip("onnxruntime")
    b_nodes, b_init = _size_of(0, "b")
    t_nodes, t_init = _size_of(1, "t")
    inits = b_init + t_init + [i64("axes", [0]), i64("minus", [-1]), i64("one_six", [1, 6]), i64("minus_three", [-1, 3])]
    opset = 13
    if case in ("negative", "difference"):
        value = [helper.make_node("Mul", ["b", "minus"], ["v"])] if case == "negative" else [helper.make_node("Sub", ["b", "t"], ["v"])]
        nodes = b_nodes + t_nodes + value + [
            helper.make_node("Equal", ["v", "minus"], ["is"]),
            helper.make_node("Where", ["is", "one_six", "minus_three"], ["shape"]),
            helper.make_node("Reshape", ["x", "shape"], ["y"])]
    elif case == "opset 9":
        opset = 9
        nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Slice", ["s"], ["b"], starts=[0], ends=[1]),
                 helper.make_node("Concat", ["b", "minus"], ["shape"], axis=0), helper.make_node("Reshape", ["x", "shape"], ["y"])]
    else:
        then = helper.make_graph([helper.make_node("Concat", ["b", "minus"], ["then_shape"], axis=0)], "then", [],
                                 [vi("then_shape", I64, [2])])
        other = helper.make_graph([helper.make_node("Identity", ["minus_three"], ["else_shape"])], "else", [],
                                  [vi("else_shape", I64, [2])])
        nodes = b_nodes + [helper.make_node("If", ["yes"], ["shape"], then_branch=then, else_branch=other),
                           helper.make_node("Reshape", ["x", "shape"], ["y"])]
        inits.append(helper.make_tensor("yes", TensorProto.BOOL, [], [True]))
    model = make(nodes, [vi("x", F32, ["b", "t"])], [vi("y", F32, None)], inits, opset=opset)
    compiled = esgraph.compile(esgraph.onnx.load(model))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for b, t in ((1, 6), (2, 3), (3, 3)):
        x = rand(b, t, seed=b + t)
        np.testing.assert_array_equal(compiled(x), session.run(None, {"x": x})[0])


@pytest.mark.parametrize("case", ["fill", "swapped", "output"])
def test_sizes_known_only_at_run_time_wait_for_the_input_shapes(case):
    """What a graph cannot say with its static attributes (a fill of a symbolic size, a
    reshape with two unknown sizes, the sizes as an output) is imported per set of input shapes,
    as before."""
    b_nodes, b_init = _size_of(0, "b")
    t_nodes, t_init = _size_of(1, "t")
    shape = [helper.make_node("Shape", ["x"], ["s"])]
    nodes = {"fill": shape + [helper.make_node("ConstantOfShape", ["s"], ["zeros"]), helper.make_node("Add", ["x", "zeros"], ["y"])],
             "swapped": b_nodes + t_nodes + [helper.make_node("Concat", ["t", "b"], ["ts"], axis=0),
                                             helper.make_node("Reshape", ["x", "ts"], ["y"])],
             "output": shape + [helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT)]}[case]
    graph = esgraph.onnx.load(_sizes_model(nodes, ["b", "t"], b_init + t_init + [i64("axes", [0])]))
    assert isinstance(graph, esgraph.onnx.ValueDependentGraph)
    assert graph.by_shapes and graph.shape_inputs == ()
    assert "waits for its inputs' shapes" in repr(graph)
    model = esgraph.compile(graph)
    for b, t in ((2, 3), (4, 5), (2, 3)):
        x = rand(b, t, seed=b)
        want = {"fill": x, "swapped": x.reshape(t, b), "output": np.array([b, t], np.float32)}[case]
        np.testing.assert_array_equal(model(x), want)
    assert model.stats()["graphs"] == 2
    assert (model.stats()["graphs_kept"], model.stats()["max_graphs"]) == (2, 16)


def test_shape_chain_with_a_symbolic_batch_is_fixed_by_input_shapes():
    graph = esgraph.onnx.load(shape_chain(["N", 3, 4]), input_shapes={"x": [2, 3, 4]})
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(esgraph.compile(graph)(x), x.reshape(2, 12))


def test_shape_start_over_static_dims_works_with_a_symbolic_batch():
    # Shape(start=1) of [N, 3, 4] is [3, 4]: known while importing though N is not.
    nodes = [
        helper.make_node("Shape", ["x"], ["tail"], start=1),
        helper.make_node("Concat", ["minus_one", "tail"], ["shape"], axis=0),
        helper.make_node("Reshape", ["flat", "shape"], ["y"]),
    ]
    model = make(nodes, [vi("x", F32, ["N", 3, 4]), vi("flat", F32, ["N", 12])], [vi("y", F32, None)],
                 [i64("minus_one", [-1])], opset=15)
    graph = esgraph.onnx.load(model)
    assert "reshape(%flat) {shape=[-1,3,4]}" in graph.to_text()
    compiled = esgraph.compile(graph)
    for n in (1, 3):
        x, flat = rand(n, 3, 4, seed=n), rand(n, 12, seed=n + 1)
        close(compiled(x, flat), flat.reshape(n, 3, 4))


def shape_input_model():
    """Reshape(x, shape) with `shape` a graph input: needs constants= to import."""
    return make([helper.make_node("Reshape", ["x", "shape"], ["y"])],
                [vi("x", F32, [2, 3, 4]), vi("shape", I64, [2])], [vi("y", F32, None)])


def test_a_shape_given_as_a_graph_input_is_read_at_each_run():
    graph = esgraph.onnx.load(shape_input_model())
    assert isinstance(graph, esgraph.onnx.ValueDependentGraph) and graph.shape_inputs == ("shape",)
    model = esgraph.compile(graph, max_plans=2)
    assert model.input_names == ["x", "shape"]
    x = rand(2, 3, 4, seed=7)
    for shape in ([4, 6], [-1, 2], [1, 24], [4, 6]):
        close(model(x, np.array(shape)), x.reshape(shape))
    close(model.run({"shape": np.array([3, 8]), "x": x})[0], x.reshape(3, 8))
    assert model.stats()["graphs"] == 5  # [4, 6] was dropped (at most 2 kept) before it came back
    assert (model.stats()["graphs_kept"], model.stats()["max_graphs"]) == (2, 2)


@pytest.mark.parametrize("shape, message", [
    ([5, -1], "reshape: cannot reshape"),
    ([-1, -1], "-1"),
    ([-7, 2], "-7"),
])
def test_a_shape_value_the_graph_rejects_names_the_op_and_the_model_runs_on(shape, message):
    model = esgraph.compile(esgraph.onnx.load(shape_input_model()))
    x = rand(2, 3, 4, seed=8)
    with pytest.raises(ValueError, match=message):
        model(x, np.array(shape))
    close(model(x, np.array([6, 4])), x.reshape(6, 4))


def test_a_run_of_a_value_dependent_model_checks_its_inputs():
    model = esgraph.compile(esgraph.onnx.load(shape_input_model()))
    with pytest.raises(esgraph.InvalidArgumentError, match="takes 2 input"):
        model(rand(2, 3, 4))
    with pytest.raises(esgraph.InvalidArgumentError, match="no input named nope"):
        model.run({"x": rand(2, 3, 4), "shape": np.array([1, 24]), "nope": 1})
    with pytest.raises(esgraph.InvalidArgumentError, match="max_plans"):
        esgraph.compile(esgraph.onnx.load(shape_input_model()), max_plans=-1)


def test_a_value_dependent_model_casts_prepares_and_cancels_as_a_model_does():
    """cast=True, prepare and cancel (issue 47, item 5: AttributeError and a plain TypeError
    before)."""
    model = esgraph.compile(esgraph.onnx.load(shape_input_model()))
    x = rand(2, 3, 4, seed=9)
    close(model(x.astype(np.float64), [4, 6], cast=True), x.reshape(4, 6))  # f64 and a list, converted
    close(model.run([x.tolist(), np.array([6, 4])], cast=True)[0], x.reshape(6, 4))
    shape = np.array([3, 8])
    prepared = model.prepare({"x": x, "shape": shape})
    close(prepared.run()[0], x.reshape(3, 8))
    x[...] = 0  # read in place by every run
    close(prepared.run()[0], np.zeros((3, 8), np.float32))
    shape[:] = [8, 3]  # another graph: refused, not run on the old one
    with pytest.raises(esgraph.InvalidArgumentError, match="values of shape changed since the run was prepared"):
        prepared.run()
    model.cancel()  # nothing under way: later runs are not affected
    close(model(x, np.array([24, 1])), x.reshape(24, 1))


def test_a_value_dependent_model_is_a_model_in_every_respect(tmp_path):
    """Every public attribute of esgraph.Model, with the graph run last where a Model has one
    graph (issue 47, item 5: no graph, output_names, profile or to_dot before)."""
    model = esgraph.compile(esgraph.onnx.load(shape_input_model()))
    assert {a for a in dir(esgraph.Model) if not a.startswith("_")} <= set(dir(model))
    assert (model.input_names, model.output_names) == (["x", "shape"], ["y"])
    with pytest.raises(esgraph.InvalidArgumentError, match="graph: no graph yet"):
        model.graph()
    x = rand(2, 3, 4, seed=10)
    path = tmp_path / "trace.json"
    (out,) = model.profile(x, np.array([4, 6]), path=str(path))
    close(out, x.reshape(4, 6))
    assert json.loads(path.read_text())["traceEvents"]
    assert "reshape(%x) {shape=[4,6]}" in model.graph().to_text()
    model(x, np.array([3, 8]))
    assert "reshape(%x) {shape=[3,8]}" in model.graph().to_text()
    assert model.to_dot().startswith("digraph")


def test_a_shape_input_is_checked_as_the_model_declares_it():
    """The values that fix the graph are taken only as the input is declared (int64 of [2]), as
    a compiled model checks its inputs: a float, another length or rank fixed another graph, or
    the wrong one, without a word. cast=True converts what keeps its values."""
    model = esgraph.compile(esgraph.onnx.load(shape_input_model()))
    x = rand(2, 3, 4, seed=10)
    with pytest.raises(esgraph.DTypeError, match=r"run: input `shape` is float64 \(values \[2.7, 2.0\]\), the model's is i64; "
                                                 r"cast=True converts"):
        model(x, np.array([2.7, 2.0]))
    for shape, got in (([2, 2, 6], r"\[3\]"), ([[2, 12]], r"\[1, 2\]"), ([24], r"\[1\]")):
        with pytest.raises(esgraph.ShapeError, match=r"run: input `shape` is \[2\], got " + got):
            model(x, np.array(shape))
    close(model(x, np.array([2.0, 12.0]), cast=True), x.reshape(2, 12))
    with pytest.raises(esgraph.DTypeError, match="input `shape` is float64"):
        model(x, np.array([2.5, 9.6]), cast=True)  # converting would change the values
    with pytest.raises(esgraph.ShapeError, match="prepare: input `shape`"):
        model.prepare([x, np.array([24])])


def test_a_value_dependent_models_run_under_way_is_cancelled():
    """Reshape(x, shape) then a Loop of `m` steps: cancel from another thread stops the run."""
    import threading
    import time
    body = helper.make_graph(
        [helper.make_node("Add", ["y_in", "one"], ["y_out"]), helper.make_node("Identity", ["c_in"], ["c_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_in", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("y_out", TensorProto.FLOAT, None)])
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("Loop", ["m", "", "r"], ["y"], body=body)], "long",
        [vi("x", F32, [2, 3]), vi("shape", I64, [1]), vi("m", I64, [])], [vi("y", F32, None)],
        [numpy_helper.from_array(np.array(1, np.float32), "one")])
    model = esgraph.compile(esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])))
    x, shape = np.zeros((2, 3), np.float32), np.array([6])
    close(model(x, shape, np.array(3, np.int64)), np.full(6, 3, np.float32))  # compiled, and right
    raised = []

    def long_run():
        try:
            model(x, shape, np.array(5_000_000, np.int64))
        except esgraph.CancelledError as e:
            raised.append(e)

    thread = threading.Thread(target=long_run)
    thread.start()
    deadline = time.monotonic() + 60
    while thread.is_alive() and time.monotonic() < deadline:  # a cancel before the run starts leaves it be
        time.sleep(0.1)
        model.cancel()
    thread.join(timeout=1)
    assert not thread.is_alive() and len(raised) == 1


def test_constants_freeze_a_shape_input():
    graph = esgraph.onnx.load(shape_input_model(), constants={"shape": np.array([4, 6])})
    compiled = esgraph.compile(graph)
    assert compiled.input_names == ["x"]  # the frozen input is no longer one
    x = rand(2, 3, 4, seed=24)
    close(compiled(x), x.reshape(4, 6))
    # a plain list works as well
    compiled = esgraph.compile(esgraph.onnx.load(shape_input_model(), constants={"shape": [-1, 2]}))
    close(compiled(x), x.reshape(12, 2))


def test_constants_naming_an_unknown_input_fail():
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(shape_input_model(), constants={"shape": [4, 6], "nope": [1]})
    (where, why), = info.value.failures
    assert where == "constants" and "nope" in why
    assert "shape" not in why

# Symbolic dimensions
def test_symbolic_dims_from_dim_param_survive():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 2)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "y_in"], ["y"])]
    model = make(nodes, [vi("x", F32, ["batch", 4]), vi("y_in", F32, ["batch", 2])], [vi("y", F32, ["batch", 2])],
                 [init("w", w)])
    graph = esgraph.onnx.load(model)
    assert graph.to_text().startswith("graph m(%x: f32[batch,4], %y_in: f32[batch,2])")
    assert [ln for ln in graph.to_text().splitlines() if "%y = add(" in ln][0].endswith(": f32[batch,2]")
    compiled = esgraph.compile(graph)
    for batch in (1, 5):
        x, y_in = rand(batch, 4, seed=batch), rand(batch, 2, seed=batch + 10)
        close(compiled(x, y_in), x @ w + y_in, rtol=1e-5, atol=1e-5)


def _single(op, inputs, outputs, inits=(), opset=13, **attrs):
    graph = helper.make_graph([helper.make_node(op, [i[0] for i in inputs] + [t.name for t in inits], ["y"], **attrs)], op,
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info("y", *outputs)], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_log_sum_exp_of_a_row_of_minus_infinity_is_minus_infinity():
    model = _single("ReduceLogSumExp", [("x", TensorProto.FLOAT, [2, 3])], (TensorProto.FLOAT, [2, 1]), axes=[1])
    x = np.array([[-np.inf] * 3, [0, 1, 2]], np.float32)
    got = esgraph.compile(esgraph.onnx.load(model))(x)
    with np.errstate(divide="ignore"):  # log(0) is the -inf expected
        want = np.log(np.exp(x.astype(np.float64)).sum(1, keepdims=True)).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_constant_cast_to_bf16_is_computed_at_run_time():
    init = numpy_helper.from_array(np.array([1.5, -2.25], np.float32), "c")
    graph = helper.make_graph([helper.make_node("Cast", ["c"], ["b"], to=TensorProto.BFLOAT16),
                               helper.make_node("Cast", ["b"], ["y"], to=TensorProto.FLOAT)], "bf",
                              [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [init])
    got = esgraph.compile(esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))).run([])
    np.testing.assert_array_equal(got[0], np.array([1.5, -2.25], np.float32))  # exact in bf16


@pytest.mark.parametrize("equation, shapes", [
    ("...ii->...i", [(2, 3, 4, 4)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("...ij,...jk", [(2, 3, 4), (4, 5)]),
    ("ii", [(4, 4)]), ("iij->j", [(3, 3, 2)]), ("i,j->ij", [(3,), (4,)]), ("b...i,b...i->b...", [(2, 3, 4), (2, 3, 4)]),
])
def test_einsum_matches_numpy(equation, shapes):
    names = [f"x{i}" for i in range(len(shapes))]
    graph = helper.make_graph([helper.make_node("Einsum", names, ["y"], equation=equation)], "einsum",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in zip(names, shapes)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    rng = np.random.default_rng(len(equation))
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    got = esgraph.compile(esgraph.onnx.load(model)).run(xs)[0]
    np.testing.assert_allclose(got, np.einsum(equation, *xs), rtol=1e-5, atol=1e-5)


def test_loop_with_a_trip_count_given_at_run_time_becomes_a_while():
    # y = x; repeat M times: y = y * 2 + 1 (the trip count is an input, so nothing unrolls)
    body = helper.make_graph(
        [helper.make_node("Mul", ["y_in", "two"], ["t"]), helper.make_node("Add", ["t", "one"], ["y_out"]),
         helper.make_node("Identity", ["c_in"], ["c_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_in", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("y_out", TensorProto.FLOAT, [3])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["m", "", "x"], ["y"], body=body)], "loop",
        [helper.make_tensor_value_info("m", TensorProto.INT64, []), helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.array(2, np.float32), "two"), numpy_helper.from_array(np.array(1, np.float32), "one")])
    model = esgraph.compile(esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])))
    x = np.array([0, 1, -1], np.float32)
    for m in (0, 1, 4):
        want = x.copy()
        for _ in range(m):
            want = want * 2 + 1
        np.testing.assert_array_equal(model.run([np.array(m, np.int64), x])[0], want)



@pytest.mark.parametrize("op, onnx_type, dtype", [("MaxPool", TensorProto.INT8, np.int8),
                                                  ("AveragePool", TensorProto.FLOAT16, np.float16)])
def test_3d_pooling_of_integer_and_half_tensors(op, onnx_type, dtype):
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], kernel_shape=[2, 2, 2], pads=[1, 1, 1, 0, 0, 0],
                                                strides=[2, 2, 2])], "pool3d",
                              [helper.make_tensor_value_info("x", onnx_type, [1, 1, 3, 3, 3])],
                              [helper.make_tensor_value_info("y", onnx_type, None)])
    x = (np.arange(27) - 13).reshape(1, 1, 3, 3, 3).astype(dtype)
    got = esgraph.compile(esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])))(x)
    want = np.zeros((1, 1, 2, 2, 2), dtype)
    for d, h, w in np.ndindex(2, 2, 2):  # windows start at 2*i - 1; the padding is not counted
        box = x[0, 0, max(2 * d - 1, 0):2 * d + 1, max(2 * h - 1, 0):2 * h + 1, max(2 * w - 1, 0):2 * w + 1]
        want[0, 0, d, h, w] = box.max() if op == "MaxPool" else box.astype(np.float64).mean()
    np.testing.assert_array_equal(got, want)


def test_scan_with_reversed_input_and_output_axis_matches_numpy():
    # state s += x_t (x read backwards along axis 1); each step outputs s * 2, stacked on axis 1
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Mul", ["s_out", "two"], ["y_t"])], "body",
        [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.array(2, np.float32), "two")])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1, scan_input_axes=[1],
                          scan_input_directions=[1], scan_output_axes=[1])], "scan",
        [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    model = esgraph.compile(esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])))
    s0, x = np.array([1, -1], np.float32), np.arange(8, dtype=np.float32).reshape(2, 4)
    state, outs = s0.copy(), []
    for t in reversed(range(4)):
        state = state + x[:, t]
        outs.append(state * 2)
    got_s, got_y = model.run([s0, x])
    np.testing.assert_array_equal(got_s, state)
    np.testing.assert_array_equal(got_y, np.stack(outs, axis=1))


def test_max_pool_indices_never_point_into_padding_and_nan_wins():
    graph = helper.make_graph([helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], strides=[2, 2],
                                                pads=[1, 1, 1, 1], dilations=[1, 1])], "pool",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    model = esgraph.compile(esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])))
    y, i = model.run([np.full((1, 1, 3, 3), -np.inf, np.float32)])
    assert (i >= 0).all() and (y == -np.inf).all()
    np.testing.assert_array_equal(i.ravel(), [0, 1, 3, 4])  # as PyTorch: the first real element of each window
    x = np.zeros((1, 1, 3, 3), np.float32)
    x[0, 0, 2, 2] = np.nan
    y, _ = model.run([x])
    assert np.isnan(y[0, 0, 1, 1]) and not np.isnan(y[0, 0, 0, 0])


def test_loop_beyond_the_unroll_limit_runs_as_a_while():
    body = helper.make_graph(
        [helper.make_node("Add", ["y_in", "one"], ["y_out"]), helper.make_node("Identity", ["c_in"], ["c_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_in", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("y_out", TensorProto.FLOAT, [1])])
    graph = helper.make_graph([helper.make_node("Loop", ["m", "", "x"], ["y"], body=body)], "long",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
                              [numpy_helper.from_array(np.array(5000, np.int64), "m"),
                               numpy_helper.from_array(np.array(1, np.float32), "one")])
    graph_in = esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    assert "while" in graph_in.to_text()
    np.testing.assert_array_equal(esgraph.compile(graph_in)(np.zeros(1, np.float32)), [5000.0])


def test_bf16_initializers_stay_bf16():
    init = helper.make_tensor("c", TensorProto.BFLOAT16, [3], [1.5, -2.0, 4.0])
    graph = helper.make_graph([helper.make_node("Add", ["x", "c"], ["y"])], "bf16",
                              [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [3])], [init])
    model = esgraph.compile(esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])))
    x_bits = np.array([0x3F80, 0x4000, 0xC000], np.uint16)  # 1, 2, -2
    y_bits = model(x_bits)
    np.testing.assert_array_equal((y_bits.astype(np.uint32) << 16).view(np.float32), [2.5, 0.0, 2.0])


def test_einsum_refuses_upper_case_letters():
    graph = helper.make_graph([helper.make_node("Einsum", ["a", "b"], ["y"], equation="Ab,bc")], "e",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    with pytest.raises(esgraph.onnx.ImportFailed, match="upper-case"):
        esgraph.onnx.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


def test_supported_ops_lists_the_converters():
    ops_ = esgraph.onnx.supported_ops()
    assert ops_ == sorted(ops_)
    assert {"Conv", "Gemm", "LSTM", "Resize", "TopK", "ScatterND", "Loop", "Einsum"} <= set(ops_)
    assert len(ops_) >= 120


def test_input_shapes_naming_an_unknown_input_fail():
    model = _single("Relu", [("x", TensorProto.FLOAT, [2])], (TensorProto.FLOAT, [2]))
    with pytest.raises(esgraph.onnx.ImportFailed, match="no input named z"):
        esgraph.onnx.load(model, input_shapes={"z": [3]})



@pytest.mark.parametrize("content", [b"", b"\x00garbage\xff" * 8, b"\x08", b"\xff\xfe this is not a protobuf \x00\x01\x02"],
                         ids=["empty", "garbage", "truncated", "text"])
def test_what_is_not_an_onnx_model_is_a_format_error(tmp_path, content):
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(esgraph.FormatError, match="bad.onnx` is not an ONNX model"):
        esgraph.onnx.load(path)
    with pytest.raises(esgraph.FormatError, match=f"the {len(content)} bytes is not an ONNX model"):
        esgraph.onnx.load(content)
    with pytest.raises(esgraph.FormatError, match="with outputs"):
        esgraph.onnx.load(onnx.ModelProto())

# Outputs that alias an input or each other
def test_graph_output_that_is_a_graph_input():
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    model = make(nodes, [vi("x", F32, [2, 3])], [vi("x", F32, [2, 3]), vi("y", F32, [2, 3])])
    graph = esgraph.onnx.load(model)
    graph.verify()
    compiled = esgraph.compile(graph)
    assert compiled.input_names == ["x"]
    assert compiled.output_names == ["x", "y"]
    x = rand(2, 3, seed=25)
    same, relu = compiled(x)
    close(same, x)
    close(relu, np.maximum(x, 0))


def test_same_value_listed_as_two_outputs():
    nodes = [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Neg", ["e"], ["n"])]
    model = make(nodes, [vi("x", F32, [3])], [vi("e", F32, [3]), vi("n", F32, [3]), vi("e", F32, [3])])
    compiled = esgraph.compile(esgraph.onnx.load(model))
    assert compiled.output_names == ["e", "n", "e"]
    x = rand(3, seed=26)
    first, negated, second = compiled.run({"x": x})
    close(first, np.exp(x))
    close(negated, -np.exp(x))
    close(second, np.exp(x))


def test_initializer_as_a_graph_output():
    c = np.array([1.5, -2.0], dtype=np.float32)
    model = make([helper.make_node("Neg", ["x"], ["y"])], [vi("x", F32, [2])],
                 [vi("c", F32, [2]), vi("y", F32, [2])], [init("c", c)])
    compiled = esgraph.compile(esgraph.onnx.load(model))
    assert compiled.output_names == ["c", "y"]
    out_c, out_y = compiled(np.array([1, 2], np.float32))
    close(out_c, c)
    close(out_y, np.array([-1, -2], np.float32))
