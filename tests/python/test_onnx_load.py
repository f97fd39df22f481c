"""Loading ONNX models (a path, bytes, a ModelProto), their external data (read from the model's
folder only), and the refusals: every unsupported node at once, types and shapes.

See onnx_models.py for the helpers."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from google.protobuf.message import DecodeError  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import esgraph  # noqa: E402
import esgraph.onnx  # noqa: E402

from onnx_models import vi, init, i64, make, run, rand, close, F32, I64


# Loading: path, bytes, ModelProto and bad arguments
def test_path_bytes_and_model_proto_give_the_same_results(mlp, tmp_path):
    model, reference = mlp
    path = tmp_path / "mlp.onnx"
    path.write_bytes(model.SerializeToString())
    x = rand(2, 4)
    from_path = run(path, x)  # a pathlib.Path
    from_str_path = run(str(path), x)  # a str
    from_bytes = run(model.SerializeToString(), x)
    from_proto = run(model, x)
    close(from_proto[0], reference(x))
    for other in (from_path, from_str_path, from_bytes):
        np.testing.assert_array_equal(other[0], from_proto[0])


@pytest.mark.parametrize("bad", [42, None, 1.5, ["m.onnx"]], ids=["int", "None", "float", "list"])
def test_load_of_a_wrong_type_is_a_type_error(bad):
    with pytest.raises(TypeError, match="expected a path, bytes or onnx.ModelProto"):
        esgraph.onnx.load(bad)


def test_truncated_files_raise_or_load_but_never_crash(mlp, tmp_path):
    model, _ = mlp
    data = model.SerializeToString()
    path = tmp_path / "cut.onnx"
    decode_errors = 0
    for keep in range(len(data)):
        path.write_bytes(data[:keep])
        try:
            graph = esgraph.onnx.load(path)
        except esgraph.FormatError as e:  # protobuf's own error, as its cause
            decode_errors += isinstance(e.__cause__, DecodeError)
            continue
        except (esgraph.Error, ValueError):  # a message cut at a field boundary may parse
            continue
        graph.verify()
        esgraph.compile(graph)
    # Most cuts fall inside a field (a tensor's raw bytes, a name): protobuf refuses them.
    assert decode_errors > len(data) // 2
    path.write_bytes(data[:-1])
    with pytest.raises(esgraph.FormatError, match="is not an ONNX model: DecodeError"):
        esgraph.onnx.load(path)

# Failures: every unsupported node at once, types and shapes
def test_one_error_lists_every_unsupported_node():
    nodes = [
        helper.make_node("Bernoulli", ["x"], ["nz"], name="find"),
        helper.make_node("Frobnicate", ["x"], ["fz"], domain="com.example"),
        helper.make_node("Relu", ["x"], ["fine"]),
        helper.make_node("Cast", ["nz"], ["nzf"], to=F32),  # consumers of failures: skipped
        helper.make_node("Add", ["fz", "fine"], ["y"]),
        helper.make_node("Add", ["nzf", "y"], ["z"]),
    ]
    model = make(nodes, [vi("x", F32, [2, 3])], [vi("z", F32, None)],
                 extra_opsets=[("com.example", 1)])
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(model)
    e = info.value
    assert len(e.failures) == 2
    (where0, why0), (where1, why1) = e.failures
    assert where0 == "Bernoulli 'find' -> nz" and "no converter" in why0
    assert where1 == "Frobnicate -> fz" and "com.example" in why1
    message = str(e)
    assert "2 unsupported node(s)" in message
    assert "Bernoulli" in message and "Frobnicate" in message
    assert "Cast" not in message and "Add" not in message
    assert e.needed_constants == []


def test_unsupported_element_type_is_reported():
    model = make([helper.make_node("Identity", ["x"], ["y"])], [vi("x", TensorProto.COMPLEX64, [3])],
                 [vi("y", TensorProto.COMPLEX64, [3])])
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(model)
    assert info.value.failures == [("input 'x'", "element type COMPLEX64")]


def test_unsupported_initializer_type_is_reported():
    model = make([helper.make_node("Add", ["x", "c"], ["y"])], [vi("x", F32, [2])], [vi("y", F32, [2])],
                 [init("c", np.array([1, 2], dtype=np.complex64))])
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(model)
    assert info.value.failures == [("initializer 'c'", "element type COMPLEX64")]


def test_a_name_defined_twice_is_refused():
    """ONNX's single assignment, as ONNX Runtime holds it: the last writer no longer wins, two
    inputs of one name are not merged."""
    two_writers = make([helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"])],
                       [vi("x", F32, [2])], [vi("y", F32, [2])])
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(two_writers)
    assert info.value.failures == [("Neg (node 1) -> y", "'y' is defined already, by Relu 'a'")]
    two_inputs = make([helper.make_node("Add", ["x", "x"], ["y"])], [vi("x", F32, [2]), vi("x", F32, [3])], [vi("y", F32, [2])])
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(two_inputs)
    assert ("input 'x'", "two graph inputs have this name") in info.value.failures
    assert "1 problem(s)" in str(info.value) and "node" not in str(info.value).splitlines()[0]  # it named "1 unsupported node(s)"
    shadowing = make([helper.make_node("Relu", ["x"], ["c"])], [vi("x", F32, [2])], [vi("c", F32, [2])], [init("c", np.ones(2, np.float32))])
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(shadowing)
    assert info.value.failures[0] == ("Relu (node 0) -> c", "'c' is defined already, by the graph initializer")


def test_an_initializer_with_a_negative_dimension_is_refused():
    bad = init("c", np.ones(4, np.float32))
    bad.dims[:] = [-1, 4]
    model = make([helper.make_node("Add", ["x", "c"], ["y"])], [vi("x", F32, [1, 4])], [vi("y", F32, [1, 4])], [bad])
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(model)
    assert info.value.failures == [("initializer 'c'", "has dims [-1, 4]: a dimension is negative")]


@pytest.mark.parametrize("fmod", [0, 1])
def test_integer_mod_is_exact_beyond_f64(fmod):
    a = np.array([2**62 + 3, -(2**62) - 3, 7, -7, 0], np.int64)
    b = np.array([7, 7, -3, 3, 5], np.int64)
    model = make([helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)], [vi("a", I64, [5]), vi("b", I64, [5])],
                 [vi("y", I64, [5])])
    expected = np.fmod(a, b) if fmod else np.mod(a, b)
    np.testing.assert_array_equal(run(model, a, b)[0], expected)


def test_bit_shift_of_u64_and_refusal_of_signed():
    x = np.array([1, 2**63 + 1, 2**64 - 1, 3], np.uint64)
    s = np.array([63, 1, 4, 64], np.uint64)  # by 64: 0 (it gave x * UINT64_MAX)
    ints = [(int(a), int(b)) for a, b in zip(x, s)]
    for direction, expected in (("LEFT", [(a << b) % 2**64 if b < 64 else 0 for a, b in ints]),
                                ("RIGHT", [a >> b if b < 64 else 0 for a, b in ints])):
        model = make([helper.make_node("BitShift", ["x", "s"], ["y"], direction=direction)],
                     [vi("x", TensorProto.UINT64, [4]), vi("s", TensorProto.UINT64, [4])], [vi("y", TensorProto.UINT64, [4])])
        np.testing.assert_array_equal(run(model, x, s)[0], np.array(expected, np.uint64))
        graph = esgraph.onnx.load(model)
        assert [n.op_type for n in esgraph.onnx.to_model(graph).graph.node] == ["BitShift"]  # one op, both ways
    signed = make([helper.make_node("BitShift", ["x", "x"], ["y"], direction="LEFT")], [vi("x", I64, [3])],
                  [vi("y", I64, [3])])
    with pytest.raises(esgraph.onnx.ImportFailed, match="unsigned integers, not i64"):
        esgraph.onnx.load(signed)


def test_input_without_a_shape_is_reported_and_input_shapes_fixes_it():
    model = make([helper.make_node("Neg", ["x"], ["y"])], [vi("x", F32, None)], [vi("y", F32, None)])
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(model)
    (where, why), = info.value.failures
    assert where == "input 'x'" and "input_shapes=" in why
    graph = esgraph.onnx.load(model, input_shapes={"x": ["B", 3]})
    assert graph.to_text().startswith("graph m(%x: f32[B,3])")
    compiled = esgraph.compile(graph)
    for batch in (1, 4):
        x = rand(batch, 3, seed=batch)
        close(compiled(x), -x)


def test_input_shapes_override_the_model_shape():
    model = make([helper.make_node("Neg", ["x"], ["y"])], [vi("x", F32, [2, 3])], [vi("y", F32, None)])
    graph = esgraph.onnx.load(model, input_shapes={"x": [5, 3]})
    x = rand(5, 3)
    close(esgraph.compile(graph)(x), -x)


def test_opset_out_of_range_is_refused():
    opset = esgraph.onnx.MAX_OPSET + 1
    model = make([helper.make_node("Neg", ["x"], ["y"])], [vi("x", F32, [2])], [vi("y", F32, [2])], opset=opset)
    with pytest.raises(esgraph.onnx.ImportFailed, match=f"opset {opset} is outside the supported 1..{opset - 1}"):
        esgraph.onnx.load(model)


def test_an_op_newer_than_its_converter_is_refused_by_name(monkeypatch):
    # Today every converter reads its op's newest version; the table a newer onnx writes
    # (scripts/onnx-op-versions.py) may add one: here, a Neg-28 no converter was written for.
    from esgraph.onnx import _versions
    monkeypatch.setitem(_versions.HISTORY, "Neg", (1, 6, 13, 28))
    nodes = [helper.make_node("Neg", ["x"], ["y"]), helper.make_node("Relu", ["x"], ["r"])]
    outputs = [vi("y", F32, [2]), vi("r", F32, [2])]
    with pytest.raises(esgraph.onnx.ImportFailed, match=r"Neg-28 \(the version opset 28 uses\) is newer than the "
                       r"Neg-13 esgraph implements: export the model for opset 27 or lower") as info:
        esgraph.onnx.load(make(nodes, [vi("x", F32, [2])], outputs, opset=28))
    assert "Relu" not in str(info.value)
    x = rand(2)
    neg, relu = esgraph.compile(esgraph.onnx.load(make(nodes, [vi("x", F32, [2])], outputs, opset=27))).run([x])
    close(neg, -x)
    close(relu, np.maximum(x, 0))


def test_graph_output_nothing_produces_is_reported():
    model = make([helper.make_node("Relu", ["x"], ["y"])], [vi("x", F32, [3])],
                 [vi("y", F32, [3]), vi("missing", F32, [3])])
    with pytest.raises(esgraph.onnx.ImportFailed) as info:
        esgraph.onnx.load(model)
    assert "missing" in str(info.value)


def test_constants_take_the_declared_element_type():
    model = make([helper.make_node("Add", ["x", "offset"], ["y"])], [vi("x", F32, [2]), vi("offset", F32, [2])],
                 [vi("y", F32, [2])])
    compiled = esgraph.compile(esgraph.onnx.load(model, constants={"offset": [1.0, 2.0]}))
    assert compiled.input_names == ["x"]
    close(compiled(np.array([10, 20], np.float32)), np.array([11, 22], np.float32))

# External data: read from the model's folder only
def _with_external_data(model, folder, location="weights.bin"):
    """The model saved in `folder` with every initializer in one external file; returns its path."""
    folder.mkdir(exist_ok=True)
    path = folder / "m.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=location,
                    size_threshold=0)
    return path


def _relocate(path, location):
    """The saved model with every external location rewritten (its data left where it was)."""
    m = onnx.load(str(path), load_external_data=False)
    for t in m.graph.initializer:
        for entry in t.external_data:
            if entry.key == "location":
                entry.value = location
    path.write_bytes(m.SerializeToString())


def test_external_data_in_the_models_folder_loads(mlp, tmp_path):
    model, reference = mlp
    path = _with_external_data(model, tmp_path / "model")
    x = rand(2, 4)
    close(run(path, x)[0], reference(x))
    # Bytes or a ModelProto name no folder: their external data needs one given.
    external = onnx.load(str(path), load_external_data=False)
    with pytest.raises(esgraph.FormatError, match="reads external data only from a folder passed as base_dir"):
        esgraph.onnx.load(external)
    close(esgraph.compile(esgraph.onnx.load(external, base_dir=tmp_path / "model"))(x), reference(x))
    assert onnx.external_data_helper.uses_external_data(external.graph.initializer[0])  # the caller's proto untouched


@pytest.mark.parametrize("location", ["../outside.bin", "/etc/passwd", "sub/../../outside.bin", "zero"])
def test_external_data_outside_the_models_folder_is_refused(mlp, tmp_path, location):
    model, _ = mlp
    path = _with_external_data(model, tmp_path / "model")
    (tmp_path / "outside.bin").write_bytes(b"\0" * 4096)
    (tmp_path / "model" / "zero").symlink_to("/dev/zero")  # a link inside that leads out
    _relocate(path, location)
    with pytest.raises(esgraph.FormatError, match="outside the model's folder"):
        esgraph.onnx.load(path)


def test_external_data_past_the_end_of_its_file_is_refused(mlp, tmp_path):
    model, _ = mlp
    path = _with_external_data(model, tmp_path / "model")
    (tmp_path / "model" / "weights.bin").write_bytes(b"\0" * 8)  # shorter than the tensors say
    with pytest.raises(esgraph.FormatError, match="run past the 8-byte file"):
        esgraph.onnx.load(path)


def _set_external(path, key, value):
    """The saved model with one external-data entry of every initializer set to `value`."""
    m = onnx.load(str(path), load_external_data=False)
    for t in m.graph.initializer:
        entries = {e.key: e for e in t.external_data}
        if key in entries:
            entries[key].value = value
        else:
            t.external_data.add(key=key, value=value)
    path.write_bytes(m.SerializeToString())


@pytest.mark.parametrize("key, value, message", [
    ("offset", "-8", r"a negative offset \(-8\)"),
    ("length", "-1", r"a negative offset \(0\) or length \(-1\)"),
    ("offset", "eight", "malformed external data"),
    ("location", "weights\0.bin", "the location holds a NUL character"),
], ids=["negative-offset", "negative-length", "not-a-number", "nul"])
def test_malformed_external_data_is_a_format_error(mlp, tmp_path, key, value, message):
    """Each of these raised Python's own OSError or ValueError before."""
    model, _ = mlp
    path = _with_external_data(model, tmp_path / "model")
    _set_external(path, key, value)
    with pytest.raises(esgraph.FormatError, match=message):
        esgraph.onnx.load(path)


