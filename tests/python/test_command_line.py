"""The `python3 -m esgraph` command line: run, info and dot on ONNX files and esgraph graph files, as a user
types them, plus the mistakes a user makes on the command line."""
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import esgraph
import esgraph.onnx
from esgraph import ops

W = np.arange(12, dtype=np.float32).reshape(4, 3) / 10


def esgraph_cli(*args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-m", "esgraph", *map(str, args)], capture_output=True, text=True, env=env)


@pytest.fixture
def onnx_file(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], "cli",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(W, "w")])
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    return path


def test_run_with_an_npy_input_prints_the_outputs(onnx_file, tmp_path):
    x = np.array([[1, -2, 3, 4], [0, 0, 0, 1]], dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    r = esgraph_cli("run", onnx_file, "-i", f"x={tmp_path / 'x.npy'}", "--repeat", 3)
    assert r.returncode == 0, r.stderr
    want = np.maximum(x @ W, 0)
    assert "y: float32[2, 3]" in r.stdout
    printed = r.stdout.split("]\n", 1)[1].split("compile")[0]
    got = np.array([[float(v) for v in row.strip(" []").split()] for row in printed.strip().splitlines()])
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert "run median" in r.stdout


def test_run_binds_a_symbol_left_unbound_to_1_and_says_so(onnx_file, tmp_path):
    r = esgraph_cli("run", onnx_file, "--repeat", 0)
    assert r.returncode == 0, r.stderr
    assert "y: float32[1, 3]" in r.stdout and "N bound to 1 (not given; --bind NAME=SIZE sets it)" in r.stderr
    # An input given with -i fixes its symbols itself: nothing is made up.
    np.save(tmp_path / "x.npy", np.ones((3, 4), np.float32))
    r = esgraph_cli("run", onnx_file, "-i", f"x={tmp_path / 'x.npy'}", "--repeat", 0)
    assert r.returncode == 0 and "y: float32[3, 3]" in r.stdout and "bound to 1" not in r.stderr, r.stderr
    r = esgraph_cli("run", onnx_file, "--bind", "N=5", "--repeat", 0)
    assert r.returncode == 0, r.stderr
    assert "y: float32[5, 3]" in r.stdout


def test_info_shows_ops_and_the_memory_plan(onnx_file):
    r = esgraph_cli("info", onnx_file, "--bind", "N=2")
    assert r.returncode == 0, r.stderr
    assert "input  x: f32[2, 4]" in r.stdout  # --bind fixes the batch while importing
    assert "MatMul 1" in r.stdout and "Relu 1" in r.stdout
    assert "\narena_bytes: " in r.stdout and "\nlaunches: 1\n" in r.stdout  # the model's facts
    unbound = esgraph_cli("info", onnx_file)  # the plan of N = 1, said so; the input as the model has it
    assert unbound.returncode == 0 and "N bound to 1" in unbound.stderr and "input  x: f32[N, 4]" in unbound.stdout


def test_run_and_info_on_the_simulated_ascend_device(onnx_file, tmp_path, monkeypatch):
    monkeypatch.setenv("ESG_KERNEL_CACHE", str(tmp_path / "kernels"))  # the CLI's subprocess inherits it
    x = np.array([[1, -2, 3, 4], [0, 0, 0, 1]], dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    r = esgraph_cli("run", onnx_file, "-i", f"x={tmp_path / 'x.npy'}", "--repeat", 1, "--backend", "ascend-sim")
    assert r.returncode == 0, r.stderr
    assert "y: float32[2, 3]" in r.stdout
    info = esgraph_cli("info", onnx_file, "--bind", "N=2", "--backend", "ascend-sim")
    assert info.returncode == 0, info.stderr
    assert "\nbackend: ascend\nsimulated: 1\n" in info.stdout and "function: aclnnMatmul, count: 1" in info.stdout
    bad = esgraph_cli("run", onnx_file, "--bind", "N=2", "--backend", "tpu")
    assert bad.returncode != 0 and "invalid choice: 'tpu'" in bad.stderr
    # The choices are the library's table, as esgraph.backends() lists it.
    assert all(f"'{name}'" in bad.stderr for name in esgraph.backends())


def test_backends_lists_the_table_cpu_first():
    names = esgraph.backends()
    assert names[0] == "cpu" and names.count("ascend-sim") == 1
    with esgraph.GraphBuilder("g") as b:
        x = b.input("x", esgraph.f32, [4])
    graph = b.build([ops.relu(x)])
    with pytest.raises(esgraph.InvalidArgumentError, match="backend 'tpu'; valid: 'cpu'"):
        esgraph.compile(graph, backend="tpu")


def test_dot_of_an_esgraph_graph_file(tmp_path):
    with esgraph.GraphBuilder("saved") as b:
        x = b.input("x", esgraph.f32, [2, 2])
        y = ops.exp(x) + 1
    path = tmp_path / "g.esg"
    b.build([y]).save(path)
    r = esgraph_cli("dot", path, "-o", tmp_path / "g.dot")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "g.dot").read_text().startswith("digraph")
    compiled = esgraph_cli("dot", path, "--compiled")
    assert compiled.returncode == 0 and "digraph" in compiled.stdout
    run = esgraph_cli("run", path, "--repeat", 1)
    assert run.returncode == 0 and "float32[2, 2]" in run.stdout


@pytest.mark.parametrize("args, message", [
    (["run", "missing.onnx"], "no such file"),
    (["frobnicate", "m.onnx"], "invalid choice"),
])
def test_command_line_mistakes(args, message):
    r = esgraph_cli(*args)
    assert r.returncode == 2 and message in r.stderr


def test_bad_bind_and_unknown_input(onnx_file, tmp_path):
    r = esgraph_cli("run", onnx_file, "--bind", "N=many")
    assert r.returncode != 0 and "NAME=SIZE" in r.stderr
    np.save(tmp_path / "z.npy", np.zeros(3, np.float32))
    r = esgraph_cli("run", onnx_file, "--bind", "N=1", "-i", f"z={tmp_path / 'z.npy'}")
    assert r.returncode != 0 and "no input named z" in r.stderr
    # A negative size, or a symbol the model does not have, is refused (both were ignored).
    for command in ("run", "info", "dot"):
        r = esgraph_cli(command, onnx_file, "--bind", "N=-5")
        assert r.returncode != 0 and "--bind N: a size is at least 0, got -5" in r.stderr, r.stderr
        r = esgraph_cli(command, onnx_file, "--bind", "M=3")
        assert r.returncode != 0 and "--bind M: " in r.stderr and "has no such symbolic dimension (its symbols: N)" in r.stderr, r.stderr
    r = esgraph_cli("compile", onnx_file, "-o", str(tmp_path / "m.esgm"), "--bind", "M=1..4")
    assert r.returncode != 0 and "--bind M: " in r.stderr and "(its symbols: N)" in r.stderr, r.stderr


@pytest.mark.parametrize("arg, message", [("x", "NAME=FILE.npy"), ("x=missing.npy", "no such file"),
                                          ("x=/tmp", "-i x: /tmp is a folder; give a .npy file")])
def test_bad_input_arguments(onnx_file, arg, message):
    r = esgraph_cli("run", onnx_file, "--bind", "N=1", "-i", arg)
    assert r.returncode != 0 and message in r.stderr and "Traceback" not in r.stderr


def test_an_npz_input_is_named_as_several_arrays(onnx_file, tmp_path):
    np.savez(tmp_path / "x.npz", a=np.ones((2, 4), np.float32))
    r = esgraph_cli("run", onnx_file, "-i", f"x={tmp_path / 'x.npz'}")
    assert r.returncode != 0 and "holds several arrays (.npz); give one .npy file" in r.stderr and "Traceback" not in r.stderr


def test_an_input_given_twice_is_refused(onnx_file, tmp_path):
    """The last one won, silently."""
    np.save(tmp_path / "x.npy", np.ones((2, 4), np.float32))
    r = esgraph_cli("run", onnx_file, "-i", f"x={tmp_path / 'x.npy'}", "-i", f"x={tmp_path / 'x.npy'}")
    assert r.returncode != 0 and "-i x: given twice" in r.stderr and "Traceback" not in r.stderr


def test_an_input_file_of_another_dtype_is_named_with_what_to_save(onnx_file, tmp_path):
    """The command line converts nothing; its advice was Python's cast=True."""
    np.save(tmp_path / "x.npy", np.ones((2, 4), np.int64))
    r = esgraph_cli("run", onnx_file, "-i", f"x={tmp_path / 'x.npy'}")
    assert r.returncode != 0 and "Traceback" not in r.stderr and "cast=True" not in r.stderr
    assert "x.npy holds int64, the model's `x` is f32: save it as float32 (numpy: array.astype(numpy.float32))" in r.stderr


@pytest.mark.parametrize("content", [b"\x93NUMPY garbage", b"root:x:0:0:root:/root:/bin/bash\n", b""], ids=["corrupt", "text", "empty"])
def test_an_input_file_that_is_no_npy_is_an_error_not_a_traceback(onnx_file, tmp_path, content):
    path = tmp_path / "x.npy"
    path.write_bytes(content)
    r = esgraph_cli("run", onnx_file, "--bind", "N=1", "-i", f"x={path}")
    # a file without numpy's header is named as such (numpy called it "pickled data")
    why = "is not a .npy file numpy can read" if content.startswith(b"\x93NUMPY") else "does not start with numpy's header"
    assert r.returncode != 0 and why in r.stderr and "pickled" not in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_corrupt_graph_file_is_an_error_not_a_crash(tmp_path):
    path = tmp_path / "bad.esg"
    path.write_bytes(b"ESG\x00garbage")
    r = esgraph_cli("info", path)
    assert r.returncode == 1 and r.stderr.startswith("esgraph: ")


@pytest.mark.parametrize("content", [b"", b"\x00garbage\xff" * 8, b"\x08"], ids=["empty", "garbage", "truncated"])
def test_what_is_not_an_onnx_model_is_an_error_with_a_non_zero_exit(tmp_path, content):
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    for verb in ("run", "info", "dot"):
        r = esgraph_cli(verb, path)
        assert r.returncode == 1 and "is not an ONNX model" in r.stderr, (verb, r.stderr)


def test_dot_of_the_compiled_graph_binds_a_symbol_left_unbound_to_1(onnx_file):
    r = esgraph_cli("dot", onnx_file, "--compiled")
    assert r.returncode == 0 and r.stdout.startswith("digraph") and "N bound to 1" in r.stderr, r.stderr
    r = esgraph_cli("dot", onnx_file, "--compiled", "--bind", "N=2")
    assert r.returncode == 0 and r.stdout.startswith("digraph")


def test_an_unsupported_onnx_model_lists_its_nodes(tmp_path):
    graph = helper.make_graph([helper.make_node("Bernoulli", ["x"], ["y"])], "coin",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    path = tmp_path / "coin.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]).SerializeToString())
    r = esgraph_cli("info", path)
    assert r.returncode == 1 and "Bernoulli" in r.stderr and "Traceback" not in r.stderr


def test_bind_fixes_a_dynamic_batch_that_shape_computations_need(tmp_path):
    # What torch.onnx.export writes for a dynamic batch: the batch read back with Shape and
    # used to Reshape. --bind fixes N while importing, so the chain folds.
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "zero_axis"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus_one"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "zero_axis"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus_one")]
    graph = helper.make_graph(nodes, "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 12])], inits)
    path = tmp_path / "dyn.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    r = esgraph_cli("run", path, "--bind", "N=2", "--repeat", 0)
    assert r.returncode == 0, r.stderr
    assert "y: float32[2, 12]" in r.stdout
    # Unbound, N is 1 as for any model: the reshape keeps x's own N (one graph for every N).
    unbound = esgraph_cli("run", path, "--repeat", 0)
    assert unbound.returncode == 0, unbound.stderr
    assert "y: float32[1, 12]" in unbound.stdout
    assert "N bound to 1" in unbound.stderr and "depends on its inputs" not in unbound.stderr
    info = esgraph_cli("info", path)
    assert "input  x: f32[N, 3, 4]" in info.stdout and "depends on its inputs" not in info.stderr


@pytest.fixture
def shape_input_file(tmp_path):
    """A model whose graph depends on an input's value: x reshaped to the shape input s holds."""
    graph = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], "by_value",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                               helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "by_value.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    assert isinstance(esgraph.onnx.load(str(path)), esgraph.onnx.ValueDependentGraph)
    np.save(tmp_path / "s.npy", np.array([3, 4], np.int64))
    x = np.arange(-6, 6, dtype=np.float32).reshape(2, 6)
    np.save(tmp_path / "x.npy", x)
    return path, tmp_path / "s.npy", tmp_path / "x.npy", x


