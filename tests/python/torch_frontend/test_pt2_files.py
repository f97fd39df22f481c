"""`python3 -m esgraph compile` on a .pt2 file written by torch.export.save: a PyTorch model
reaches a compiled-model file without ONNX in between, its symbolic batch keeping the range
torch.export gave it. What is not a program is refused by name."""
import os
import subprocess
import sys
import zipfile

import numpy as np
import torch
import torch.nn as nn

import esgraph


def esgraph_cli(*args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-m", "esgraph", *map(str, args)], capture_output=True, text=True, env=env)


def small_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, 4)).eval()


def test_a_pt2_file_compiles_to_a_model_file_that_serves_its_batch_range(tmp_path):
    net = small_net()
    x = torch.randn(2, 3, 16, 16)
    batch = torch.export.Dim("batch", min=1, max=8)
    torch.export.save(torch.export.export(net, (x,), dynamic_shapes=({0: batch},)), tmp_path / "net.pt2")
    r = esgraph_cli("compile", tmp_path / "net.pt2", "-o", tmp_path / "net.esgm")
    assert r.returncode == 0, r.stderr
    model = esgraph.load_model(str(tmp_path / "net.esgm"))
    for n in (1, 8):
        x = torch.randn(n, 3, 16, 16)
        with torch.no_grad():
            np.testing.assert_allclose(model(x.numpy()), net(x).numpy(), rtol=1e-4, atol=1e-5)
    r = esgraph_cli("info", tmp_path / "net.pt2")
    assert r.returncode == 0 and "conv2d" in r.stdout, r.stderr


def test_an_aotinductor_package_is_refused_by_name(tmp_path):
    # The layout torch._inductor.aoti_compile_and_package writes (compiled code under
    # data/aotinductor/): no program to read.
    path = tmp_path / "compiled.pt2"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("compiled/data/aotinductor/model/model.wrapper.so", b"\x7fELF")
        z.writestr("compiled/version", "1")
    r = esgraph_cli("compile", path, "-o", tmp_path / "out.esgm")
    assert r.returncode != 0
    assert "is an AOTInductor package" in r.stderr and "torch.export.save" in r.stderr


def test_a_file_that_is_no_archive_is_refused(tmp_path):
    path = tmp_path / "broken.pt2"
    path.write_bytes(b"not a zip")
    r = esgraph_cli("compile", path, "-o", tmp_path / "out.esgm")
    assert r.returncode != 0 and "is not a .pt2 file" in r.stderr


def test_reading_a_pt2_file_without_pytorch_says_so(tmp_path):
    net = small_net()
    torch.export.save(torch.export.export(net, (torch.randn(1, 3, 8, 8),)), tmp_path / "net.pt2")
    # torch made unimportable in the command's own interpreter
    hide = ("-c", "import sys; sys.modules['torch'] = None; import runpy; "
                  "sys.argv = ['esgraph'] + sys.argv[1:]; runpy.run_module('esgraph', run_name='__main__')")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, *hide, "compile", str(tmp_path / "net.pt2"), "-o", str(tmp_path / "o.esgm")],
                       capture_output=True, text=True, env=env)
    assert r.returncode != 0 and "needs PyTorch (pip install torch)" in r.stderr