def _nested_ifs(depth):
    """A model whose If bodies nest `depth` levels: each then-branch holds the next If. Built
    from the top down, in place: protobuf's upb copies a message given to extend() by parsing
    it, which stops at 100 message levels as any parse does."""
    def out(name):
        return vi(name, F32, [1])
    model = make([], [vi("x", F32, [1]), vi("c", TensorProto.BOOL, [])], [out(f"o{depth}")])
    graph = model.graph
    for d in range(depth, 0, -1):
        node = graph.node.add()
        node.CopyFrom(helper.make_node("If", ["c"], [f"o{d}"]))
        leaf = helper.make_graph([helper.make_node("Identity", ["x"], [f"e{d}"])], f"e{d}", [], [out(f"e{d}")])
        node.attribute.add(name="else_branch", type=onnx.AttributeProto.GRAPH).g.CopyFrom(leaf)
        graph = node.attribute.add(name="then_branch", type=onnx.AttributeProto.GRAPH).g
        graph.name = f"b{d - 1}"
        graph.output.add().CopyFrom(out(f"o{d - 1}"))
    graph.node.add().CopyFrom(helper.make_node("Identity", ["x"], ["o0"]))
    return model


@pytest.mark.parametrize("depth", [31, 32, 48, 64])
def test_bodies_nest_as_deep_as_esgraph_allows(depth, tmp_path):
    """protobuf's parser stops at 100 message levels, 31 levels of bodies; beyond, the file is
    parsed in pieces, up to esgraph's own limit of 64. Each of 32 and more was a FormatError."""
    x, c = np.ones(1, np.float32), np.array(True)
    model = _nested_ifs(depth)
    onnx.save(model, str(tmp_path / "nested.onnx"))
    for source in (model.SerializeToString(), tmp_path / "nested.onnx"):
        loaded = esgraph.onnx.load(source)
        assert esgraph.compile(loaded).run({"x": x, "c": c})[0] == 1
    # what was parsed in pieces is the model, whole
    assert esgraph.onnx.open_model(model.SerializeToString()).proto == model


