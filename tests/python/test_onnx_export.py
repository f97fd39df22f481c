"""esgraph.onnx.save / to_model: every op's YAML examples exported, checked by onnx.checker
(inside to_model), re-imported and run; the results must be the examples' own values."""
import numpy as np
import onnx
import pytest

import esgraph
import esgraph.onnx
import esgraph.torch
from esgraph import ops

from esgraph_op_set import OP_SET, build_value_example, value_examples

# Collectives have no ONNX form (ONNX has no communication), and the max and min scatters none
# at the opset the export writes (17): each refused by name, tested below.
CASES = [pytest.param(op, ex, id=f"{op.name}-{op.examples.index(ex) + 1}") for op, ex in value_examples()
         if not op.communicates and dict(ex.attrs).get("reduction") not in ("max", "min")]
COLLECTIVES = {op.name for op in OP_SET.ops if op.communicates}


def roundtrip(graph, feeds):
    model = esgraph.onnx.to_model(graph)
    return esgraph.compile(esgraph.onnx.load(model)).run(feeds)


@pytest.mark.parametrize("op, example", CASES)
def test_every_op_example_survives_export(op, example):
    graph, feeds, expected = build_value_example(op, example)
    got = roundtrip(graph, feeds)
    assert len(got) == len(expected)
    for g, want in zip(got, expected):
        assert g.dtype == want.dtype and g.shape == want.shape
        if want.dtype.kind == "f":
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(g, want)


def test_the_examples_cover_every_op_but_control_flow():
    assert {op.name for op in OP_SET.ops} - {c.values[0].name for c in CASES} == {"if", "while"} | COLLECTIVES


def test_a_collective_is_refused_by_name(b):
    x = b.input("x", esgraph.f32, [4])
    with pytest.raises(esgraph.onnx.ExportFailed, match="all_reduce has no ONNX export"):
        esgraph.onnx.to_model(b.build([ops.all_reduce(x)]))


def test_a_scatter_reduction_onnx_has_from_opset_18_is_refused_by_name(b):
    d, i, u = b.input("d", esgraph.f32, [3]), b.input("i", esgraph.i64, [2]), b.input("u", esgraph.f32, [2])
    with pytest.raises(esgraph.onnx.ExportFailed, match="scatter_elements with reduction max: ONNX has it from opset 18"):
        esgraph.onnx.to_model(b.build([ops.scatter_elements(d, i, u, reduction="max")]))


def first_value_examples():
    first = {}
    for op, example in value_examples():
        first.setdefault(op.name, (op, example))
    return first.values()


ONE_NODE_CASES = [pytest.param(op, ex, id=op.name) for op, ex in first_value_examples() if op.onnx]


@pytest.mark.parametrize("op, example", ONE_NODE_CASES)
def test_an_op_with_onnx_in_its_yaml_exports_as_that_node(op, example):
    graph, _, _ = build_value_example(op, example)
    nodes = esgraph.onnx.to_model(graph).graph.node
    assert [n.op_type for n in nodes] == [op.onnx.op]
    given = dict(example.attrs)
    written = {op.onnx.attr_name(a.name) for a in op.attrs
               if not (a.is_list and len(given.get(a.name, a.default)) == 0)}  # an empty list is left out
    assert {a.name for a in nodes[0].attribute} == written


def test_save_writes_a_file_onnx_reads(tmp_path):
    with esgraph.GraphBuilder("saved") as b:
        x = b.input("x", esgraph.f32, ["batch", 4])
        y = ops.gelu(x @ np.eye(4, dtype=np.float32), approximate="tanh")
    path = tmp_path / "m.onnx"
    esgraph.onnx.save(b.build([y]), path)
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(esgraph.compile(esgraph.onnx.load(path))(x), want, rtol=1e-5, atol=1e-6)


def test_outputs_that_are_inputs_constants_or_repeated():
    with esgraph.GraphBuilder("aliases") as b:
        x = b.input("x", esgraph.f32, [2])
        c = esgraph.constant(np.array([1.0, 2.0], np.float32))
        y = x + c
    model = esgraph.onnx.to_model(b.build([x, c, y, y]))
    assert len({o.name for o in model.graph.output}) == 4
    got = esgraph.compile(esgraph.onnx.load(model)).run([np.array([3, 4], np.float32)])
    for g, want in zip(got, ([3, 4], [1, 2], [4, 6], [4, 6])):
        np.testing.assert_array_equal(g, np.array(want, np.float32))


