"""Data movement at memory speed: a gather of one cache slice (the decoder's `past_k[i]`, a
4x1x4x255x64 cache) and a take of three indices along an inner axis, checked against numpy;
the median of 20 runs on one thread.

    PYTHONPATH=build/default/python /usr/bin/python3 bench/data_movement.py
"""
import statistics
import time

import numpy as np

import esgraph
from esgraph import ops


def main():
    with esgraph.GraphBuilder("gathers") as b:
        cache = b.input("cache", esgraph.f32, [4, 1, 4, 255, 64])
        one = ops.gather(cache, np.int64(2), axis=0)
        some = ops.gather(cache, np.array([3, 1, 0], np.int64), axis=3)
    model = esgraph.compile(b.build([one, some]), threads=1)
    x = np.random.default_rng(0).random((4, 1, 4, 255, 64), dtype=np.float32)
    got_one, got_some = model(x)
    assert np.array_equal(got_one, x[2]) and np.array_equal(got_some, np.take(x, [3, 1, 0], axis=3))
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        model(x)
        times.append(time.perf_counter() - t0)
    print(f"gather of {got_one.size:,} + {got_some.size:,} elements: {statistics.median(times) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
