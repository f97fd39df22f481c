"""Graph: text and dot renderings, save/load, serialize/deserialize and bad files."""
import numpy as np
import pytest

import esgraph
from esgraph import ops


@pytest.fixture
def graph():
    """A small graph with symbols, constants, a scope, an annotation and control flow."""
    with esgraph.GraphBuilder("sample") as b:
        x = b.input("x", esgraph.f32, ["batch", 4])
        p = b.input("p", esgraph.bool_, [])
        with b.name_scope("dense"):
            h = ops.relu(x @ np.ones((4, 3), np.float32) + 0.5)
        with b.annotate("stream", "1"):
            s = ops.softmax(h)
        y = ops.if_(p, lambda: s * 2.0, lambda: s)
        y.name = "probs"
    return b.build([y])


def test_text_rendering(graph):
    text = str(graph)
    assert text == graph.to_text()
    assert text.startswith("graph sample(%x: f32[batch,4], %p: bool[]) {")
    assert "%dense/matmul_1 = matmul(%x, %dense/constant_0)" in text
    assert '@stream="1"' in text
    assert "if(%p) captures(" in text
    assert "return %probs" in text
    assert graph.node_count > 0
    graph.verify()


def test_dot_rendering(graph):
    dot = graph.to_dot()
    assert dot.startswith('digraph "sample" {')
    assert dot.rstrip().endswith("}")
    assert "softmax" in dot and "->" in dot


def test_save_and_load_round_trip(graph, tmp_path):
    path = tmp_path / "sample.esg"
    graph.save(path)  # a pathlib.Path
    assert path.stat().st_size > 0
    loaded = esgraph.Graph.load(str(path))  # or a str
    assert loaded.to_text() == graph.to_text()
    assert loaded.to_dot() == graph.to_dot()
    assert loaded.node_count == graph.node_count
    loaded.verify()


def test_serialize_round_trip(graph, tmp_path):
    data = graph.serialize()
    assert isinstance(data, bytes) and data.startswith(b"ESGRAPH\0")
    again = esgraph.Graph.deserialize(data)
    assert str(again) == str(graph)
    assert again.serialize() == data
    path = tmp_path / "g.esg"
    graph.save(path)
    assert path.read_bytes() == data  # the file holds the same format


@pytest.fixture
def saved(graph, tmp_path):
    path = tmp_path / "good.esg"
    graph.save(path)
    return path


@pytest.mark.parametrize("keep", [0, 7, 47, 48, 100, -1], ids=lambda k: f"keep{k}")
def test_truncated_file_is_a_format_error(saved, keep):
    data = saved.read_bytes()
    saved.write_bytes(data[:keep] if keep >= 0 else data[:-1])
    with pytest.raises(esgraph.FormatError) as info:
        esgraph.Graph.load(saved)
    assert isinstance(info.value, ValueError) and isinstance(info.value, esgraph.Error)


def test_every_single_flipped_byte_is_a_format_error(graph):
    data = graph.serialize()
    for i in range(len(data)):
        broken = bytearray(data)
        broken[i] ^= 0x5A
        with pytest.raises(esgraph.FormatError):
            esgraph.Graph.deserialize(bytes(broken))


def test_flipped_bytes_in_a_file_are_a_format_error(saved):
    data = bytearray(saved.read_bytes())
    data[len(data) // 2] ^= 0xFF
    saved.write_bytes(bytes(data))
    with pytest.raises(esgraph.FormatError, match="corrupted"):
        esgraph.Graph.load(saved)


def test_trailing_bytes_are_a_format_error(graph):
    with pytest.raises(esgraph.FormatError):
        esgraph.Graph.deserialize(graph.serialize() + b"\0\0")


@pytest.mark.parametrize("content", [b"", b"hello, not a graph\n" * 10, b"ESGRAPH", np.arange(100).tobytes()],
                         ids=["empty", "text", "magic-only", "binary"])
def test_a_non_graph_file_is_a_format_error(tmp_path, content):
    path = tmp_path / "other.bin"
    path.write_bytes(content)
    with pytest.raises(esgraph.FormatError):
        esgraph.Graph.load(path)


def test_a_missing_file_is_a_graph_io_error(tmp_path):
    with pytest.raises(esgraph.GraphIOError, match="cannot open") as info:
        esgraph.Graph.load(tmp_path / "missing.esg")
    assert isinstance(info.value, OSError)


def test_loading_a_device_or_a_folder_fails_at_once(tmp_path):
    for path in ("/dev/zero", tmp_path):
        with pytest.raises(esgraph.GraphIOError, match="is not a regular file"):
            esgraph.Graph.load(path)


def test_saving_into_a_missing_directory_is_a_graph_io_error(graph, tmp_path):
    with pytest.raises(esgraph.GraphIOError):
        graph.save(tmp_path / "no" / "such" / "dir" / "g.esg")


def test_loading_a_directory_is_a_graph_io_error(tmp_path):
    with pytest.raises(esgraph.GraphIOError):
        esgraph.Graph.load(tmp_path)


def test_dot_labels_break_lines_with_backslash_n():
    with esgraph.GraphBuilder("g") as b:
        x = b.input("x", esgraph.f32, [2])
        y = ops.exp(x)
    dot = b.build([y]).to_dot()
    assert 'label="x\\nf32[2]"' in dot  # DOT source text: x, backslash, n, f32[2]
    assert "\\\\n" not in dot


def test_inspect_shows_nodes_values_and_bodies():
    with esgraph.GraphBuilder("inspected") as b:
        p = b.input("p", esgraph.bool_, [])
        x = b.input("x", esgraph.f32, ["n", 2])
        w = np.array([[1, 2], [3, 4]], np.float32)
        h = ops.matmul(x, w, transpose_b=True)
        y = ops.if_(p, lambda: [h + 1], lambda: [ops.neg(h)])
    info = b.build([y]).inspect()
    values = info["values"]
    assert info["name"] == "inspected"
    assert [values[v]["name"] for v in info["inputs"]] == ["p", "x"]
    assert values[info["inputs"][1]]["shape"] == ("n", 2) and values[info["inputs"][1]]["dtype"] == esgraph.f32
    ops_ = [n["op"] for n in info["nodes"]]
    assert ops_ == ["constant", "matmul", "if"]
    constant, matmul, branch = info["nodes"]
    np.testing.assert_array_equal(constant["data"], w)
    assert matmul["attrs"] == {"transpose_a": False, "transpose_b": True}
    assert matmul["inputs"] == [info["inputs"][1], constant["outputs"][0]]
    then_body, else_body = branch["bodies"]
    assert [n["op"] for n in then_body["nodes"]] == ["constant", "add"]  # the literal 1 is the body's own constant
    assert [n["op"] for n in else_body["nodes"]] == ["neg"]
    # each body reads h through a capture that stands for the top-level value
    for body in (then_body, else_body):
        assert [outer for _, outer in body["captures"]] == [matmul["outputs"][0]]
        assert len(body["results"]) == 1
    assert info["outputs"] == branch["outputs"]
