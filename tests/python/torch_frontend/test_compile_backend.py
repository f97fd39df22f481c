"""torch.compile(model, backend="esgraph"): results against eager PyTorch on the same inputs, and
the backend's contract: options, parameters that change, the backward-needed and fallback
paths, dynamic shapes with their recompiles counted, tensors crossing by DLPack."""
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import esgraph.torch as esg_torch
from esgraph.torch import _backend
from esgraph.torch._crossing import to_esgraph, to_torch


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch.manual_seed(0)
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def close(got, want, rtol=1e-4):
    """Within rtol of the output's largest magnitude (the issue's measure)."""
    assert got.shape == want.shape and got.dtype == want.dtype
    got, want = got.detach().float(), want.detach().float()
    assert (got - want).abs().max().item() <= rtol * max(want.abs().max().item(), 1e-6)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def counting(calls):
    """The esgraph backend, counting the graphs Dynamo hands it."""
    def backend(gm, example_inputs, **kwargs):
        calls.append([tuple(t.shape) if isinstance(t, torch.Tensor) else t for t in example_inputs])
        return esg_torch.esgraph_backend(gm, example_inputs, **kwargs)
    return backend


def test_the_backend_is_registered_by_name_and_matches_eager():
    net = Net().eval()
    fast = torch.compile(net, backend="esgraph")
    x = torch.randn(2, 3, 12, 12)
    with torch.no_grad():
        close(fast(x), net(x))
    with torch.inference_mode():
        close(fast(x), net(x))
    assert "esgraph" in torch._dynamo.list_backends()


@pytest.mark.parametrize("options, message", [
    ({"devise": "cpu"}, "no option 'devise' (it takes device, precision, cache_dir, trace, fallback)"),
    ({"device": "gpu"}, "option 'device' is one of cpu, ascend, ascend-sim, got 'gpu'"),
    ({"precision": "f16"}, "option 'precision' is one of f32, bf16, got 'f16'"),
    ({"fallback": "skip"}, "option 'fallback' is one of error, eager, got 'skip'"),
    ({"trace": 3}, "option 'trace' takes a str, got int"),
])
def test_a_bad_option_is_named(options, message):
    fast = torch.compile(Net().eval(), backend="esgraph", options=options)
    with torch.no_grad(), pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")):
        fast(torch.randn(1, 3, 8, 8))


def test_a_graph_that_needs_a_backward_pass_runs_eagerly_with_one_warning(monkeypatch):
    monkeypatch.setattr(_backend, "_warned_backward", [])
    net = Net().eval()
    fast = torch.compile(net, backend="esgraph")
    x = torch.randn(2, 3, 8, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = fast(x)
        fast(torch.randn(2, 3, 8, 8))
    said = [w for w in caught if "needs a backward pass" in str(w.message)]
    assert len(said) == 1
    y.sum().backward()  # eager PyTorch's graph: gradients flow
    assert net.conv.weight.grad is not None
    assert not esg_torch.compiled_functions()
    with torch.no_grad():  # the same model under no_grad compiles
        close(fast(x), net(x))
    assert esg_torch.compiled_functions()


def test_parameters_are_baked_in_and_rebuilt_when_they_change():
    net = Net().eval()
    fast = torch.compile(net, backend="esgraph")
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        close(fast(x), net(x))
        close(fast(x), net(x))
        (fn,) = esg_torch.compiled_functions()
        assert fn.builds == 1
        net.fc.weight.mul_(2)  # in place: the version counter moves
        close(fast(x), net(x))
        assert fn.builds == 2
        net.bn.running_mean.add_(1)  # a buffer too
        close(fast(x), net(x))
        assert fn.builds == 3
    net.fc.weight = nn.Parameter(torch.randn(5, 8))  # another tensor
    with torch.no_grad():
        close(fast(x), net(x))


def test_unmapped_ops_are_listed_together_or_run_eagerly_with_fallback():
    class Odd(nn.Module):
        def forward(self, x):
            return torch.cumsum(torch.relu(x), 1) + torch.erfinv(torch.tanh(x) * 0.5)

    x = torch.randn(3, 4)
    with torch.no_grad(), pytest.raises(Exception) as info:
        torch.compile(Odd(), backend="esgraph")(x)
    assert "aten.cumsum.default" in str(info.value) and "aten.erfinv.default" in str(info.value)
    torch._dynamo.reset()
    fast = torch.compile(Odd(), backend="esgraph", options={"fallback": "eager"})
    with torch.no_grad():
        close(fast(x), Odd()(x))
    # relu, tanh and the scaling ran in esgraph; cumsum and erfinv in PyTorch.
    assert len(esg_torch.compiled_functions()) >= 2


def aot_eager_counting(calls):
    """PyTorch's own aot_autograd backend (as Inductor's front half), counting its graphs."""
    def backend(gm, example_inputs, **kwargs):
        calls.append([tuple(t.shape) if isinstance(t, torch.Tensor) else t for t in example_inputs])
        return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs, **kwargs)
    return backend


def graphs_for(backend, sizes, dynamic):
    """The graphs Dynamo hands `backend` for batches of `sizes`, each result checked."""
    calls = []
    net = Net().eval()
    fast = torch.compile(net, backend=counting(calls) if backend == "esgraph" else aot_eager_counting(calls), dynamic=dynamic)
    with torch.no_grad():
        for n in sizes:
            x = torch.randn(n, 3, 8, 8)
            close(fast(x), net(x))
    torch._dynamo.reset()
    return calls


