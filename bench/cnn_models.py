"""torchvision's CNNs (random weights, no download) exported to ONNX and run by esgraph, ONNX
Runtime and OpenVINO (CPU) side by side, every side on `--threads` threads (esgraph's default:
every core): the sides alternate `--rounds` rounds, each warmed up by 3 runs a round and keeping
its best round's median of `--runs` (bench/timing.py). Outputs are checked against PyTorch first;
esgraph's launch and reorder counts beside. `--channel-block` compares esgraph's memory formats
(0: row-major; 8, 16: blocked channels) in the same run; `--bf16` adds esgraph with
precision='bf16', its speed-up over its own f32 time and its largest error against f32 (relative
to the largest output).

    PYTHONPATH=build/default/python .venv/bin/python bench/cnn_models.py [--runs 9] [--rounds 3]
        [--batches 1,8] [--models resnet50,mobilenet_v3_small] [--channel-block default,0] [--bf16]
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

import peers  # bench/peers.py
from timing import side_by_side  # bench/timing.py

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "regnet_y_400mf", "densenet121",
          "shufflenet_v2_x0_5", "efficientnet_b0", "googlenet", "squeezenet1_0"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=peers.THREADS)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--channel-block", default="default", help="comma-separated: default, 0, 8, 16")
    ap.add_argument("--bf16", action="store_true", help="also precision='bf16': time, speed-up, error against f32")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    print(f"{args.threads} threads on every side; {peers.versions()}")
    blocks = args.channel_block.split(",")
    sides = [f"esg[{b}]" for b in blocks] + peers.available()
    heads = " ".join(f"{s:>10}" for s in sides)
    ratio_heads = " ".join(f"{'esg/' + p:>12}" for p in peers.available())
    bf16_heads = f" {'bf16':>9} {'f32/bf16':>9} {'bf16 err':>9}" if args.bf16 else ""
    print(f"{'model':22} {'batch':>5} {heads} {ratio_heads} {'launches':>8} {'reorders':>8}{bf16_heads}  (ms)")
    for name in args.models.split(","):
        module = getattr(tvm, name)(**({"aux_logits": False, "init_weights": True} if name == "googlenet" else {})).eval()
        for batch in map(int, args.batches.split(",")):
            x = torch.randn(batch, 3, 224, 224)
            xn = x.numpy()
            with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                path = os.path.join(d, "m.onnx")
                torch.onnx.export(module, (x,), path, opset_version=14)
                with torch.no_grad():
                    want = module(x).numpy()
                fns, stats = {}, None
                for b in blocks:
                    options = {} if b == "default" else {"channel_block": int(b)}
                    model = esgraph.compile(esgraph.onnx.load(path), threads=args.threads, backend_options=options)
                    got = model.run([xn])[0]
                    err = np.abs(got - want).max() / np.abs(want).max()
                    assert err <= 1e-3, f"{name}: error {err}"
                    fns[f"esg[{b}]"] = (lambda m: lambda: m.run([xn]))(model)
                    stats = stats or model.stats()
                if args.bf16:
                    rounded = esgraph.compile(esgraph.onnx.load(path), threads=args.threads, precision="bf16")
                    exact = fns[sides[0]]()[0]
                    bf16_err = np.abs(rounded.run([xn])[0] - exact).max() / np.abs(exact).max()
                    fns["bf16"] = lambda: rounded.run([xn])
                for peer in peers.available():
                    fns[peer] = peers.runner(peer, path, [xn], args.threads)
                    got = fns[peer]()[0]  # ORT's list and OpenVINO's result both index by output
                    assert np.abs(got - want).max() <= 1e-3 * np.abs(want).max(), f"{name}: {peer} disagrees with PyTorch"
                ms = side_by_side(fns, args.rounds, args.runs)
            cols = " ".join(f"{ms[s]:10.2f}" for s in sides)
            ratios = " ".join(f"{ms[sides[0]] / ms[p]:11.2f}x" for p in peers.available())
            bf16_cols = f" {ms['bf16']:9.2f} {ms[sides[0]] / ms['bf16']:8.2f}x {bf16_err:9.1e}" if args.bf16 else ""
            print(f"{name:22} {batch:5} {cols} {ratios} {stats['launches']:8} {stats['reorders']:8}{bf16_cols}", flush=True)


if __name__ == "__main__":
    main()
