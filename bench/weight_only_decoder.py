"""Weight-only quantized decoder step (issue 46's target): a GPT-2-small-sized decoder (12 layers,
width 768, 12 heads, a 50,257-word embedding tied to the LM head: 124M parameters, random
weights), batch 1, one new token after `--past` cached ones, exported by PyTorch in f32 and
quantized by esgraph.onnx.quantize_weights to MatMulNBits (int8 and int4, blocks of 32 along K,
asymmetric), with the tied table quantized too (stored once, as codes: the head's product and
the embedding's Gather read them) or kept in f32, and with accuracy_level 4 (the products may
round the activations to int8, 32 values to a scale: ORT's int8 kernels and esgraph's VNNI
path where the CPU has it) as well as at f32 activations. Each file runs in esgraph and in ONNX Runtime
(its own MatMulNBits kernels) on `--threads` threads each, alternating rounds (bench/timing.py).

Reported for each: the step's time beside esgraph's own f32 step and beside ORT on the same
file; the weight bytes the file holds and the resident memory esgraph's process gains to load,
compile and run it once (a fresh process each, measured in /proc/self/status), beside f32's;
and the logits' error against the f32 model on the same weights and inputs (random weights
give no perplexity), as a fraction of the f32 logits' range.

    PYTHONPATH=build/default/python:bench .venv/bin/python bench/weight_only_decoder.py [--past 128] [--runs 30] [--rounds 3]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn

import esgraph
import esgraph.onnx
import peers  # bench/peers.py
from decoder import Block  # bench/decoder.py
from timing import resident_mib, side_by_side  # bench/timing.py

LAYERS, WIDTH, HEADS, VOCAB, POSITIONS = 12, 768, 12, 50257, 1024


class Decoder(nn.Module):
    """GPT-2's step; the tied table held as the head's [width, vocab] matrix, from which the
    embedding takes a column (one copy of it in the exported file)."""

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(WIDTH, VOCAB) * 0.02)
        self.positions = nn.Parameter(torch.randn(POSITIONS, WIDTH) * 0.01)
        self.blocks = nn.ModuleList(Block(WIDTH, HEADS, gelu="tanh") for _ in range(LAYERS))
        self.ln = nn.LayerNorm(WIDTH)
        for p in self.blocks.parameters():  # GPT-2's initialization scale
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, ids, past_k, past_v):
        x = torch.index_select(self.table, 1, ids.reshape(-1)).t().reshape(1, 1, WIDTH) + self.positions[past_k.shape[3]]
        ks, vs = [], []
        for i, block in enumerate(self.blocks):
            x, k, v = block(x, past_k[i], past_v[i])
            ks.append(k)
            vs.append(v)
        return self.ln(x) @ self.table, torch.stack(ks), torch.stack(vs)


def weight_bytes(path):
    return sum(t.ByteSize() for t in onnx.load(path).graph.initializer)


def resident(path, feeds_path, threads):
    """MiB esgraph's process gains to load, compile and run the file once (a fresh process)."""
    code = ("import sys, json, numpy as np, esgraph, esgraph.onnx; sys.path.insert(0, 'bench'); from timing import resident_mib;"
            f"feeds = list(np.load({feeds_path!r}).values()); before = resident_mib();"
            f"m = esgraph.compile(esgraph.onnx.load({path!r}), threads={threads}); m.run(feeds);"
            "print(json.dumps(resident_mib() - before))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=os.environ)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--past", type=int, default=128)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=peers.THREADS)
    args = ap.parse_args()
    print(f"{args.threads} threads on every side; {peers.versions()}; past {args.past}; resident MiB at start {resident_mib():.0f}")
    torch.manual_seed(0)
    module = Decoder().eval()
    ids = torch.tensor([[4242]])
    cache = [torch.randn(LAYERS, 1, HEADS, args.past, WIDTH // HEADS) for _ in range(2)]
    feeds = [t.numpy() for t in (ids, *cache)]
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        files = {"f32": os.path.join(d, "f32.onnx")}
        torch.onnx.export(module, (ids, *cache), files["f32"], dynamo=False, opset_version=14)
        table = next(i.name for i in onnx.load(files["f32"]).graph.initializer if list(i.dims) == [WIDTH, VOCAB])
        # accuracy_level 4: the products may round the activations to int8 (ORT and esgraph alike)
        for bits, tied, level in [(8, True, 0), (8, False, 0), (4, True, 0), (4, False, 0), (8, True, 4), (4, True, 4)]:
            name = f"int{bits}" + ("" if tied else ", f32 table") + (f", level {level}" if level else "")
            files[name] = os.path.join(d, f"int{bits}{'' if tied else '_f32_table'}_{level}.onnx")
            onnx.save(esgraph.onnx.quantize_weights(files["f32"], bits=bits, block_size=32, exclude=() if tied else (table,),
                                                    accuracy_level=level), files[name])
        feeds_path = os.path.join(d, "feeds.npz")
        np.savez(feeds_path, *feeds)
        with torch.no_grad():
            want = module(ids, *cache)[0].numpy()
        reference = None
        print(f"{'model':>16} {'esgraph ms':>10} {'/ f32':>6} {'ORT ms':>8} {'/ ORT':>6} {'weights MB':>10} {'/ f32':>6} "
              f"{'resident MiB':>12} {'/ f32':>6} {'logits err':>10}")
        for name, path in files.items():
            model = esgraph.compile(esgraph.onnx.load(path), threads=args.threads)
            logits = model.run(feeds)[0]
            if name == "f32":
                assert np.abs(logits - want).max() <= 1e-3 * np.abs(want).max(), "f32 logits differ from PyTorch's"
            error = np.abs(logits - want).max() / (want.max() - want.min())
            ms = side_by_side({"esgraph": lambda: model.run(feeds), "ORT": peers.runner("ORT", path, feeds, args.threads)},
                              args.rounds, args.runs)
            del model
            row = (ms["esgraph"], ms.get("ORT"), weight_bytes(path) / 1e6, resident(path, feeds_path, args.threads))
            reference = reference or row
            ort = f"{row[1]:8.2f} {row[0] / row[1]:6.2f}" if row[1] else f"{'-':>8} {'-':>6}"
            print(f"{name:>16} {row[0]:10.2f} {row[0] / reference[0]:6.2f} {ort} {row[2]:10.1f} {row[2] / reference[2]:6.3f} "
                  f"{row[3]:12.0f} {row[3] / reference[3]:6.3f} {error:10.2e}", flush=True)


if __name__ == "__main__":
    main()
