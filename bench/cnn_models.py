"""torchvision's CNNs (random weights, no download) exported to ONNX and run by esgraph and by
ONNX Runtime (CPU) side by side: median times per batch size, outputs checked against PyTorch
first, and esgraph's launch and reorder counts. `--channel-block` compares esgraph's memory
formats (0: row-major; 8, 16: blocked channels) in the same run; `--bf16` adds esgraph with
precision='bf16', its speed-up over its own f32 time and its largest error against f32 (relative
to the largest output).

    PYTHONPATH=build/default/python /usr/bin/python3 bench/cnn_models.py [--runs 5] [--batches 1,8]
        [--models resnet50,mobilenet_v3_small] [--channel-block default,0] [--bf16]
"""
import argparse
import os
import tempfile
import warnings

import numpy as np
import torch
import torchvision.models as tvm

import esgraph
import esgraph.onnx

import ort  # bench/ort.py
from timing import median_ms  # bench/timing.py

MODELS = ["resnet50", "mobilenet_v3_small", "regnet_y_400mf", "densenet121", "shufflenet_v2_x0_5", "efficientnet_b1"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--channel-block", default="default", help="comma-separated: default, 0, 8, 16")
    ap.add_argument("--bf16", action="store_true", help="also precision='bf16': time, speed-up, error against f32")
    args = ap.parse_args()
    torch.manual_seed(0)
    blocks = args.channel_block.split(",")
    heads = " ".join(f"{'esg[' + b + ']':>11}" for b in blocks)
    bf16_heads = f" {'bf16':>9} {'f32/bf16':>9} {'bf16 err':>9}" if args.bf16 else ""
    print(f"{'model':22} {'batch':>5} {heads} {'ORT':>9} {'esg/ORT':>8} {'launches':>8} {'reorders':>8}{bf16_heads}  (ms)")
    for name in args.models.split(","):
        module = getattr(tvm, name)().eval()
        for batch in map(int, args.batches.split(",")):
            x = torch.randn(batch, 3, 224, 224)
            xn = x.numpy()
            with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                path = os.path.join(d, "m.onnx")
                torch.onnx.export(module, (x,), path, opset_version=14)
                with torch.no_grad():
                    want = module(x).numpy()
                times, stats = [], None
                for b in blocks:
                    options = {} if b == "default" else {"channel_block": int(b)}
                    model = esgraph.compile(esgraph.onnx.load(path), backend_options=options)
                    got = model.run([xn])[0]
                    err = np.abs(got - want).max() / np.abs(want).max()
                    assert err <= 1e-3, f"{name}: error {err}"
                    times.append(median_ms(lambda: model.run([xn]), args.runs))
                    stats = stats or model.stats()
                bf16_cols = ""
                if args.bf16:
                    rounded = esgraph.compile(esgraph.onnx.load(path), precision="bf16")
                    exact = esgraph.compile(esgraph.onnx.load(path)).run([xn])[0]
                    err = np.abs(rounded.run([xn])[0] - exact).max() / np.abs(exact).max()
                    t_bf16 = median_ms(lambda: rounded.run([xn]), args.runs)
                    bf16_cols = f" {t_bf16:9.2f} {times[0] / t_bf16:8.2f}x {err:9.1e}"
                t_ort = ort.median_ms(path, xn, args.runs)
            cols = " ".join(f"{t:11.2f}" for t in times)
            ort_col = f"{t_ort:9.2f}" if t_ort else f"{'-':>9}"
            ratio = f"{times[0] / t_ort:7.2f}x" if t_ort else f"{'-':>8}"
            print(f"{name:22} {batch:5} {cols} {ort_col} {ratio} {stats['launches']:8} {stats['reorders']:8}{bf16_cols}", flush=True)


if __name__ == "__main__":
    main()
