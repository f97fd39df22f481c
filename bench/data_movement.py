"""Data movement at memory speed, checked against numpy and timed beside numpy's own copy:
a gather of one cache slice (the decoder's `past_k[i]`, a 4x1x4x255x64 cache) and a take of
three indices along an inner axis (one thread); transposes that keep the last axis (whole
rows) and that move it (NCHW to NHWC, a ViT's [B, C, HW] to [B, HW, C], a square matrix),
with the model's threads. Medians of 20 runs; GB/s counts the bytes read and written.

    PYTHONPATH=build/default/python .venv/bin/python bench/data_movement.py
"""
import numpy as np

import esgraph
from esgraph import ops
from timing import median_ms  # bench/timing.py


def gathers():
    with esgraph.GraphBuilder("gathers") as b:
        cache = b.input("cache", esgraph.f32, [4, 1, 4, 255, 64])
        one = ops.gather(cache, np.int64(2), axis=0)
        some = ops.gather(cache, np.array([3, 1, 0], np.int64), axis=3)
    model = esgraph.compile(b.build([one, some]), threads=1)
    x = np.random.default_rng(0).random((4, 1, 4, 255, 64), dtype=np.float32)
    got_one, got_some = model(x)
    assert np.array_equal(got_one, x[2]) and np.array_equal(got_some, np.take(x, [3, 1, 0], axis=3))
    print(f"gather of {got_one.size:,} + {got_some.size:,} elements: {median_ms(lambda: model(x), 20):.3f} ms")


def transposes():
    print(f"{'transpose':34} {'esgraph':>9} {'GB/s':>6} {'numpy':>9}  (ms)")
    for shape, perm in [((8, 128, 512), (1, 0, 2)), ((1, 256, 56, 56), (0, 2, 3, 1)), ((8, 64, 3136), (0, 2, 1)),
                        ((2048, 2048), (1, 0))]:
        x = np.random.default_rng(1).random(shape, dtype=np.float32)
        with esgraph.GraphBuilder("transpose") as b:
            y = ops.transpose(b.input("x", esgraph.f32, list(shape)), perm=list(perm))
        model = esgraph.compile(b.build([y]))
        assert np.array_equal(model(x), x.transpose(perm))  # one output: an array
        out = np.empty(x.transpose(perm).shape, np.float32)
        ours = median_ms(lambda: model(x), 20)
        theirs = median_ms(lambda: np.copyto(out, x.transpose(perm)), 20)
        print(f"{str(shape) + ' ' + str(perm):34} {ours:9.3f} {2 * x.nbytes / ours / 1e6:6.1f} {theirs:9.3f}")


if __name__ == "__main__":
    gathers()
    transposes()
