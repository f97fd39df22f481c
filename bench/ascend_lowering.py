"""What the Ascend backend launches for two transformer blocks, on the simulated device: generated
kernels, CANN operator-library (aclnn) calls, device copies and the one device allocation. The
simulator runs kernels on the CPU, so times say nothing about an NPU; the launch counts and which
ops go where are what a device run would have too (tinygrad-style kernel counts)."""
import argparse

import numpy as np

import esgraph
from esgraph import ops

rng = np.random.default_rng(0)


def weight(*shape):
    return (rng.standard_normal(shape) * 0.02).astype(np.float32)


def attention(x, mask, batch, seq, width, heads):
    def split(t):
        return ops.transpose(ops.reshape(t, [batch, seq, heads, width // heads]), perm=[0, 2, 1, 3])
    q, k, v = (split(x @ weight(width, width)) for _ in range(3))
    probs = ops.softmax(ops.matmul(q, k, transpose_b=True), mask=mask, scale=1.0 / np.sqrt(width // heads))
    return ops.reshape(ops.transpose(probs @ v, perm=[0, 2, 1, 3]), [batch, seq, width]) @ weight(width, width)


def encoder(batch, seq, width, heads):
    """Post-norm BERT-style block: a padding mask [B, 1, 1, S], layer norms, GELU."""
    with esgraph.GraphBuilder("encoder") as b:
        x, m = b.input("x", esgraph.f32, [batch, seq, width]), b.input("mask", esgraph.f32, [batch, 1, 1, seq])
        h = ops.layer_norm(x + attention(x, m, batch, seq, width, heads), scale=weight(width), bias=weight(width))
        y = ops.layer_norm(h + ops.gelu(h @ weight(width, 4 * width)) @ weight(4 * width, width), scale=weight(width), bias=weight(width))
        return b.build([y])


def llama(batch, seq, width, heads):
    """Pre-norm LLaMA-style block: RMS norms, a causal mask [1, 1, S, S], a SiLU-gated FFN, and
    log-probabilities of the result."""
    with esgraph.GraphBuilder("llama") as b:
        x, m = b.input("x", esgraph.f32, [batch, seq, width]), b.input("mask", esgraph.f32, [1, 1, seq, seq])
        h = x + attention(ops.rms_norm(x, scale=weight(width)), m, batch, seq, width, heads)
        n = ops.rms_norm(h, scale=weight(width))
        y = h + (ops.silu(n @ weight(width, 4 * width)) * (n @ weight(width, 4 * width))) @ weight(4 * width, width)
        return b.build([ops.log_softmax(y)])


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    a = p.parse_args()
    print(f"batch {a.batch}, sequence {a.seq}, width {a.width}, {a.heads} heads (f32), backend ascend-sim")
    print(f"{'model':10} {'kernels':>8} {'aclnn':>6} {'copies':>7} {'device bytes':>13}  aclnn ops")
    for build in (encoder, llama):
        name = build.__name__
        try:
            stats = esgraph.compile(build(a.batch, a.seq, a.width, a.heads), backend="ascend-sim").stats()
        except esgraph.UnsupportedError as e:
            print(f"{name:10} not lowered: {str(e)[:160]}")
            continue
        library = " ".join(f"{c['function']} x{c['count']}" for c in stats.get("aclnn_calls", [])) or "none"
        print(f"{name:10} {stats['device_kernel_launches']:>8} {stats['library_calls']:>6} {stats['device_copies']:>7} "
              f"{stats['device_bytes']:>13}  {library}")


if __name__ == "__main__":
    main()
