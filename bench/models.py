"""An MLP and a transformer encoder layer (batch 8, sequence 128, width 512, 8 heads), esgraph
compiled vs PyTorch eager and ONNX Runtime (CPU, the PyTorch model exported with
torch.onnx.export) on the same weights, every side on `--threads` threads; the sides alternate
rounds and keep their best round's median (bench/timing.py); results checked against each other.

    PYTHONPATH=build/default/python .venv/bin/python bench/models.py [--runs 9] [--rounds 3]
"""
import argparse
import os
import tempfile

import numpy as np
import torch

import esgraph
from esgraph import ops

import peers  # bench/peers.py
from timing import side_by_side  # bench/timing.py

rng = np.random.default_rng(0)


def w(*shape):
    return (rng.standard_normal(shape) * 0.05).astype(np.float32)


def mlp():
    ws = [w(784, 256), w(256), w(256, 256), w(256), w(256, 10), w(10)]
    with esgraph.GraphBuilder("mlp") as b:
        x = b.input("x", esgraph.f32, [8, 784])
        h = ops.relu(x @ ws[0] + ws[1])
        h = ops.relu(h @ ws[2] + ws[3])
        y = ops.softmax(h @ ws[4] + ws[5])
    t = [torch.from_numpy(a) for a in ws]

    def ref(x):
        h = torch.relu(x @ t[0] + t[1])
        h = torch.relu(h @ t[2] + t[3])
        return torch.softmax(h @ t[4] + t[5], dim=-1)

    return b.build([y]), ref, rng.standard_normal((8, 784)).astype(np.float32)


def encoder(batch=8, seq=128, dm=512, heads=8, ff=2048):
    dh = dm // heads
    p = dict(wq=w(dm, dm), wk=w(dm, dm), wv=w(dm, dm), wo=w(dm, dm), w1=w(dm, ff), b1=w(ff), w2=w(ff, dm), b2=w(dm))
    with esgraph.GraphBuilder("encoder") as b:
        x = b.input("x", esgraph.f32, [batch, seq, dm])

        def heads_of(t):
            return ops.transpose(ops.reshape(t, [0, 0, heads, dh]), perm=[0, 2, 1, 3])

        q, k, v = heads_of(x @ p["wq"]), heads_of(x @ p["wk"]), heads_of(x @ p["wv"])
        a = ops.softmax(ops.matmul(q, k, transpose_b=True) * (1 / np.sqrt(dh)))
        ctx = ops.reshape(ops.transpose(a @ v, perm=[0, 2, 1, 3]), [0, 0, dm])
        h = ops.layer_norm(x + ctx @ p["wo"])
        y = ops.layer_norm(h + ops.gelu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"])
    t = {k: torch.from_numpy(a) for k, a in p.items()}

    def ref(x):
        def heads_of(z):
            return z.reshape(batch, seq, heads, dh).permute(0, 2, 1, 3)

        q, k, v = heads_of(x @ t["wq"]), heads_of(x @ t["wk"]), heads_of(x @ t["wv"])
        a = torch.softmax(q @ k.transpose(-1, -2) / np.sqrt(dh), dim=-1)
        ctx = (a @ v).permute(0, 2, 1, 3).reshape(batch, seq, dm)
        h = torch.nn.functional.layer_norm(x + ctx @ t["wo"], (dm,))
        return torch.nn.functional.layer_norm(h + torch.nn.functional.gelu(h @ t["w1"] + t["b1"]) @ t["w2"] + t["b2"], (dm,))

    return b.build([y]), ref, rng.standard_normal((batch, seq, dm)).astype(np.float32)


def exported(ref, x, path):
    """The PyTorch model written to `path` as ONNX, for ORT."""
    class Wrapped(torch.nn.Module):
        def forward(self, inp):
            return ref(inp)

    torch.onnx.export(Wrapped(), torch.from_numpy(x), path, opset_version=14)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=peers.THREADS)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)  # Debian's build starts with one
    print(f"{args.threads} threads on every side; torch {torch.__version__}, {peers.versions()}")
    print(f"{'model':10} {'esgraph ms':>11} {'torch ms':>9} {'ORT ms':>8} {'esgraph/torch':>14} {'esgraph/ORT':>12}")
    for name, make in (("mlp", mlp), ("encoder", encoder)):
        graph, ref, x = make()
        model = esgraph.compile(graph, threads=args.threads)
        tx = torch.from_numpy(x)
        with torch.no_grad(), tempfile.TemporaryDirectory() as d:
            want = ref(tx).numpy()
            np.testing.assert_allclose(model(x), want, rtol=2e-3, atol=2e-4)
            in_ort = peers.runner("ORT", exported(ref, x, os.path.join(d, "m.onnx")), [x], args.threads)
            if in_ort:
                np.testing.assert_allclose(in_ort()[0], want, rtol=2e-3, atol=2e-4)
            ms = side_by_side({"esgraph": lambda: model(x), "torch": lambda: ref(tx), "ORT": in_ort}, args.rounds, args.runs)
        ours, ort = ms["esgraph"], ms.get("ORT")
        ort_col = f"{ort:8.2f}" if ort else f"{'-':>8}"
        ratio = f"{ours / ort:11.2f}x" if ort else f"{'-':>12}"
        print(f"{name:10} {ours:11.2f} {ms['torch']:9.2f} {ort_col} {ours / ms['torch']:13.2f}x {ratio}", flush=True)


if __name__ == "__main__":
    main()