@pytest.mark.parametrize("p, k", [(True, 2), (False, 7)])
def test_if_and_while_export_as_if_and_loop(p, k):
    with esgraph.GraphBuilder("control") as b:
        cond = b.input("p", esgraph.bool_, [])
        x = b.input("x", esgraph.f32, [2])
        start = b.input("k", esgraph.i64, [])
        y = ops.if_(cond, lambda: [ops.exp(x) + 1], lambda: [x - 1])
        i, acc = ops.while_([start, x], lambda i, a: i < 5, lambda i, a: [i + 1, a * 2 + x])
    model = esgraph.onnx.to_model(b.build([y, i, acc]))
    assert [n.op_type for n in model.graph.node] == ["If", "Less", "Loop"]  # the first test runs before the loop
    xv = np.array([1.0, 2.0], np.float32)
    got = esgraph.compile(esgraph.onnx.load(model)).run([np.array(p), xv, np.array(k, np.int64)])
    want_acc = xv.copy()
    for _ in range(max(5 - k, 0)):
        want_acc = want_acc * 2 + xv
    np.testing.assert_allclose(got[0], np.exp(xv) + 1 if p else xv - 1, rtol=1e-6)
    assert got[1] == max(k, 5)
    np.testing.assert_array_equal(got[2], want_acc)


def test_an_imported_model_exports_back():
    # ONNX -> esgraph -> ONNX -> esgraph gives the first import's results.
    import torch
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    x = torch.randn(2, 5, 32)
    graph = esgraph.torch.from_module(layer, (x,))
    first = esgraph.compile(graph).run([x.numpy()])
    np.testing.assert_allclose(roundtrip(graph, [x.numpy()])[0], first[0], rtol=1e-5, atol=1e-6)


def test_generated_names_never_take_a_graph_value_name():
    with esgraph.GraphBuilder("names") as b:
        x = b.input("sqrt__1", esgraph.f32, [3])
        y = ops.rsqrt(x)
    model = esgraph.onnx.to_model(b.build([y]))
    assert model.graph.input[0].name == "sqrt__1"
    x = np.array([1, 4, 16], np.float32)
    np.testing.assert_allclose(esgraph.compile(esgraph.onnx.load(model))(x), 1 / np.sqrt(x))


def test_negative_transpose_axes_are_written_as_onnx_wants():
    with esgraph.GraphBuilder("perm") as b:
        x = b.input("x", esgraph.f32, [2, 3, 4])
        y = ops.transpose(x, perm=[0, -1, 1])
    model = esgraph.onnx.to_model(b.build([y]))
    onnx.shape_inference.infer_shapes(model, strict_mode=True)
    assert list(model.graph.node[0].attribute[0].ints) == [0, 2, 1]


def test_integer_ranges_export_as_ranges_of_int64():
    """integer_range and range_to of integers count exactly: ONNX's Range over int64 (a Cast after
    for other types), exact beyond 2^53 through the round trip."""
    a, z, c = 2**53 + 1, 2**53 + 7, 2
    with esgraph.GraphBuilder("range") as b:
        fixed = ops.integer_range(z, start=a, step=c)
        narrow = ops.integer_range(7, start=-5, step=4, dtype=esgraph.i16)
        read = ops.range_to(*(b.input(n, esgraph.i64, []) for n in "azs"), dtype=esgraph.i64)
        g = b.build([fixed, narrow, read])
    model = esgraph.onnx.to_model(g)
    onnx.checker.check_model(model)
    got = roundtrip(g, [np.int64(v) for v in (a, z, c)])
    want = np.arange(a, z, c, dtype=np.int64)
    np.testing.assert_array_equal(got[0], want)
    assert got[1].dtype == np.int16
    np.testing.assert_array_equal(got[1], [-5, -1, 3])
    np.testing.assert_array_equal(got[2], want)


@pytest.mark.parametrize("start, limit, step, dtype", [(0.0, 1.5, 0.5, "i64"), (0.0, 3.0, 1.5, "i32"), (1.0, 2.0, 0.25, "f16"),
                                                       (5.0, -3.0, -2.5, "f64"), (0.0, 4.0, 1.0, "u8")])
def test_range_exports_as_ranges_of_doubles_stored_in_its_type(start, limit, step, dtype):
    """range (and range_to) count and step in double, then store in their dtype: exported as
    Range over doubles and a Cast (checked by onnx.checker), whose ONNX semantics the importer
    runs to numpy's values."""
    want = np.arange(start, limit, step, dtype=np.float64).astype(getattr(esgraph, dtype).numpy)
    with esgraph.GraphBuilder("range") as b:
        fixed = ops.range(limit, start=start, step=step, dtype=getattr(esgraph, dtype))
        scalars = [b.input(n, esgraph.f32, []) for n in ("a", "z", "s")]
        read = ops.range_to(*scalars, dtype=getattr(esgraph, dtype))
        g = b.build([fixed, read])
    model = esgraph.onnx.to_model(g)
    assert [n.op_type for n in model.graph.node].count("Range") == 2
    for got in roundtrip(g, [np.float32(v) for v in (start, limit, step)]):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
