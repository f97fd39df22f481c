"""esgraph.tensorflow.load's sources, options and refusals: hostile and foreign files, graphs
with unsupported ops (every one named at once), inputs and outputs chosen by name, and the
command line. The graphs here are written with esgraph's own copy of TF's schema where
TensorFlow would refuse to make them."""
import subprocess
import sys

import numpy as np
import pytest

import esgraph
from esgraph.tensorflow import _schema
from tf_models import Frozen, assert_matches_tensorflow, rand, spec, tf


def _node(graph, name, op, inputs=(), **attrs):
    node = graph.node.add(name=name, op=op)
    node.input.extend(inputs)
    for key, value in attrs.items():
        if isinstance(value, bool):
            node.attr[key].b = value
        elif isinstance(value, int):
            node.attr[key].type = value
        elif isinstance(value, list):  # a shape
            for d in value:
                node.attr[key].shape.dim.add(size=d)
    return node


def _placeholder(graph, name, dims, dtype=1):
    return _node(graph, name, "Placeholder", dtype=dtype, shape=dims)


def _constant(graph, name, dims, dtype=1, content=None, floats=(), ints=()):
    """A Const node of `dims`: its raw bytes, or a list of values spread over the shape."""
    tensor = _node(graph, name, "Const", dtype=dtype).attr["value"].tensor
    tensor.dtype = dtype
    for d in dims:
        tensor.tensor_shape.dim.add(size=d)
    if content is not None:
        tensor.tensor_content = content
    tensor.float_val.extend(floats)
    tensor.int_val.extend(ints)


def test_sources_a_path_bytes_and_a_tf_graph_def(tmp_path):
    frozen = Frozen(lambda x: tf.nn.relu(x) * 2.0, spec(2, 3))
    path = tmp_path / "model.pb"
    path.write_bytes(frozen.data)
    x = rand(2, 3)
    for source in (str(path), path, frozen.data, frozen.graph_def):
        np.testing.assert_allclose(esgraph.compile(esgraph.tensorflow.load(source))(x), frozen.reference(x)[0])


@pytest.mark.parametrize("data", [b"", b"\x00" * 7, b"garbage, not a protobuf \xff\xff\xff", b"\x0a\xff\xff\xff\xff\x0f"])
def test_foreign_and_truncated_bytes_are_format_errors(data):
    with pytest.raises(esgraph.FormatError, match="not a TensorFlow GraphDef"):
        esgraph.tensorflow.load(data)