def test_run_info_and_dot_take_the_graph_of_a_value_dependent_models_inputs(shape_input_file):
    # They refused the model whatever was given: it is now the graph those inputs make.
    path, s, x_file, x = shape_input_file
    r = esgraph_cli("run", path, "-i", f"s={s}", "-i", f"x={x_file}", "--repeat", 0, "--show", 100)
    assert r.returncode == 0, r.stderr
    assert "y: float32[3, 4]" in r.stdout and "the values of s" in r.stderr
    printed = r.stdout.split("y: float32[3, 4]")[1].split("compile")[0]  # the array, up to the timing line
    assert np.array_equal(np.array(printed.replace("[", " ").replace("]", " ").split(), np.float32), np.maximum(x, 0).reshape(-1))
    info = esgraph_cli("info", path, "-i", f"s={s}")
    assert info.returncode == 0, info.stderr
    assert "launches:" in info.stdout
    dot = esgraph_cli("dot", path, "-i", f"s={s}")
    assert dot.returncode == 0 and dot.stdout.startswith("digraph"), dot.stderr


def test_a_value_dependent_model_without_its_shape_input_names_it(shape_input_file):
    path, _, x_file, _ = shape_input_file
    for command in (["run"], ["info"], ["dot"], ["run", "-i", f"x={x_file}"]):
        r = esgraph_cli(*command, path)
        assert r.returncode == 1 and "depends on the values of s: give them with -i NAME=FILE.npy" in r.stderr, r.stderr


