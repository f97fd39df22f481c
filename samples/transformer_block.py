"""The transformer encoder block in Python: numpy weights become constants, operators build
the graph, and every tensor's shape is known as it is written."""
import sys

import numpy as np

import esgraph
from esgraph import ops

SEQ, MODEL, HEADS, FF = 128, 512, 8, 2048
rng = np.random.default_rng(0)


def weight(*shape):
    return (rng.standard_normal(shape) * 0.02).astype(np.float32)


def split_heads(t):
    return ops.transpose(ops.reshape(t, [0, 0, HEADS, MODEL // HEADS]), perm=[0, 2, 1, 3])


def attention(b, x):
    with b.name_scope("attention"):
        q, k, v = (split_heads(x @ weight(MODEL, MODEL)) for _ in range(3))
        probs = ops.softmax(ops.matmul(q, k, transpose_b=True) * (1.0 / np.sqrt(MODEL // HEADS)))
        ctx = ops.transpose(probs @ v, perm=[0, 2, 1, 3])
        return ops.reshape(ctx, [0, 0, MODEL]) @ weight(MODEL, MODEL)


def feed_forward(b, x):
    with b.name_scope("ffn"):
        return ops.gelu(x @ weight(MODEL, FF) + weight(FF)) @ weight(FF, MODEL) + weight(MODEL)


def layer_norm(x):
    return ops.layer_norm(x, scale=np.ones(MODEL, np.float32), bias=weight(MODEL))


with esgraph.GraphBuilder("encoder_block") as b:
    x = b.input("x", esgraph.f32, ["batch", SEQ, MODEL])
    h = layer_norm(x + attention(b, x))
    y = layer_norm(h + feed_forward(b, h))
    print("output shape:", y.shape, y.dtype)

graph = b.build([y])
print(f"{graph.node_count} nodes")
if len(sys.argv) > 1:
    graph.save(sys.argv[1])
    print("saved to", sys.argv[1])