def test_a_truncated_file_is_a_format_error(tmp_path):
    frozen = Frozen(lambda x: tf.nn.conv2d(x, rand(3, 3, 2, 4), 1, "SAME"), spec(1, 5, 5, 2))
    for cut in (len(frozen.data) // 2, len(frozen.data) - 3):
        with pytest.raises(esgraph.FormatError):
            esgraph.tensorflow.load(frozen.data[:cut])


def test_foreign_directories_and_a_tfjs_model_are_named(tmp_path):
    (tmp_path / "saved").mkdir()
    with pytest.raises(esgraph.FormatError, match="a directory, but not a SavedModel"):
        esgraph.tensorflow.load(tmp_path / "saved")
    (tmp_path / "saved" / "saved_model.pb").write_bytes(b"")
    with pytest.raises(esgraph.FormatError, match="has no MetaGraphDef tagged \\['serve'\\]"):
        esgraph.tensorflow.load(tmp_path / "saved")
    with pytest.raises(FileNotFoundError):  # a file that is not there is the OSError, as for any file
        esgraph.tensorflow.load(str(tmp_path / "model.json"))
    with pytest.raises(TypeError, match="expected a path, bytes or a GraphDef"):
        esgraph.tensorflow.load(3)


def test_every_unsupported_op_is_named_at_once():
    graph = _schema.GraphDef()
    _placeholder(graph, "x", [2, 3])
    _node(graph, "a", "Bucketize", ["x"], T=1)
    _node(graph, "b", "Relu", ["a"], T=1)  # after a failure: skipped, not reported
    _node(graph, "c", "Cumprod", ["x", "x"], T=1)
    _node(graph, "d", "AddV2", ["b", "c"], T=1)
    with pytest.raises(esgraph.tensorflow.ImportFailed) as e:
        esgraph.tensorflow.load(graph.SerializeToString())
    failures = e.value.failures
    assert [where.split(" ")[0] for where, _ in failures] == ["Bucketize", "Cumprod"]
    assert all("no converter for this op" in why for _, why in failures)
    assert "2 unsupported node(s)" in str(e.value)


def test_broken_references_and_cycles_are_named():
    graph = _schema.GraphDef()
    _placeholder(graph, "x", [2])
    _node(graph, "a", "Relu", ["nowhere:0"], T=1)
    _node(graph, "b", "AddV2", ["x", "c"], T=1)
    _node(graph, "c", "Relu", ["b"], T=1)
    _node(graph, "out", "AddV2", ["a", "c"], T=1)
    with pytest.raises(esgraph.tensorflow.ImportFailed) as e:
        esgraph.tensorflow.load(graph.SerializeToString(), outputs=["out"])
    text = str(e.value)
    assert "reads 'nowhere:0', which no node of the graph makes" in text
    assert "cycle" in text


def test_element_types_esgraph_lacks_are_named():
    graph = _schema.GraphDef()
    _placeholder(graph, "s", [2], dtype=7)  # DT_STRING
    _node(graph, "y", "Identity", ["s"], T=7)
    with pytest.raises(esgraph.tensorflow.ImportFailed, match="element type string"):
        esgraph.tensorflow.load(graph.SerializeToString())


def test_a_constant_whose_data_does_not_fill_its_shape():
    graph = _schema.GraphDef()
    _placeholder(graph, "x", [4])
    _constant(graph, "c", [4], content=b"\x00" * 12)
    _node(graph, "y", "AddV2", ["x", "c"], T=1)
    with pytest.raises(esgraph.tensorflow.ImportFailed, match="12 bytes of data do not hold"):
        esgraph.tensorflow.load(graph.SerializeToString())


def test_a_huge_constant_is_refused_before_it_is_made():
    """A splat constant of 2^40 floats in a file of a few dozen bytes."""
    graph = _schema.GraphDef()
    _placeholder(graph, "x", [1])
    _constant(graph, "c", [1 << 40], floats=[1.0])
    _node(graph, "y", "Sum", ["c", "axes"], T=1)
    _constant(graph, "axes", [], dtype=3, ints=[0])
    with pytest.raises(esgraph.tensorflow.ImportFailed, match="beyond the import's memory cap"):
        esgraph.tensorflow.load(graph.SerializeToString(), outputs=["y"])


def test_inputs_and_outputs_by_name():
    def fn(x):
        a = tf.nn.relu(x, name="a")
        return tf.identity(a * 3.0, name="b"), tf.identity(a + 1.0, name="c")
    frozen = Frozen(fn, spec(2, 3))
    x = rand(2, 3)
    # cut at a: its value is the input, whose shape only shapes= can say
    with pytest.raises(esgraph.tensorflow.ImportFailed, match="input 'a': has no known rank; give its shape with shapes="):
        esgraph.tensorflow.load(frozen.data, inputs=["a"], outputs=["b:0"])
    g = esgraph.tensorflow.load(frozen.data, inputs=["a"], outputs=["b:0"], shapes={"a": [2, 3]})
    np.testing.assert_allclose(esgraph.compile(g)(x), x * 3.0, rtol=1e-6)
    with pytest.raises(esgraph.tensorflow.ImportFailed, match="no node named 'nope'"):
        esgraph.tensorflow.load(frozen.data, outputs=["nope"])
    with pytest.raises(esgraph.tensorflow.ImportFailed, match="no node named 'nope'"):
        esgraph.tensorflow.load(frozen.data, inputs=["nope"])


def test_unknown_sizes_are_symbols_and_shapes_overrides_them():
    w = rand(3, 3, 3, 4, seed=1)
    frozen = Frozen(lambda x: tf.reduce_mean(tf.nn.conv2d(x, w, 1, "VALID"), axis=[1, 2]), spec(None, None, None, 3))
    model = esgraph.compile(esgraph.tensorflow.load(frozen.data, shapes={"x": ["n", 8, 9, 3]}))
    for batch in (1, 3):
        x = rand(batch, 8, 9, 3)
        np.testing.assert_allclose(model(x), frozen.reference(x)[0], rtol=1e-5, atol=1e-5)


def test_a_dynamic_batch_flattened_is_one_graph():
    """Keras's Flatten computes [batch, -1] from Shape: one symbolic graph serves every batch."""
    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((4, 4, 2)), keras.layers.Conv2D(3, 3), keras.layers.Flatten(), keras.layers.Dense(5)])
    frozen = Frozen(lambda x: model(x, training=False), spec(None, 4, 4, 2))
    assert any(n.op == "Shape" for n in frozen.graph_def.node)
    for batch in (1, 4):
        assert_matches_tensorflow(frozen, rand(batch, 4, 4, 2))