def test_sequences_in_and_out(tmp_path):
    # A sequence output prints as its elements; a sequence input is refused by name, not by a traceback.
    seq = helper.make_value_info("s", helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None)))
    opset = [helper.make_opsetid("", 13)]
    out = tmp_path / "split.onnx"
    out.write_bytes(helper.make_model(helper.make_graph(
        [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0)], "split",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])], [seq]), opset_imports=opset).SerializeToString())
    r = esgraph_cli("run", out, "--repeat", 0)
    assert r.returncode == 0, r.stderr
    assert all(f"s[{k}]: float32[1, 2]" in r.stdout for k in range(3)), r.stdout
    into = tmp_path / "concat.onnx"
    into.write_bytes(helper.make_model(helper.make_graph(
        [helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)], "concat", [seq],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), opset_imports=opset).SerializeToString())
    for command in ("run", "info"):
        r = esgraph_cli(command, into)
        assert r.returncode == 1 and "input(s) s are sequences or optionals, which the command line does not make" in r.stderr


def test_quantize_writes_a_qdq_file_and_prints_each_ops_error(onnx_file, tmp_path):
    rng = np.random.default_rng(0)
    batches = [rng.standard_normal((8, 4)).astype(np.float32) for _ in range(2)]
    for k, b in enumerate(batches):
        np.save(tmp_path / f"b{k}.npy", b)
    out = tmp_path / "m_int8.onnx"
    r = esgraph_cli("quantize", onnx_file, "-o", out, "-c", f"x={tmp_path / 'b0.npy'}", "-c", f"x={tmp_path / 'b1.npy'}",
                    "--method", "percentile")
    assert r.returncode == 0, r.stderr
    # The file is what esgraph.quantize makes of the same batches with percentile calibration:
    # the one product's input quantized with the same scale and zero point, its weights as s8
    # codes, its result left f32 (no QuantizeLinear after it).
    import onnx
    model = onnx.load(str(out))
    kinds = [n.op_type for n in model.graph.node]
    assert kinds.count("MatMul") == 1 and kinds.count("QuantizeLinear") == 1 and kinds.count("DequantizeLinear") == 2
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    q = next(n for n in model.graph.node if n.op_type == "QuantizeLinear")
    again = esgraph.quantize(esgraph.onnx.load(str(onnx_file)), batches, method="percentile")
    assert len(again.layers) == 1 and not again.layers[0].quantized_result
    esgraph.onnx.save(again.graph, str(tmp_path / "again.onnx"))
    theirs = onnx.load(str(tmp_path / "again.onnx"))
    their_q = next(n for n in theirs.graph.node if n.op_type == "QuantizeLinear")
    their_inits = {i.name: numpy_helper.to_array(i) for i in theirs.graph.initializer}
    for k in (1, 2):
        np.testing.assert_array_equal(inits[q.input[k]], their_inits[their_q.input[k]])
    # ONNX Runtime runs it, close to the float product (SQNR over 30 dB).
    ort = pytest.importorskip("onnxruntime")
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"x": batches[0]})[0]
    want = np.maximum(batches[0] @ W, 0)
    np.testing.assert_allclose(got, want, atol=0.02)
    assert 10 * np.log10(np.sum(want ** 2) / np.sum((got - want) ** 2)) > 30
    # Any other name: an esgraph graph file.
    r = esgraph_cli("quantize", onnx_file, "-o", tmp_path / "m_int8.esg", "-c", f"x={tmp_path / 'b0.npy'}")
    assert r.returncode == 0, r.stderr
    model = esgraph.compile(esgraph.Graph.load(str(tmp_path / "m_int8.esg")))
    np.testing.assert_allclose(model.run([batches[0]])[0], np.maximum(batches[0] @ W, 0), atol=0.02)