@pytest.mark.parametrize("dynamic", [True, None])
def test_recompiles_are_pytorchs_and_one_graph_serves_every_batch(dynamic):
    """With dynamic=True the batch is symbolic from the first graph; with the default, from
    Dynamo's first recompile. Either way esgraph gets the graphs PyTorch's own aot_autograd
    backend gets (a float attribute Dynamo first passes as a tensor is specialized by
    aot_autograd: one recompile), and the last one serves every later size: built once, its
    symbolic plans bound to each size (a plan per power-of-two class of sizes)."""
    sizes = (2, 3, 5, 8, 13)
    calls = graphs_for("esgraph", sizes, dynamic)
    assert len(calls) == len(graphs_for("aot_eager", sizes, dynamic)) == 2
    assert len(graphs_for("esgraph", sizes[:2], dynamic)) == len(calls)  # none after the second size
    assert any(isinstance(a, torch.SymInt) for a in calls[-1])
    net = Net().eval()
    fast = torch.compile(net, backend="esgraph", dynamic=dynamic)
    with torch.no_grad():
        for n in sizes:
            fast(torch.randn(n, 3, 8, 8))
    last = esg_torch.compiled_functions()[-1]
    stats = last.model.stats()
    assert last.builds == 1 and stats["plans"] < stats["bindings"]


def test_inputs_cross_without_copies_and_outputs_are_new_memory():
    t = torch.randn(4, 5)
    assert to_esgraph(t).ctypes.data == t.data_ptr()
    a = np.arange(6, dtype=np.float32)
    assert to_torch(a, torch.float32).data_ptr() == a.ctypes.data
    b = torch.randn(3).to(torch.bfloat16)
    bits = to_esgraph(b)
    assert bits.dtype == np.uint16 and bits.ctypes.data == b.data_ptr()
    assert torch.equal(to_torch(bits, torch.bfloat16), b)

    net = Net().eval()
    fast = torch.compile(net, backend="esgraph")
    with torch.no_grad():
        x1, x2 = torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8, 8)
        y1 = fast(x1)
        kept = y1.clone()
        y2 = fast(x2)
        assert torch.equal(y1, kept) and y1.data_ptr() != y2.data_ptr()


@pytest.mark.parametrize("layout", ["channels_last", "transposed"])
def test_inputs_that_are_not_contiguous(layout):
    net = Net().eval()
    fast = torch.compile(net, backend="esgraph")
    x = torch.randn(2, 3, 8, 8)
    x = x.to(memory_format=torch.channels_last) if layout == "channels_last" else x.transpose(2, 3)
    with torch.no_grad():
        close(fast(x), net(x))


@pytest.mark.parametrize("dtype, rtol", [(torch.bfloat16, 2e-2), (torch.float16, 2e-3)])
def test_half_precision_inputs_and_outputs(dtype, rtol):
    mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8)).eval().to(dtype)
    fast = torch.compile(mlp, backend="esgraph")
    x = torch.randn(4, 16).to(dtype)
    with torch.no_grad():
        got = fast(x)
        assert got.dtype == dtype
        close(got, mlp(x), rtol=rtol)


def test_in_place_ops_graph_breaks_and_data_dependent_sizes_behave_as_eager():
    class Mixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 6)

        def forward(self, x):
            y = self.fc(x)
            y.add_(1).relu_()
            if y.sum().item() > 0:  # a graph break: the condition is data
                y = y * 2
            kept = y[y > 0.5]  # a size the data decides
            return y, kept.sum()

    m = Mixed().eval()
    fast = torch.compile(m, backend="esgraph")
    x = torch.randn(5, 6)
    with torch.no_grad():
        for got, want in zip(fast(x), m(x)):
            close(got, want)


def test_trace_writes_a_chrome_trace(tmp_path):
    path = tmp_path / "trace.json"
    fast = torch.compile(Net().eval(), backend="esgraph", options={"trace": str(path)})
    with torch.no_grad():
        fast(torch.randn(1, 3, 8, 8))
    events = json.loads(path.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    assert any("conv" in e.get("name", "") for e in events)


def test_bf16_precision_and_the_simulated_ascend_device():
    net = Net().eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        want = net(x)
        close(torch.compile(net, backend="esgraph", options={"device": "ascend-sim"})(x), want)
        torch._dynamo.reset()
        try:
            got = torch.compile(net, backend="esgraph", options={"precision": "bf16"})(x)
        except Exception as e:  # a CPU without bf16 products says so by name
            assert "bf16" in str(e) or "BF16" in str(e)
        else:
            close(got, want, rtol=3e-2)


CACHED = """
import sys, torch, esgraph.torch
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
fast = torch.compile(net, backend="esgraph", options={"cache_dir": sys.argv[1]})
with torch.no_grad():
    x = torch.randn(1, 3, 8, 8)
    assert (fast(x) - net(x)).abs().max() < 1e-5
(fn,) = esgraph.torch.compiled_functions()
print(fn.model.stats()["cache_hits"])
"""


def test_a_second_process_loads_from_the_cache(tmp_path):
    script = tmp_path / "cached.py"
    script.write_text(CACHED)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    runs = [subprocess.run([sys.executable, str(script), str(tmp_path / "cache")], capture_output=True, text=True, env=env)
            for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr[-2000:]
    assert [r.stdout.split()[-1] for r in runs] == ["0", "1"]
