"""Compiled-model files (Model.save, esgraph.load_model, `python3 -m esgraph compile`): real
models round-trip and run as the model they were saved from, checked against PyTorch; a load
compiles nothing for the sizes the file holds plans for; damaged, hostile and foreign files are
refused by name (docs/model-format.md)."""
import io
import os
import struct
import subprocess
import sys
import warnings

import numpy as np
import pytest

import esgraph
from esgraph import ops
from model_files import BLOBS, EXACT_PLAN, TARGET, ModelFile, read_strings, string

torch = pytest.importorskip("torch")
import esgraph.onnx  # noqa: E402
import esgraph.torch  # noqa: E402
from test_real_models import MODELS, _flat  # noqa: E402


def _save_and_load(model, tmp_path, **options):
    path = tmp_path / "model.esgm"
    model.save(path)
    return esgraph.load_model(path, **options), path


@pytest.mark.parametrize("name", MODELS)
def test_a_real_model_runs_loaded_as_compiled(name, tmp_path):
    module, inputs = MODELS[name]
    module.eval()
    compiled = esgraph.compile(esgraph.torch.from_module(module, inputs))
    arrays = [x.numpy() for x in inputs]
    want = compiled.run(arrays)
    loaded, _ = _save_and_load(compiled, tmp_path)
    got = loaded.run(arrays)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)  # the same plan and kernels: the same bits
    with torch.no_grad():
        for g, w in zip(got, _flat(module(*inputs))):
            assert np.abs(g - w.numpy()).max() <= 1e-4 * np.abs(w.numpy()).max()
    assert loaded.stats()["plans"] == 0, "a load compiles nothing for the sizes it holds plans for"
    assert loaded.stats()["weights_packed"] == 0, "nor packs a weight: the file holds them packed"
    assert loaded.stats()["weights_loaded"] == compiled.stats()["weights_packed"]
    assert loaded.stats()["launches"] == compiled.stats()["launches"]
    assert loaded.stats()["arena_bytes"] == compiled.stats()["arena_bytes"]