def test_quantize_refuses_missing_or_misnamed_calibration(onnx_file, tmp_path):
    np.save(tmp_path / "b.npy", np.ones((2, 4), np.float32))
    cases = [
        ((), "calibration needs a batch of every input: give -c x=FILE.npy"),
        (("-c", f"y={tmp_path / 'b.npy'}"), "-c y: the model has no such input (its inputs: x)"),
        (("-c", "x"), "-c expects NAME=FILE.npy, got 'x'"),
        (("-c", f"x={tmp_path / 'none.npy'}"), "-c x: no such file"),
        (("-c", f"x={tmp_path / 'b.npy'}", "--keep-float", "matmul"), "nothing to quantize"),
    ]
    for extra, message in cases:
        r = esgraph_cli("quantize", onnx_file, "-o", tmp_path / "q.onnx", *extra)
        assert r.returncode != 0 and message in r.stderr, (extra, r.stderr)
        assert "Traceback" not in r.stderr


def test_quantize_weight_only_needs_no_calibration(onnx_file, tmp_path):
    out = tmp_path / "m_nbits.onnx"
    r = esgraph_cli("quantize", onnx_file, "-o", out, "--weight-only", 8, "--block-size", 16)
    assert r.returncode == 0, r.stderr
    import onnx
    nbits = [n for n in onnx.load(str(out)).graph.node if n.op_type == "MatMulNBits"]
    assert len(nbits) == 1
    assert {a.name: a.i for a in nbits[0].attribute if a.name in ("bits", "block_size")} == {"bits": 8, "block_size": 16}
    x = np.array([[1, -2, 3, 4]], np.float32)
    got = esgraph.compile(str(out)).run([x])[0]
    np.testing.assert_allclose(got, np.maximum(x @ W, 0), atol=0.02)


