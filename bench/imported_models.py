"""Real torch.nn models imported into esgraph — through torch.export and through torch.onnx.export
+ esgraph.onnx.load — timed side by side with PyTorch eager and ONNX Runtime (CPU) on the same
exported file, every side on `--threads` threads; the sides alternate rounds and keep their best
round's median (bench/timing.py); outputs checked against PyTorch first.

    PYTHONPATH=build/default/python .venv/bin/python bench/imported_models.py [--runs 9] [--rounds 3]
"""
import argparse
import os
import tempfile
import warnings

import numpy as np
import torch
import torch.nn as nn

import esgraph
import esgraph.onnx
import esgraph.torch

import peers  # bench/peers.py
from timing import side_by_side  # bench/timing.py


class ConvBNNet(nn.Module):
    """A small ResNet-style stem: convolutions with batch norm and ReLU, pooling, a classifier."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(128, 100)

    def forward(self, x):
        return self.classifier(self.features(x))


def models():
    torch.manual_seed(0)
    return [
        ("TransformerEncoderLayer b8 s128 d512 h8", nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True),
         torch.randn(8, 128, 512)),
        ("LSTM 2 layers h256, b8 s64", nn.LSTM(128, 256, num_layers=2, batch_first=True), torch.randn(8, 64, 128)),
        ("GRU h256, b8 s64", nn.GRU(128, 256, batch_first=True), torch.randn(8, 64, 128)),
        ("conv+BN stack, b8 3x64x64", ConvBNNet(), torch.randn(8, 3, 64, 64)),
        ("MLP 256x1024 -> 4096 -> 1024", nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)),
         torch.randn(256, 1024)),
    ]


def first(value):
    return value[0] if isinstance(value, tuple) else value


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=peers.THREADS)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)  # Debian's build starts with one
    print(f"{args.threads} threads on every side; torch {torch.__version__}, {peers.versions()}")
    print(f"{'model':42} {'torch':>8} {'export':>8} {'onnx':>8} {'ORT':>8} {'exp/torch':>9} {'onnx/ORT':>9}  (ms)")
    for name, module, x in models():
        module.eval()
        xn = x.numpy()
        with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            path = os.path.join(d, "m.onnx")
            torch.onnx.export(module, (x,), path, dynamo=False, opset_version=14)
            via_export = esgraph.compile(esgraph.torch.from_module(module, (x,)), threads=args.threads)
            via_onnx = esgraph.compile(esgraph.onnx.load(path), threads=args.threads)
            in_ort = peers.runner("ORT", path, [xn], args.threads)
            with torch.no_grad():
                want = first(module(x)).numpy()
                for run in (via_export.run, via_onnx.run) + ((lambda _: in_ort(),) if in_ort else ()):
                    got = run([xn])[0]
                    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), name
                ms = side_by_side({"torch": lambda: module(x), "export": lambda: via_export.run([xn]), "onnx": lambda: via_onnx.run([xn]),
                                   "ORT": in_ort}, args.rounds, args.runs)
        t_ort = ms.get("ORT")
        ort_col = f"{t_ort:8.2f}" if t_ort else f"{'-':>8}"
        ratio = f"{ms['onnx'] / t_ort:8.2f}x" if t_ort else f"{'-':>9}"
        print(f"{name:42} {ms['torch']:8.2f} {ms['export']:8.2f} {ms['onnx']:8.2f} {ort_col} {ms['export'] / ms['torch']:8.2f}x {ratio}",
              flush=True)


if __name__ == "__main__":
    main()