class _Block(torch.nn.Module):
    """A decoder step over its key/value caches, of a length each run chooses."""

    def __init__(self, width=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln = torch.nn.LayerNorm(width)
        self.qkv, self.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.fc = torch.nn.Linear(width, width)

    def forward(self, x, past_k, past_v):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln(x)).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
        a = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((a @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc(torch.nn.functional.gelu(x)), k, v


def _decoder_inputs(past):
    g = torch.Generator().manual_seed(past)
    return (torch.randn(1, 1, 32, generator=g), torch.randn(1, 4, past, 8, generator=g), torch.randn(1, 4, past, 8, generator=g))


def test_a_decoder_step_with_an_open_cache_length_keeps_its_symbolic_plans(tmp_path):
    torch.manual_seed(0)
    block = _Block().eval()
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(block, _decoder_inputs(3), buf, dynamo=False, opset_version=17, input_names=["x", "past_k", "past_v"],
                          dynamic_axes={"past_k": {2: "past"}, "past_v": {2: "past"}})
    compiled = esgraph.compile(esgraph.onnx.load(buf.getvalue()))
    for past in (3, 40):  # two size classes, each a symbolic plan
        compiled.run([t.numpy() for t in _decoder_inputs(past)])
    loaded, _ = _save_and_load(compiled, tmp_path)
    for past in (3, 4, 40, 33):  # the classes (2, 4] and (32, 64]
        inputs = _decoder_inputs(past)
        got = loaded.run([t.numpy() for t in inputs])
        for g, w in zip(got, compiled.run([t.numpy() for t in inputs])):
            np.testing.assert_array_equal(g, w)
        with torch.no_grad():
            for g, w in zip(got, block(*inputs)):
                np.testing.assert_allclose(g, w.numpy(), rtol=1e-4, atol=1e-5)
    assert loaded.stats()["plans"] == 0, "sizes of the saved classes bind the loaded symbolic plans"
    loaded.run([t.numpy() for t in _decoder_inputs(200)])  # a class the file lacks: planned at run time
    assert loaded.stats()["plans"] == 1


@pytest.fixture
def mlp_model():
    rng = np.random.default_rng(0)
    w1, b1 = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    w2 = rng.standard_normal((32, 8)).astype(np.float32)
    with esgraph.GraphBuilder("mlp") as builder:
        x = builder.input("x", esgraph.f32, [4, 16])
        y = ops.relu(x @ w1 + b1) @ w2
    graph = builder.build([y])
    x = rng.standard_normal((4, 16)).astype(np.float32)
    return esgraph.compile(graph), x, np.maximum(x @ w1 + b1, 0) @ w2


def test_load_options_set_the_run_not_the_compile(mlp_model, tmp_path):
    model, x, want = mlp_model
    path = tmp_path / "m.esgm"
    model.save(str(path))
    loaded = esgraph.load_model(str(path), threads=1, max_memory_bytes=1 << 20, verify_weights=False)
    np.testing.assert_allclose(loaded(x), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(esgraph.LimitError, match="max_memory_bytes"):
        esgraph.load_model(path, max_memory_bytes=64)
    with pytest.raises(TypeError):
        esgraph.load_model(path, streams=2)  # the file's: not an option of a load
    assert loaded.graph().node_count == model.graph().node_count


def _saved(mlp_model, tmp_path):
    path = tmp_path / "m.esgm"
    mlp_model[0].save(path)
    return path


def _refused(data, tmp_path, match, error=esgraph.FormatError, **options):
    path = tmp_path / "bad.esgm"
    path.write_bytes(data)
    with pytest.raises(error, match=match):
        esgraph.load_model(path, **options)


def test_a_truncated_file_is_refused_at_every_length(mlp_model, tmp_path):
    model, _, _ = mlp_model
    path = tmp_path / "m.esgm"
    model.save(path)
    data = path.read_bytes()
    for n in list(range(0, 200, 7)) + list(range(200, len(data), max(1, len(data) // 300))):
        _refused(data[:n], tmp_path, "truncated|corrupted|magic")
    _refused(data + b"\0" * 64, tmp_path, "truncated or extended")


def test_a_flipped_byte_anywhere_is_refused(mlp_model, tmp_path):
    model, _, _ = mlp_model
    path = tmp_path / "m.esgm"
    model.save(path)
    data = path.read_bytes()
    rng = np.random.default_rng(1)
    for at in sorted(set(rng.integers(0, len(data), 400).tolist()) | set(range(128))):
        flipped = bytearray(data)
        flipped[at] ^= 1 << int(rng.integers(0, 8))
        _refused(bytes(flipped), tmp_path, "compiled-model file|esgraph")


def test_weights_are_checked_unless_the_caller_says_not(mlp_model, tmp_path):
    _, x, want = mlp_model
    path = _saved(mlp_model, tmp_path)
    f = ModelFile(path.read_bytes())
    off, n, _ = max(f.blobs(), key=lambda b: b[1])  # the weight matrix
    data = bytearray(path.read_bytes())
    data[off + 7] ^= 0x40  # the second weight's exponent
    _refused(bytes(data), tmp_path, r"constant \d+'s bytes do not match their checksum")
    path.write_bytes(bytes(data))
    loaded = esgraph.load_model(path, verify_weights=False)  # the caller's call: loaded unchecked
    assert loaded(x).shape == want.shape


def test_wrong_magic_and_a_newer_format_are_refused_by_name(mlp_model, tmp_path):
    model, _, _ = mlp_model
    path = tmp_path / "m.esgm"
    model.save(path)
    data = path.read_bytes()
    _refused(b"ESGRAPH\0" + data[8:], tmp_path, "not an esgraph compiled-model file")
    newer = ModelFile(data)
    newer.version = 2
    _refused(newer.bytes(), tmp_path, "format 2 is newer than this library reads")


def test_a_plan_whose_buffers_leave_its_arena_is_refused(mlp_model, tmp_path):
    path = _saved(mlp_model, tmp_path)
    f = ModelFile(path.read_bytes())
    index, plan = f.section(EXACT_PLAN)
    # The plan's record ends with nine figures, the arena's bytes first.
    arena_at = len(plan) - 9 * 8
    assert struct.unpack_from("<q", plan, arena_at)[0] > 0
    f.replace(index, plan[:arena_at] + struct.pack("<q", 0) + plan[arena_at + 8:])
    _refused(f.bytes(), tmp_path, "an operand outside its arena")


def test_constants_that_overlap_are_refused(mlp_model, tmp_path):
    path = _saved(mlp_model, tmp_path)
    f = ModelFile(path.read_bytes())
    blobs = f.blobs()
    assert len(blobs) >= 2
    (a_off, a_n, a_h), (b_off, b_n, b_h) = blobs[0], blobs[1]
    f.set_blobs([(a_off, a_n, a_h), (a_off, b_n, b_h)] + blobs[2:])
    _refused(f.bytes(), tmp_path, "overlaps")
    f = ModelFile(path.read_bytes())
    f.set_blobs([(len(f.data) - 8, 4096, 0)] + f.blobs()[1:])
    _refused(f.bytes(), tmp_path, "run past the end of the file")


def test_a_file_for_a_cpu_with_features_this_one_lacks_is_refused_or_compiled_again(mlp_model, tmp_path):
    _, x, want = mlp_model
    path = _saved(mlp_model, tmp_path)
    f = ModelFile(path.read_bytes())
    index, target = f.section(TARGET)
    version, backend, machine = read_strings(target, 3)
    assert backend == "cpu" and machine.startswith("x86-64")
    f.replace(index, string(version) + string(backend) + string("x86-64 avx2 amx-fp8"))
    _refused(f.bytes(), tmp_path, r"need .*amx-fp8 \(compiled for x86-64 avx2 amx-fp8\); this machine has x86-64", esgraph.UnsupportedError)
    loaded = esgraph.load_model(tmp_path / "bad.esgm", recompile=True)
    np.testing.assert_allclose(loaded(x), want, rtol=1e-5, atol=1e-6)
    assert loaded.stats()["plans"] == 1  # compiled again, here


def test_what_a_file_cannot_hold_is_refused_at_save(tmp_path):
    with esgraph.GraphBuilder("staged") as b:
        x = b.input("x", esgraph.f32, [8])
        y = ops.nonzero(x)
    with pytest.raises(esgraph.UnsupportedError, match="runs in stages"):
        esgraph.compile(b.build([y])).save(tmp_path / "s.esgm")
    assert not list(tmp_path.iterdir()), "nothing is left behind"


def test_paths_that_are_no_model_file(mlp_model, tmp_path):
    with pytest.raises(esgraph.GraphIOError, match="cannot open"):
        esgraph.load_model(tmp_path / "missing.esgm")
    with pytest.raises(esgraph.GraphIOError, match="not a regular file"):
        esgraph.load_model(tmp_path)
    model, _, _ = mlp_model
    with pytest.raises(esgraph.GraphIOError):
        model.save(tmp_path / "no" / "such" / "dir.esgm")


def _cli(*args):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "esgraph", *map(str, args)], capture_output=True, text=True, env=env)


def test_the_command_line_compiles_once_and_runs_the_file(tmp_path):
    rng = np.random.default_rng(0)
    with esgraph.GraphBuilder("mlp") as b:
        x = b.input("x", esgraph.f32, ["batch", 16])
        y = ops.softmax(x @ rng.standard_normal((16, 4)).astype(np.float32), axis=-1)
    b.build([y]).save(tmp_path / "mlp.esg")
    out = tmp_path / "mlp.esgm"
    r = _cli("compile", tmp_path / "mlp.esg", "-o", out, "--bind", "batch=1..32")
    assert r.returncode == 0, r.stderr
    r = _cli("info", out)
    assert r.returncode == 0, r.stderr
    assert "compiled model" in r.stdout and "input  x: f32[batch, 16]" in r.stdout
    x = rng.standard_normal((5, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = _cli("run", out, "-i", f"x={tmp_path / 'x.npy'}", "--repeat", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "softmax_1: float32[5, 4]" or "float32[5, 4]" in r.stdout
    assert "load " in r.stdout
    loaded = esgraph.load_model(out)
    np.testing.assert_allclose(loaded(x), esgraph.compile(esgraph.Graph.load(tmp_path / "mlp.esg"))(x), rtol=1e-6)
    assert loaded.stats()["plans"] == 0, "the range's symbolic plan came in the file"
    r = _cli("run", out, "--backend", "cpu")
    assert r.returncode != 0 and "compiled model" in r.stderr
    r = _cli("compile", out, "-o", tmp_path / "again.esgm")
    assert r.returncode != 0 and "compiled already" in r.stderr


@pytest.mark.parametrize("name, batches", [("model-v1.esgm", (1, 5, 8)), ("model-v1-fixed.esgm", (2,))])
def test_the_format_1_fixtures_still_load(name, batches):
    """Files written by the first format version (tests/compat/write_model_fixture.py) load and
    compute as numpy does: later versions must keep reading them."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "compat"))
    from write_model_fixture import fixture_graph
    _, reference = fixture_graph()
    path = os.path.join(os.path.dirname(__file__), "..", "compat", "fixtures", name)
    try:
        loaded = esgraph.load_model(path)
    except esgraph.UnsupportedError as e:  # written on an AVX2 machine: a CPU without AVX2 refuses it by name
        assert "avx2" in str(e)
        return
    rng = np.random.default_rng(0)
    for batch in batches:
        x = rng.standard_normal((batch, 16)).astype(np.float32)
        np.testing.assert_allclose(loaded(x), reference(x), rtol=1e-5, atol=1e-5)
    assert loaded.stats()["plans"] == 0


def test_a_loaded_model_uses_its_weights_in_place_from_the_file(mlp_model, tmp_path):
    """The constants are views of the file's read-only mapping (pages the processes that load
    one file share), which lives exactly as long as the model."""
    model, x, want = mlp_model
    path = tmp_path / "m.esgm"
    model.save(path)

    def mapped():
        with open("/proc/self/maps") as f:
            return any(line.rstrip().endswith(str(path)) for line in f)

    loaded = esgraph.load_model(path)
    assert mapped()
    np.testing.assert_allclose(loaded(x), want, rtol=1e-5, atol=1e-6)
    del loaded
    import gc
    gc.collect()
    assert not mapped()


def _mlp_file(tmp_path):
    rng = np.random.default_rng(3)
    with esgraph.GraphBuilder("cached") as b:
        x = b.input("x", esgraph.f32, [2, 16])
        y = ops.tanh(x @ rng.standard_normal((16, 8)).astype(np.float32))
    path = tmp_path / "cached.esg"
    b.build([y]).save(path)
    return path, rng.standard_normal((2, 16)).astype(np.float32)


def test_the_compile_cache_loads_a_hit_and_stores_a_miss(tmp_path):
    source, x = _mlp_file(tmp_path)
    cache = tmp_path / "cache"
    first = esgraph.compile(str(source), cache_dir=cache)
    assert (first.stats()["cache_hits"], first.stats()["cache_misses"]) == (0, 1)
    second = esgraph.compile(source, cache_dir=cache)
    assert (second.stats()["cache_hits"], second.stats()["plans"], second.stats()["plans_loaded"]) == (1, 0, 1)
    np.testing.assert_array_equal(second(x), first(x))
    # Another compile choice is another entry; a graph (not its file) keys on the graph.
    assert esgraph.compile(source, cache_dir=cache, fusion=False).stats()["cache_misses"] == 1
    graph = esgraph.Graph.load(source)
    assert esgraph.compile(graph, cache_dir=cache).stats()["cache_misses"] == 1
    assert esgraph.compile(graph, cache_dir=cache).stats()["cache_hits"] == 1
    assert len(list(cache.glob("*.esgm"))) == 3


def test_a_damaged_entry_is_reported_and_replaced(tmp_path):
    source, x = _mlp_file(tmp_path)
    cache = tmp_path / "cache"
    want = esgraph.compile(source, cache_dir=cache)(x)
    (entry,) = cache.glob("*.esgm")
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0xFF
    entry.write_bytes(bytes(data))
    model = esgraph.compile(source, cache_dir=cache)
    assert model.stats()["cache_replaced"] == 1 and model.stats()["cache_misses"] == 1
    np.testing.assert_array_equal(model(x), want)
    assert esgraph.compile(source, cache_dir=cache).stats()["cache_hits"] == 1


def test_the_cache_keeps_to_its_bound_dropping_the_least_recently_used(tmp_path):
    cache = tmp_path / "cache"
    sizes = []
    for i in range(4):
        with esgraph.GraphBuilder(f"m{i}") as b:
            x = b.input("x", esgraph.f32, [4, 64])
            y = x @ np.full((64, 64), i, np.float32)
        esgraph.compile(b.build([y]), cache_dir=cache, cache_max_bytes=3 * 20000)
        sizes.append(sum(p.stat().st_size for p in cache.glob("*.esgm")))
    assert all(s <= 3 * 20000 for s in sizes)
    assert len(list(cache.glob("*.esgm"))) < 4


def test_the_environment_names_the_cache(tmp_path, monkeypatch):
    source, _ = _mlp_file(tmp_path)
    monkeypatch.setenv("ESG_CACHE_DIR", str(tmp_path / "env-cache"))
    esgraph.compile(source)
    assert esgraph.compile(source).stats()["cache_hits"] == 1
    assert len(list((tmp_path / "env-cache").glob("*.esgm"))) == 1


_CONCURRENT = """
import sys, numpy as np, esgraph
model = esgraph.compile(sys.argv[1], cache_dir=sys.argv[2])
x = np.load(sys.argv[3])
np.save(sys.argv[4], model(x))
print(model.stats()["cache_hits"], model.stats()["cache_misses"])
"""


def test_processes_compiling_one_model_at_once_share_the_cache(tmp_path):
    source, x = _mlp_file(tmp_path)
    np.save(tmp_path / "x.npy", x)
    cache = tmp_path / "cache"
    procs = [subprocess.Popen([sys.executable, "-c", _CONCURRENT, str(source), str(cache), str(tmp_path / "x.npy"),
                               str(tmp_path / f"out{i}.npy")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(6)]
    results = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [r[1] for r in results]
    want = esgraph.compile(esgraph.Graph.load(source))(x)
    for i in range(6):
        np.testing.assert_array_equal(np.load(tmp_path / f"out{i}.npy"), want)
    assert len(list(cache.glob("*.esgm"))) == 1, "one entry, whole: no temporary file left"
    assert not list(cache.glob("*.tmp.*"))
    assert esgraph.compile(source, cache_dir=cache).stats()["cache_hits"] == 1


_RUN_WITHOUT_A_COMPILER = """
import sys, numpy as np, esgraph
model = esgraph.load_model(sys.argv[1])
np.save(sys.argv[2], model(np.load(sys.argv[3])))
print(model.stats()["device_kernels"], model.stats()["device_kernels_loaded"])
"""


def test_an_ascend_model_compiled_with_the_kernel_compiler_runs_where_there_is_none(tmp_path):
    """Kernels built by the (simulated) toolchain travel in the file: a process whose toolchain
    is configured away and whose kernel cache is empty loads them from the file's memory
    (aclrtBinaryLoadFromData) and runs the model without compiling anything."""
    rng = np.random.default_rng(5)
    with esgraph.GraphBuilder("dev") as b:
        x = b.input("x", esgraph.f32, [4, 33])
        y = ops.softmax(ops.tanh(x) * 2.0 + 1.0, axis=-1)
    model = esgraph.compile(b.build([y]), backend="ascend-sim", cache_dir=tmp_path / "build-cache")
    x = rng.standard_normal((4, 33)).astype(np.float32)
    want = model(x)
    assert model.stats()["device_kernels"] >= 1
    path = tmp_path / "dev.esgm"
    model.save(path)
    np.save(tmp_path / "x.npy", x)
    env = dict(os.environ, ESG_ASCEND_SIM_CXX=str(tmp_path / "no-compiler"), ESG_KERNEL_CACHE=str(tmp_path / "empty"),
               ACLSIM_LOG=str(tmp_path / "acl.log"))
    env.pop("ESG_CACHE_DIR", None)
    r = subprocess.run([sys.executable, "-c", _RUN_WITHOUT_A_COMPILER, str(path), str(tmp_path / "y.npy"), str(tmp_path / "x.npy")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-2:] == [str(model.stats()["device_kernels"])] * 2, "every kernel from the file"
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), want)
    log = (tmp_path / "acl.log").read_text()
    assert "aclrtBinaryLoadFromData" in log and "vector" in log and "aclrtBinaryLoadFromFile" not in log
    assert not (tmp_path / "empty").exists() or not any((tmp_path / "empty").iterdir()), "nothing was built"
    # A toolchain that is missing fails a compile: the load above compiled nothing.
    r = subprocess.run([sys.executable, "-c", "import esgraph, numpy as np; from esgraph import ops\n"
                        "with esgraph.GraphBuilder('g') as b:\n  y = ops.tanh(b.input('x', esgraph.f32, [3, 7]))\n"
                        "esgraph.compile(b.build([y]), backend='ascend-sim')"], capture_output=True, text=True, env=env)
    assert r.returncode != 0


def _stack(activations):
    """A 12-layer stack of normalized residual blocks, one activation per layer; each layer's
    weights its own, their shapes all alike."""
    rng = np.random.default_rng(11)
    with esgraph.GraphBuilder("stack") as b:
        h = b.input("x", esgraph.f32, [8, 32])
        for act in activations:
            w = (rng.standard_normal((32, 32)) * 0.2).astype(np.float32)
            h = ops.layer_norm(h + act(h @ w + 0.5))
    return b.build([h])


def test_changing_one_layer_compiles_only_that_layers_kernel(tmp_path, monkeypatch):
    """Incremental compiles: kernels are cached by their own content, so a model that differs from
    one compiled before in one layer builds that layer's kernel alone (counted by a toolchain that
    counts its compiles, each followed by a link, and in stats)."""
    import shutil
    count = tmp_path / "runs"
    wrapper = tmp_path / "counting-cxx"
    wrapper.write_text(f"#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = -c ] && echo run >> {count}; done\nexec {shutil.which('g++')} \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("ESG_ASCEND_SIM_CXX", str(wrapper))
    monkeypatch.setenv("ESG_KERNEL_CACHE", str(tmp_path / "kernels"))
    runs = lambda: len(count.read_text().splitlines()) if count.exists() else 0  # noqa: E731
    x = np.random.default_rng(1).standard_normal((8, 32)).astype(np.float32)
    layers = [ops.tanh] * 12
    first = esgraph.compile(_stack(layers), backend="ascend-sim")
    built = first.stats()["device_kernels"] - first.stats()["device_kernels_cached"]
    assert runs() == built >= 1
    np.testing.assert_allclose(first(x), esgraph.compile(_stack(layers))(x), rtol=1e-4, atol=1e-4)
    layers[5] = ops.sigmoid  # one layer changed
    before = runs()
    second = esgraph.compile(_stack(layers), backend="ascend-sim")
    assert runs() - before == 1, "the changed layer's kernel alone was built"
    assert second.stats()["device_kernels"] - second.stats()["device_kernels_cached"] == 1
    np.testing.assert_allclose(second(x), esgraph.compile(_stack(layers))(x), rtol=1e-4, atol=1e-4)


def test_a_model_whose_graph_depends_on_input_values_is_refused_at_save(tmp_path):
    from onnx import TensorProto, helper
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])], "reshape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]), helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]))
    compiled = esgraph.compile(esgraph.onnx.load(model))
    with pytest.raises(esgraph.UnsupportedError, match="a graph per set of the values of shape.*constants="):
        compiled.save(tmp_path / "r.esgm")
    # Fixed when importing, it is one graph, which saves.
    fixed = esgraph.compile(esgraph.onnx.load(model, constants={"shape": np.array([4, 6])}))
    fixed.save(tmp_path / "r.esgm")
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(esgraph.load_model(tmp_path / "r.esgm")(x), x.reshape(4, 6))


def test_a_model_saves_to_the_same_bytes_every_time(mlp_model, tmp_path):
    """Reproducible files: two compiles of one graph, each saved, give the same bytes (the passes'
    times, which differ, are not written)."""
    model, _, _ = mlp_model
    model.save(tmp_path / "a.esgm")
    esgraph.compile(model.graph()).save(tmp_path / "b.esgm")
    assert (tmp_path / "a.esgm").read_bytes() == (tmp_path / "b.esgm").read_bytes()


def test_two_imports_of_one_onnx_model_save_the_same_bytes(tmp_path):
    """Constants read in place lie wherever the importer's arrays do; the file places each where
    its dtype and shape say (rows 4 KiB apart: 16 bytes past a cache line), so two imports of one
    model save the same bytes, and the loaded model computes what the imported one does."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(5)
    w = rng.standard_normal((8, 1024)).astype(np.float32)  # small: read through protobuf, in place
    v = rng.standard_normal((1024, 24)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("MatMul", ["h", "v"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 24])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(v, "v")])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    saved = []
    for name in ("a.esgm", "b.esgm"):
        esgraph.compile(esgraph.onnx.load(data)).save(tmp_path / name)
        saved.append((tmp_path / name).read_bytes())
    assert saved[0] == saved[1]
    x = rng.standard_normal((2, 8)).astype(np.float32)
    np.testing.assert_allclose(esgraph.load_model(tmp_path / "a.esgm")(x), x @ w @ v, rtol=1e-4, atol=1e-4)


def test_launches_packing_one_constant_share_one_copy_compiled_saved_and_loaded(tmp_path):
    """Three products of one constant (a recurrent layer's steps unrolled, in small) pack it once:
    the other two launches take that copy, the file keeps it once, and a load takes it once."""
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((256, 256)) * 0.05).astype(np.float32)
    x = rng.standard_normal((8, 256)).astype(np.float32)
    with esgraph.GraphBuilder("steps") as b:
        h = b.input("x", esgraph.f32, [8, 256])
        weights = b.constant(w)
        for _ in range(3):
            h = ops.tanh(ops.matmul(h, weights))
        g = b.build([h])
    compiled = esgraph.compile(g)
    want = x.astype(np.float64)
    for _ in range(3):
        want = np.tanh(want @ w.astype(np.float64))
    np.testing.assert_allclose(compiled(x), want, rtol=1e-5, atol=1e-5)
    stats = compiled.stats()
    if stats["weights_in_place"]:
        pytest.skip("this CPU's products read the constant where it lies: nothing is packed")
    assert (stats["weights_packed"], stats["weights_shared"]) == (1, 2)
    loaded, path = _save_and_load(compiled, tmp_path)
    assert os.path.getsize(path) < 3 * w.nbytes, "the constant and one packed copy, not three"
    np.testing.assert_array_equal(loaded(x), compiled(x))
    stats = loaded.stats()
    assert (stats["weights_packed"], stats["weights_loaded"], stats["weights_shared"]) == (0, 1, 2)