@pytest.fixture
def filled_16_gib(tmp_path):
    """165 bytes of ONNX whose run fills 2^32 floats (ConstantOfShape, then ReduceSum and Add):
    the import keeps the fill for the run, which would allocate 16 GiB."""
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
             helper.make_node("ReduceSum", ["c"], ["r"], keepdims=0), helper.make_node("Add", ["r", "x"], ["y"])]
    graph = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
                              [numpy_helper.from_array(np.array([2**32], np.int64), "s")])
    path = tmp_path / "big.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    return path


def test_run_max_memory_refuses_a_model_before_it_allocates(filled_16_gib):
    r = esgraph_cli("run", filled_16_gib, "--max-memory", "1G")
    assert r.returncode == 1 and "needs 17179869252 bytes" in r.stderr and "more than max_memory_bytes (1073741824)" in r.stderr, r.stderr
    r = esgraph_cli("run", filled_16_gib, "--max-memory", "lots")
    assert r.returncode != 0 and "--max-memory expects a byte count such as 4096, 512M or 2G, got 'lots'" in r.stderr


def test_running_out_of_memory_is_an_error_not_a_traceback(filled_16_gib):
    """Where the machine refuses the allocation (here a 4 GiB address-space limit), the command
    says so in one line and how to refuse such a model up front (it printed MemoryError's
    traceback)."""
    import resource

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-m", "esgraph", "run", str(filled_16_gib)], capture_output=True, text=True, env=env,
                       preexec_fn=limited)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "esgraph: out of memory running" in r.stderr and "--max-memory BYTES refuses such a model" in r.stderr
