"""A GPT-style decoder step exported by PyTorch (4 layers, width 256, 4 heads, batch 1, one new
token; the KV caches as [layers, 1, heads, past, 64] inputs that each layer indexes, as the
issue's exported step did), at several past lengths: esgraph beside ONNX Runtime (CPU) on the
same file, every side on `--threads` threads, alternating rounds and keeping each side's best
round's median of single steps (bench/timing.py); outputs (the hidden state and the new caches)
checked against PyTorch first. Each past length is its own compiled shape.

    PYTHONPATH=build/default/python .venv/bin/python bench/decoder.py [--runs 200] [--rounds 3] [--past 1,64,255]
"""
import argparse
import math
import os
import re
import tempfile
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import esgraph
import esgraph.onnx
import peers  # bench/peers.py
from timing import side_by_side  # bench/timing.py

LAYERS, WIDTH, HEADS = 4, 256, 4


class Block(nn.Module):
    """A GPT-style layer with its KV cache: `width` wide, `heads` heads, GELU `gelu` ("none": erf,
    or "tanh": GPT-2's)."""

    def __init__(self, width=WIDTH, heads=HEADS, gelu="none"):
        super().__init__()
        self.heads, self.gelu = heads, gelu
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x, past_k, past_v):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // self.heads), dim=-1)
        x = x + self.proj((a @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate=self.gelu)), k, v


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))

    def forward(self, x, past_k, past_v):
        ks, vs = [], []
        for i, block in enumerate(self.blocks):
            x, k, v = block(x, past_k[i], past_v[i])
            ks.append(k)
            vs.append(v)
        return x, torch.stack(ks), torch.stack(vs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=peers.THREADS)
    ap.add_argument("--past", default="1,64,255")
    args = ap.parse_args()
    print(f"{args.threads} threads on every side; {peers.versions()}")
    torch.manual_seed(0)
    module = Decoder().eval()
    print(f"{'past':>5} {'launches':>8} {'esgraph':>9} {'ORT':>9} {'esgraph/ORT':>12}  (ms a step)")
    for past in map(int, args.past.split(",")):
        x = torch.randn(1, 1, WIDTH)
        cache = [torch.randn(LAYERS, 1, HEADS, past, WIDTH // HEADS) for _ in range(2)]
        feeds = [t.numpy() for t in (x, *cache)]
        with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            path = os.path.join(d, "decoder.onnx")
            torch.onnx.export(module, (x, *cache), path, dynamo=False, opset_version=14)
            model = esgraph.compile(esgraph.onnx.load(path), threads=args.threads)
            with torch.no_grad():
                want = [t.numpy() for t in module(x, *cache)]
            for got, w in zip(model.run(feeds), want):
                assert np.abs(got - w).max() <= 1e-4 * max(1.0, np.abs(w).max()), past
            ms = side_by_side({"esgraph": lambda: model.run(feeds), "ORT": peers.runner("ORT", path, feeds, args.threads)},
                              args.rounds, args.runs)
        ours, theirs = ms["esgraph"], ms.get("ORT")
        launches = model.stats()["launches"]
        attention = len(re.findall(r'label="attention', model.to_dot()))
        ratio = f"{ours / theirs:.2f}x" if theirs else "-"
        print(f"{past:5d} {launches:8d} {ours:9.3f} {theirs or float('nan'):9.3f} {ratio:>12}  ({attention} attention launches)")


if __name__ == "__main__":
    main()
