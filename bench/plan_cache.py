"""A model with a symbolic batch run at many distinct batch sizes: one symbolic plan per size
class (sizes up to the next power of two, or one for a declared range), bound to each size;
with the default cache (`max_plans` 16 bindings) the process's resident memory stays flat,
without a limit it grows with every size's binding. The largest size runs first (its working
memory, per-thread scratch included, is what any plan needs at most), then every size 1..N in
a scrambled order; prints the resident memory grown since, after every hundred sizes, in a
fresh process per setting.

    PYTHONPATH=build/default/python .venv/bin/python bench/plan_cache.py [--sizes 1000]
"""
import argparse
import subprocess
import sys
import time

from timing import resident_mib  # bench/timing.py


def worker(sizes, max_plans, ranged):
    import numpy as np

    import esgraph
    from esgraph import ops

    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((512, 1024)).astype(np.float32) * 0.05
    w2 = rng.standard_normal((1024, 512)).astype(np.float32) * 0.05
    with esgraph.GraphBuilder("mlp") as b:
        x = b.input("x", esgraph.f32, ["batch", 512])
        y = ops.layer_norm(x + ops.gelu(x @ w1) @ w2)
    model = esgraph.compile(b.build([y]), max_plans=max_plans, **({"shapes": {"batch": (1, sizes)}} if ranged else {}))
    model(np.ones((sizes, 512), np.float32))
    start, t0, row = resident_mib(), time.perf_counter(), []
    for i in range(1, sizes + 1):
        batch = 1 + (i * 37) % sizes  # every size once (37 is prime to the counts used), scrambled
        model(np.ones((batch, 512), np.float32))
        if i % 100 == 0:
            row.append(f"{resident_mib() - start:7.0f}")
    per_size = (time.perf_counter() - t0) / sizes * 1e3
    setting = f"max_plans={max_plans}" + (f", range 1..{sizes}" if ranged else "")
    stats = model.stats()
    print(f"{setting:<26} {' '.join(row)}   ({stats['plans']} plans compiled, {stats['bindings']} bindings, {per_size:.2f} ms a size)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, default=1000)
    ap.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--ranged", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        return worker(args.sizes, args.worker, args.ranged)
    print(f"resident memory grown (MiB) after each hundred of the batch sizes 1..{args.sizes}, the largest run first")
    for max_plans, ranged in ((16, False), (16, True), (0, False)):
        subprocess.run([sys.executable, __file__, "--sizes", str(args.sizes), "--worker", str(max_plans)] + (["--ranged"] if ranged else []),
                       check=True)


if __name__ == "__main__":
    main()