def test_the_command_line_runs_a_frozen_graph(tmp_path):
    frozen = Frozen(lambda x: tf.nn.softmax(x), spec(2, 5))
    path = tmp_path / "model.pb"
    path.write_bytes(frozen.data)
    out = subprocess.run([sys.executable, "-m", "esgraph", "run", str(path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "Identity" in out.stdout
    out = subprocess.run([sys.executable, "-m", "esgraph", "info", str(path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "softmax" in out.stdout, out.stdout + out.stderr


def test_the_memory_cap_counts_every_spread_constant():
    """Two splat constants whose sum passes the cap, the first filling it exactly."""
    graph = _schema.GraphDef()
    _placeholder(graph, "x", [1])
    _constant(graph, "a", [100], floats=[1.0])
    _constant(graph, "b", [100000], floats=[1.0])
    _constant(graph, "axes", [], dtype=3, ints=[0])
    _node(graph, "sa", "Sum", ["a", "axes"], T=1)
    _node(graph, "sb", "Sum", ["b", "axes"], T=1)
    _node(graph, "y", "AddV2", ["sa", "sb"], T=1)
    with pytest.raises(esgraph.tensorflow.ImportFailed, match="beyond the import's memory cap"):
        esgraph.tensorflow.load(graph.SerializeToString(), outputs=["y"], max_memory_bytes=400)


def test_a_range_is_held_against_the_cap():
    frozen = Frozen(lambda x: x + tf.reduce_sum(tf.cast(tf.range(1000000), tf.float32)), spec(1))
    with pytest.raises(esgraph.tensorflow.ImportFailed, match="Range's values would take"):
        esgraph.tensorflow.load(frozen.data, max_memory_bytes=1000)


def test_a_tile_of_symbolic_sizes_is_bounded():
    frozen = Frozen(lambda x: tf.tile(x, [5000, 1]), spec(None, 2))
    with pytest.raises(esgraph.tensorflow.ImportFailed, match="repeated 5000 times"):
        esgraph.tensorflow.load(frozen.data)


def test_integer_division_is_refused_by_name():
    frozen = Frozen(lambda a, b: tf.raw_ops.Div(x=a, y=b), spec(3, dtype="int32"), spec(3, dtype="int32"))
    with pytest.raises(esgraph.tensorflow.ImportFailed, match="Div of integers"):
        esgraph.tensorflow.load(frozen.data)


def test_malformed_control_flow_and_function_references_are_named():
    graph = _schema.GraphDef()
    _placeholder(graph, "x", [2])
    _node(graph, "s", "Switch", ["x"], T=1)  # no predicate
    with pytest.raises(esgraph.tensorflow.ImportFailed, match="a Switch of 1 inputs"):
        esgraph.tensorflow.load(graph.SerializeToString(), outputs=["s"])
    graph = _schema.GraphDef()
    _placeholder(graph, "x", [2])
    f = graph.library.function.add()
    f.signature.name = "f"
    f.signature.input_arg.add(name="a", type=1)
    f.signature.output_arg.add(name="out", type=1)
    body = f.node_def.add(name="r", op="Relu")
    body.input.append("a")
    f.ret["out"] = "r:y:z"  # not an index
    call = _node(graph, "call", "PartitionedCall", ["x"])
    call.attr["f"].func.name = "f"
    with pytest.raises(esgraph.tensorflow.ImportFailed, match="its index is not a number"):
        esgraph.tensorflow.load(graph.SerializeToString())


def test_a_fused_nchw_convolution_adds_its_residual_as_it_lies():
    """_FusedConv2D in NCHW (TF's CPU kernels take NHWC only, so the graph is written here, and
    numpy is the reference): its residual is NCHW already."""
    x, w, b, r = rand(1, 2, 3, 3), rand(1, 1, 2, 2, seed=1), rand(2, seed=2), rand(1, 2, 3, 3, seed=3)
    graph = _schema.GraphDef()
    _placeholder(graph, "x", [1, 2, 3, 3])
    _placeholder(graph, "r", [1, 2, 3, 3])
    _constant(graph, "w", [1, 1, 2, 2], content=w.tobytes())
    _constant(graph, "b", [2], content=b.tobytes())
    conv = _node(graph, "y", "_FusedConv2D", ["x", "w", "b", "r"], T=1)
    for key, value in (("data_format", b"NCHW"), ("padding", b"VALID")):
        conv.attr[key].s = value
    conv.attr["strides"].list.i.extend([1, 1, 1, 1])
    conv.attr["fused_ops"].list.s.extend([b"BiasAdd", b"Add"])
    model = esgraph.compile(esgraph.tensorflow.load(graph.SerializeToString()))
    want = np.einsum("nchw,co->nohw", x, w[0, 0]) + b[None, :, None, None] + r
    np.testing.assert_allclose(model.run({"x": x, "r": r})[0], want, rtol=1e-5, atol=1e-6)


def test_a_per_channel_operand_computed_at_run_time():
    """A [C] bias that is an input, added to a convolution's NCHW result."""
    w = rand(3, 3, 2, 4, seed=1)
    frozen = Frozen(lambda x, b: tf.nn.conv2d(x, w, 1, "SAME") + b, spec(2, 5, 5, 2), spec(4))
    assert_matches_tensorflow(frozen, rand(2, 5, 5, 2), rand(4, seed=2))


def test_the_command_line_compiles_a_saved_model_once(tmp_path):
    """`compile` writes a compiled-model file from a SavedModel directory; `run` loads it."""
    keras = pytest.importorskip("keras")
    from tf_models import saved
    model = keras.Sequential([keras.Input((6, 6, 3)), keras.layers.Conv2D(4, 3), keras.layers.GlobalAveragePooling2D()])
    path = saved(model, tmp_path / "saved", keras_export=True)
    (name,) = esgraph.compile(esgraph.tensorflow.load(path)).input_names  # the signature's key: Keras numbers it
    out = tmp_path / "model.esgm"
    done = subprocess.run([sys.executable, "-m", "esgraph", "compile", str(path), "-o", str(out), "--bind", f"{name}_0=2"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and out.exists(), done.stdout + done.stderr
    x = rand(2, 6, 6, 3)
    loaded = esgraph.load_model(str(out))
    np.testing.assert_allclose(loaded(x), model(x, training=False).numpy(), rtol=1e-5, atol=1e-5)


def test_a_loop_frame_that_is_not_a_lowered_loop_is_named():
    graph = _schema.GraphDef()
    _placeholder(graph, "x", [2])
    enter = _node(graph, "e", "Enter", ["x"], T=1)
    enter.attr["frame_name"].s = b"f"
    _node(graph, "y", "Identity", ["e"], T=1)  # an Enter no Merge reads
    with pytest.raises(esgraph.tensorflow.ImportFailed, match="while loop 'f': Enter 'e': 0 Merge nodes where the lowered loop has one"):
        esgraph.tensorflow.load(graph.SerializeToString(), outputs=["y"])
