"""esgraph's post-training quantizer (esgraph.quantize) on torchvision's CNNs (random weights, no
download): accuracy against the f32 model, in esgraph and in ONNX Runtime running the exported
QDQ file, beside the ORT-layout min-max QDQ file bench/int8_models.py makes (what ORT's static
quantizer writes; ORT's own tool needs an `onnx` newer than Debian's 1.12), and the time of each
quantized file in esgraph and in ORT on `--threads` threads each (bench/timing.py's method).

Calibration: `--calibration` batches of random images; evaluation: `--images` other ones. With
random weights there is no label to be right about: "top-1" is how often the quantized model's
class agrees with the f32 model's, "SQNR" the logits' 10·log10(Σ f32² / Σ (int8 − f32)²) over
the evaluation images, "esg≈ORT" the largest difference between esgraph's and ORT's logits on the
same file over the logits' range.

    PYTHONPATH=build/default/python:bench .venv/bin/python bench/quantizer.py [--models resnet18,mobilenet_v2]
        [--methods minmax,percentile,entropy] [--calibration 4] [--images 32] [--runs 9] [--rounds 3] [--layers]
"""
import argparse
import os
import tempfile
import time
import warnings

import numpy as np
import onnx
import torch
import torchvision.models as tvm

import esgraph
import esgraph.onnx

import int8_models  # bench/int8_models.py: the ORT-layout QDQ file
import peers  # bench/peers.py
from timing import side_by_side  # bench/timing.py

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "encoder"]


def model_and_shape(name):
    """The model, one input's shape and the calibration batch: a torchvision CNN, or "encoder":
    bench/int8_encoder.py's BERT-base-like encoder (12 layers, hidden 768) on 128 tokens, batch 1
    (its export's reshapes fix the batch); its "top-1" is the per-token argmax over the hidden axis."""
    if name == "encoder":
        import int8_encoder
        return int8_encoder.encoder(12), (128, 768), 1
    return getattr(tvm, name)().eval(), (3, 224, 224), 4


def sqnr_db(got, want):
    noise = float(np.sum((got.astype(np.float64) - want) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(float(np.sum(want.astype(np.float64) ** 2)) / noise)


def accuracy(logits, reference):
    return {"top1": float(np.mean(logits.argmax(-1) == reference.argmax(-1))), "sqnr": sqnr_db(logits, reference)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--methods", default="minmax,percentile,entropy")
    ap.add_argument("--calibration", type=int, default=4, help="calibration batches (of 4 images; of 1 for the encoder)")
    ap.add_argument("--images", type=int, default=32, help="evaluation images")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=peers.THREADS)
    ap.add_argument("--layers", action="store_true", help="print each model's three worst layers by SQNR")
    args = ap.parse_args()
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    print(f"{args.threads} threads on every side; {peers.versions()}; {args.calibration} calibration batches (4 images; the encoder 1), "
          f"{args.images} evaluation images; time at batch 1 (ms)")
    print(f"{'model':16} {'quantizer':18} {'top-1 esg':>9} {'top-1 ORT':>9} {'SQNR esg':>8} {'SQNR ORT':>8} {'esg≈ORT':>8} "
          f"{'esg ms':>7} {'ORT ms':>7} {'esg/ORT':>7} {'s':>5}")
    for name in args.models.split(","):
        module, shape, batch = model_and_shape(name)
        calibration = [rng.standard_normal((batch, *shape)).astype(np.float32) for _ in range(args.calibration)]
        images = rng.standard_normal((args.images, *shape)).astype(np.float32)
        with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f32_path = os.path.join(d, "f32.onnx")
            torch.onnx.export(module, (torch.randn(batch, *shape),), f32_path, opset_version=13,
                              dynamic_axes=None if batch == 1 else {"input": {0: "batch"}}, input_names=["input"])
            graph = esgraph.onnx.load(f32_path)
            with torch.no_grad():
                reference = module(torch.from_numpy(images)).numpy()
            files = {}
            for method in args.methods.split(","):
                start = time.perf_counter()
                q = esgraph.quantize(graph, calibration, method=method, threads=args.threads)
                seconds = time.perf_counter() - start
                path = os.path.join(d, f"esg_{method}.onnx")
                esgraph.onnx.save(q.graph, path)
                files[f"esgraph {method}"] = (path, seconds, q)
            f32_model = onnx.load(f32_path)
            ort_layout = os.path.join(d, "ort_layout.onnx")
            if name != "encoder":
                onnx.save(int8_models.quantize(f32_model, int8_models.calibrate(f32_model, calibration)), ort_layout)
            if name != "encoder":  # bench/int8_models.py's layout is the CNNs' (Conv, Gemm, Add, pools)
                files["ORT layout minmax"] = (ort_layout, None, None)
            for label, (path, seconds, q) in files.items():
                model = esgraph.compile(path, threads=args.threads)
                session = peers.ort_session(path, args.threads)
                feed = session.get_inputs()[0].name
                esg = np.concatenate([model.run([images[i:i + 1]])[0] for i in range(len(images))])
                ort = np.concatenate([session.run(None, {feed: images[i:i + 1]})[0] for i in range(len(images))])
                a, b = accuracy(esg, reference), accuracy(ort, reference)
                agree = float(np.abs(esg - ort).max() / (reference.max() - reference.min()))
                one = images[:1]
                times = side_by_side({"esg": lambda: model.run([one]), "ORT": lambda: session.run(None, {feed: one})},
                                     rounds=args.rounds, runs=args.runs)
                print(f"{name:16} {label:18} {a['top1']:9.3f} {b['top1']:9.3f} {a['sqnr']:8.1f} {b['sqnr']:8.1f} {agree:8.4f} "
                      f"{times['esg']:7.2f} {times['ORT']:7.2f} {times['esg'] / times['ORT']:7.2f} "
                      f"{'' if seconds is None else f'{seconds:5.1f}'}", flush=True)
                if args.layers and q is not None:
                    for layer in sorted(q.layers, key=lambda l: l.sqnr_db)[:3]:
                        print(f"{'':35} {layer.name} ({layer.op}): {layer.sqnr_db:.1f} dB, max error {layer.max_error:.3g} "
                              f"over [{layer.min:.3g}, {layer.max:.3g}]")


if __name__ == "__main__":
    main()
