"""How an ONNX file's weights reach the graph: large initializers are read from the file into
the arrays the constants use in place (never through protobuf), and Python's constants read
read-only arrays in place (esgraph.constant(copy=False)). See python/esgraph/onnx/_weights.py."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402
from onnx.external_data_helper import uses_external_data  # noqa: E402

import esgraph  # noqa: E402
import esgraph.onnx  # noqa: E402

from onnx_models import F32, init, make, vi  # noqa: E402


def _linear(k=512, n=640, seed=0):
    """x @ W + b, with W large enough to be read apart (1.25 MiB) and b small."""
    rng = np.random.default_rng(seed)
    w, b = rng.standard_normal((k, n)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    model = make([helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "B"], ["y"])],
                 [vi("x", F32, [4, k])], [vi("y", F32, [4, n])], [init("W", w), init("B", b)])
    return model, w, b


# esgraph.constant(copy=False)
def test_a_read_only_array_is_a_constant_read_in_place():
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    w.setflags(write=False)
    references = sys.getrefcount(w)
    with esgraph.GraphBuilder("in_place") as b:
        x = b.input("x", esgraph.f32, [2, 3])
        y = esgraph.ops.matmul(x, esgraph.constant(w, copy=False))
        graph = b.build([y])
    assert sys.getrefcount(w) == references + 1, "the graph holds the array itself, not a copy"
    model = esgraph.compile(graph)
    del graph
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(model(x), x @ w)
    del model
    assert sys.getrefcount(w) == references, "and lets it go with the last model"


@pytest.mark.parametrize("value, dtype, message", [
    (np.zeros(4, np.float32), None, "the array is writeable"),
    (np.zeros((4, 4), np.float32)[:, ::2], None, "not C-contiguous"),
    (np.zeros(4, np.float64), esgraph.f32, "holds float64, not f32"),
    ([1.0, 2.0], None, "reads a numpy array in place, got list"),
    (np.array(["a"]), None, "has no esgraph dtype"),
], ids=["writeable", "strided", "a-dtype-to-convert-to", "list", "strings"])
def test_what_cannot_be_read_in_place_is_refused_by_name(value, dtype, message):
    if isinstance(value, np.ndarray):
        value.setflags(write=value.flags.writeable and message == "the array is writeable")
    with esgraph.GraphBuilder("refused") as b:
        with pytest.raises(esgraph.InvalidArgumentError, match=message):
            b.constant(value, dtype, copy=False)


# ONNX files
def test_large_initializers_are_read_from_the_file_not_through_protobuf(tmp_path, monkeypatch):
    model, w, b = _linear()
    path = tmp_path / "linear.onnx"
    path.write_bytes(model.SerializeToString())
    opened = esgraph.onnx.open_model(path)
    weight, bias = opened.proto.graph.initializer
    # W is ONNX external data pointing back into the model file; the small B stays inline.
    assert uses_external_data(weight) and not uses_external_data(bias)
    where = {e.key: e.value for e in weight.external_data}
    assert where["location"] == "linear.onnx" and int(where["length"]) == w.nbytes
    assert path.read_bytes()[int(where["offset"]):][:w.nbytes] == w.tobytes()
    monkeypatch.chdir(tmp_path)  # onnx's checker finds external data from the working folder
    onnx.checker.check_model(opened.proto)  # a valid ONNX model still
    x = np.random.default_rng(1).standard_normal((4, 512)).astype(np.float32)
    got = esgraph.compile(esgraph.onnx.load(opened))(x)
    np.testing.assert_allclose(got, x.astype(np.float64) @ w + b, rtol=1e-5, atol=1e-4)
    # The same file given as bytes parses whole, and computes the same.
    np.testing.assert_array_equal(esgraph.compile(esgraph.onnx.load(path.read_bytes()))(x), got)


@pytest.mark.parametrize("n, offset", [(640, 0), (1024, 16), (3072, 16)])
def test_weights_read_from_the_file_start_where_the_kernels_read_them_best(tmp_path, n, offset):
    # On a cache line, but 16 bytes past one when the rows lie a multiple of 4 KiB apart (the
    # rule of the constants the builder copies, ir/builder.cpp): reading such rows in place from
    # a line maps every row to one L1 set.
    model, w, b = _linear(k=512, n=n)  # a file of over 1 MiB: its weights are read apart
    path = tmp_path / "linear.onnx"
    path.write_bytes(model.SerializeToString())
    opened = esgraph.onnx.open_model(path)
    weight = opened.weights.array(0, opened.proto.graph.initializer[0])
    assert weight.ctypes.data % 64 == offset
    np.testing.assert_array_equal(weight, w)


def test_weights_come_from_the_file_as_opened_whatever_replaces_it(tmp_path):
    model, w, b = _linear()
    path = tmp_path / "linear.onnx"
    path.write_bytes(model.SerializeToString())
    opened = esgraph.onnx.open_model(path)
    other, _, _ = _linear(seed=7)
    replacement = tmp_path / "other.onnx"
    replacement.write_bytes(other.SerializeToString())
    os.replace(replacement, path)  # a deployment swapping the file under its name
    x = np.ones((4, 512), np.float32)
    np.testing.assert_allclose(esgraph.compile(esgraph.onnx.load(opened))(x), x.astype(np.float64) @ w + b, rtol=1e-5, atol=1e-4)


def test_a_large_initializer_whose_bytes_do_not_fill_its_dims_is_reported(tmp_path):
    model, w, _ = _linear()
    model.graph.initializer[0].dims[:] = [512, 641]  # one column more than its bytes hold
    path = tmp_path / "short.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(esgraph.onnx.ImportFailed, match=r"initializer 'W'.*do not hold \[512, 641\] float32 elements"):
        esgraph.onnx.load(path)


def test_a_file_cut_inside_a_large_initializer_is_a_format_error(tmp_path):
    model, _, _ = _linear()
    data = model.SerializeToString()
    path = tmp_path / "cut.onnx"
    for keep in (len(data) // 3, len(data) // 2, len(data) - 100):
        path.write_bytes(data[:keep])
        with pytest.raises(esgraph.FormatError, match="is not an ONNX model"):
            esgraph.onnx.load(path)


def test_importing_holds_the_weights_once(tmp_path):
    """Parsed whole, the weights were held three times over while importing (the file's bytes
    or protobuf's message, numpy's copy and the constant's); now once. Measured in a process of
    its own: its peak resident memory, against its size before the import."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4096, 4096)).astype(np.float32)  # 64 MiB
    model = make([helper.make_node("MatMul", ["x", "W"], ["y"])], [vi("x", F32, [1, 4096])], [vi("y", F32, [1, 4096])],
                 [numpy_helper.from_array(w, "W")])
    path = tmp_path / "big.onnx"
    onnx.save(model, str(path))
    del model, w
    script = textwrap.dedent(f"""
        import esgraph, esgraph.onnx
        def peak():
            return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) * 1024
        before = peak()
        graph = esgraph.onnx.load({str(path)!r})
        print(peak() - before)
    """)
    grown = int(subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}).stdout)
    weights = 4096 * 4096 * 4
    assert grown < 1.3 * weights, f"importing 64 MiB of weights grew the process by {grown / 2**20:.0f} MiB"