def test_bodies_nested_beyond_the_limit_are_named():
    with pytest.raises(esgraph.LimitError, match="If/Loop/Scan bodies nest 65 levels deep; esgraph's limit is 64"):
        esgraph.onnx.load(_nested_ifs(65).SerializeToString())


# Folding at import within a memory cap
def _filled_and_summed(elements):
    """x + ReduceSum(ConstantOfShape([elements])): a file of under 200 bytes whose folding would
    fill `elements` floats."""
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["big"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
             helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0),
             helper.make_node("Add", ["x", "s"], ["y"])]
    return make(nodes, [vi("x", F32, [1])], [vi("y", F32, [1])], [init("shape", np.array([elements], np.int64))])


def test_a_small_file_cannot_make_the_import_fill_gigabytes(tmp_path):
    """2 GiB of folding asked by a 174-byte file: beyond the default cap (256 MiB plus twice the
    weights), left to the compiled graph, where compile's own cap refuses it by name. Measured
    in a process of its own: its peak memory across the import."""
    path = tmp_path / "fill.onnx"
    onnx.save(_filled_and_summed(1 << 29), str(path))
    assert path.stat().st_size < 200
    script = ("import esgraph, esgraph.onnx\n"
              "peak = lambda: next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')) * 1024\n"
              f"before = peak(); graph = esgraph.onnx.load({str(path)!r}); print(peak() - before)\n"
              "try:\n    esgraph.compile(graph, max_memory_bytes=1 << 30)\nexcept esgraph.LimitError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, timeout=120).stdout.splitlines()
    assert int(out[0]) < 64 << 20, f"the import grew the process by {int(out[0]) >> 20} MiB"
    assert "needs 2147483716 bytes of working memory and outputs, more than max_memory_bytes (1073741824)" in out[1]


def test_a_fold_beyond_the_cap_is_computed_by_the_graph():
    model = _filled_and_summed(1 << 20)  # 4 MiB of ones
    x = np.array([0.5], np.float32)
    for cap in (None, 1 << 20, 0):  # the default folds it; 1 MiB leaves it to the graph; 0: no bound
        graph = esgraph.onnx.load(model, max_memory_bytes=cap)
        np.testing.assert_array_equal(esgraph.compile(graph)(x), x + (1 << 20))
    assert "fill" not in esgraph.onnx.load(model).to_text()  # folded into a constant
    assert "fill" in esgraph.onnx.load(model, max_memory_bytes=1 << 20).to_text()


@pytest.mark.parametrize("cap", [-1, 1.5, "1G", True])
def test_a_malformed_import_cap_is_refused(cap):
    with pytest.raises(esgraph.InvalidArgumentError, match="max_memory_bytes must be 0 \\(no bound\\) or more"):
        esgraph.onnx.load(_filled_and_summed(4), max_memory_bytes=cap)


@pytest.mark.parametrize("case", ["OneHot", "CumSum", "Trilu", "EyeLike", "Resize"])
def test_a_converters_own_arrays_count_against_the_import_cap(case):
    """Tables a converter makes from a small file's shapes and constants (OneHot's positions for
    a depth of 2^27, CumSum's triangular matrix over 8000, Trilu's mask of 20000 x 20000) took
    seconds and gigabytes before the cap applied; now each is refused by name, at once."""
    node, inputs, inits = {
        "OneHot": (helper.make_node("OneHot", ["i", "depth", "values"], ["y"]), [vi("i", I64, [2])],
                   [i64("depth", [1 << 27]), init("values", np.array([0, 1], np.float32))]),
        "CumSum": (helper.make_node("CumSum", ["x", "axis"], ["y"]), [vi("x", F32, [1, 8000])], [i64("axis", 1)]),
        "Trilu": (helper.make_node("Trilu", ["x"], ["y"]), [vi("x", F32, [20000, 20000])], []),
        "EyeLike": (helper.make_node("EyeLike", ["x"], ["y"]), [vi("x", F32, [20000, 20000])], []),
        "Resize": (helper.make_node("Resize", ["x", "", "scales"], ["y"]), [vi("x", F32, [1, 1, 1, 8000])],
                   [init("scales", np.array([1, 1, 1, 8], np.float32))]),
    }[case]
    model = make([node], inputs, [vi("y", F32, None)], inits)
    start = time.perf_counter()
    with pytest.raises(esgraph.onnx.ImportFailed, match=r"would take \d+ bytes while importing, beyond the import's memory cap"):
        esgraph.onnx.load(model, max_memory_bytes=1 << 20)
    assert time.perf_counter() - start < 1
    if case == "OneHot":  # a depth of 4 imports under the same cap
        assert esgraph.onnx.load(make([node], inputs, [vi("y", F32, None)], [i64("depth", [4]), inits[1]]), max_memory_bytes=1 << 20)


def test_a_converters_temporaries_do_not_stay_counted():
    """Fourteen CumSums over 1024 values: each makes 17 MiB of index grids it drops and keeps
    a 4 MiB matrix. Counting the grids for good refused the 13th under the default cap."""
    nodes = [helper.make_node("CumSum", [f"h{i}", "axis"], [f"h{i + 1}"]) for i in range(14)]
    model = make(nodes, [vi("h0", F32, [1, 1024])], [vi("h14", F32, [1, 1024])], [i64("axis", 1)])
    x = np.ones((1, 1024), np.float32) * 1e-30
    got = esgraph.compile(esgraph.onnx.load(model))(x)
    want = x.astype(np.float64)
    for _ in range(14):
        want = np.cumsum(want, axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-4)


def test_an_integer_range_beyond_two_to_the_53_imports_exactly():
    """ONNX's Range of int64 constants counts in int64 (integer_range); it was refused, since
    range's doubles stop at 2^53."""
    start, limit, delta = 2**62, 2**62 + 3, 1
    model = make([helper.make_node("Range", ["a", "z", "d"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])],
                 [vi("x", I64, [3])], [vi("y", I64, [3])],
                 [init("a", np.array(start)), init("z", np.array(limit)), init("d", np.array(delta))])
    got = esgraph.compile(esgraph.onnx.load(model))(np.zeros(3, np.int64))
    np.testing.assert_array_equal(got, np.arange(start, limit, delta, dtype=np.int64))


def test_a_fill_and_a_pad_of_an_integer_beyond_two_to_the_53_import_exactly():
    """ConstantOfShape's value and Pad's constant_value as int64 beyond 2^53 (fill's and pad's
    attributes are doubles): each was refused by name."""
    big = 2**62 + 1
    fill = make([helper.make_node("ConstantOfShape", ["shape"], ["c"], value=numpy_helper.from_array(np.array([big]))),
                 helper.make_node("Add", ["c", "x"], ["y"])],
                [vi("x", I64, [3])], [vi("y", I64, [3])], [i64("shape", [3])])
    np.testing.assert_array_equal(esgraph.compile(esgraph.onnx.load(fill))(np.arange(3)), big + np.arange(3))
    pad = make([helper.make_node("Pad", ["x", "pads", "value"], ["y"])], [vi("x", I64, ["n"])], [vi("y", I64, None)],
               [i64("pads", [1, 2]), i64("value", big)])
    x = np.array([-(2**63), 5, 2**63 - 1])
    np.testing.assert_array_equal(esgraph.compile(esgraph.onnx.load(pad))(x), np.pad(x, (1, 2), constant_values=big))
