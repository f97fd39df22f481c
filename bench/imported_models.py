"""Real torch.nn models imported into esgraph — through torch.fx and through torch.onnx.export
+ esgraph.onnx.load — timed side by side with PyTorch eager and ONNX Runtime (CPU) on the same
exported file; medians of several runs, outputs checked against PyTorch first.

    PYTHONPATH=build/default/python /usr/bin/python3 bench/imported_models.py [--runs 10]
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

import ort  # bench/ort.py
from timing import median_ms  # bench/timing.py


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
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count())  # Debian's build starts with one; esgraph and ORT use every core
    print(f"{'model':42} {'torch':>8} {'fx':>8} {'onnx':>8} {'ORT':>8} {'fx/torch':>9} {'onnx/ORT':>9}  (ms)")
    for name, module, x in models():
        module.eval()
        xn = x.numpy()
        with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            path = os.path.join(d, "m.onnx")
            torch.onnx.export(module, (x,), path, opset_version=14)
            via_fx = esgraph.compile(esgraph.torch.from_module(module, (x,)))
            via_onnx = esgraph.compile(esgraph.onnx.load(path))
            with torch.no_grad():
                want = first(module(x)).numpy()
                for model in (via_fx, via_onnx):
                    got = model.run([xn])[0]
                    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), name
                t_torch = median_ms(lambda: module(x), args.runs)
            t_fx = median_ms(lambda: via_fx.run([xn]), args.runs)
            t_onnx = median_ms(lambda: via_onnx.run([xn]), args.runs)
            t_ort = ort.median_ms(path, xn, args.runs)
        ort_col = f"{t_ort:8.2f}" if t_ort else f"{'-':>8}"
        ratio = f"{t_onnx / t_ort:8.2f}x" if t_ort else f"{'-':>9}"
        print(f"{name:42} {t_torch:8.2f} {t_fx:8.2f} {t_onnx:8.2f} {ort_col} {t_fx / t_torch:8.2f}x {ratio}")


if __name__ == "__main__":
    main()
