"""An autoregressive loop of the GPT-style decoder step of bench/decoder.py (4 layers, width
256, 4 heads), exported by PyTorch with a dynamic past axis: each step's new key and value
caches are the next step's past ones, from empty up to `--steps` - 1. esgraph compiles the model
once with the range `past: (0, steps - 1)` (one symbolic plan, bound to each new length as it
comes) beside ONNX Runtime on the same file and loop. Prints the loop's total time (esgraph's
first compile included), the plans compiled and bindings made, the resident memory the loop
grew, and, at a few past lengths, the step's time in the loop (each step the first run at its
length, binding included; the median over the nine steps around that length in --rounds loops),
in the first loop after the compile and in the next one (a second generation: the model's
bindings of the first are long dropped, so it binds each length again, but the process's heap
is warm), beside the same second loop on a model that kept every binding (max_plans=0: no
binding at all, which isolates what binding costs) and a plan compiled for that length alone
(run repeatedly on the same inputs),
both writing into outputs allocated and touched before the clock starts (a growing output's
fresh pages would otherwise dominate); in the second loop, the static plan also runs once right
after the step at its length, on the same inputs (the loop's state, as the step met it). Last, warm: the symbolic model bound to a length and run
repeatedly on the same inputs, beside the static plan run so (what the plan itself costs, with
neither binding nor a step's first touch of its buffers). The outputs are checked against
PyTorch first.

ONNX Runtime runs the same loop in this process, on the same `--threads` threads as esgraph.

    PYTHONPATH=build/default/python .venv/bin/python bench/decoder_loop.py [--steps 512] [--rounds 3]
"""
import argparse
import os
import statistics
import tempfile
import time
import warnings

import numpy as np
import torch

import esgraph
import esgraph.onnx
import peers  # bench/peers.py
from decoder import HEADS, LAYERS, WIDTH, Decoder  # bench/decoder.py
from timing import median_ms, resident_mib  # bench/timing.py

def cache(past):
    return np.zeros((LAYERS, 1, HEADS, past, WIDTH // HEADS), np.float32)


def loop(model, x, steps):
    """Runs the loop as a user would (each step's outputs allocated by the run); its total seconds."""
    k = v = cache(0)
    start = time.perf_counter()
    for _ in range(steps):
        _, k, v = model.run([x, k, v])
    return time.perf_counter() - start


def outputs(past):
    """A step's outputs, every page touched (np.zeros maps zero pages only when first written)."""
    out = [np.empty((1, 1, WIDTH), np.float32), np.empty(cache(past + 1).shape, np.float32), np.empty(cache(past + 1).shape, np.float32)]
    for a in out:
        a.fill(0)
    return out


def step_times(model, x, steps, static, runs):
    """The loop again, each step writing into outputs made beforehand; returns each step's seconds
    and, at the lengths `static` has a plan for, that plan's seconds on the same inputs: run once
    right after the step (in the loop's state, as the step ran), then, with `runs`, their median."""
    k = v = cache(0)
    times, alone, once = [], {}, {}
    for past in range(steps):
        out = outputs(past)
        t0 = time.perf_counter()
        model.run([x, k, v], out=out)
        times.append(time.perf_counter() - t0)
        if past in static:
            other = outputs(past)
            t0 = time.perf_counter()
            static[past].run([x, k, v], out=other)
            once[past] = time.perf_counter() - t0
            if runs:
                alone[past] = median_ms(lambda: static[past].run([x, k, v], out=other), runs) / 1e3
        _, k, v = out
    return times, alone, once


def ort_loop(session, x, steps):
    """The same loop in ORT: the loop's total milliseconds and each step's."""
    names = [i.name for i in session.get_inputs()]
    k = v = cache(0)
    times = []
    start = time.perf_counter()
    for _ in range(steps):
        t0 = time.perf_counter()
        _, k, v = session.run(None, dict(zip(names, (x, k, v))))
        times.append((time.perf_counter() - t0) * 1e3)
    return {"total_ms": (time.perf_counter() - start) * 1e3, "step_ms": times}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=100, help="runs of each static plan")
    ap.add_argument("--threads", type=int, default=peers.THREADS)
    args = ap.parse_args()
    print(f"{args.threads} threads on every side; {peers.versions()}")
    torch.manual_seed(0)
    module = Decoder().eval()
    x = torch.randn(1, 1, WIDTH)
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = os.path.join(d, "decoder.onnx")
        torch.onnx.export(module, (x, torch.from_numpy(cache(3)), torch.from_numpy(cache(3))), path, dynamo=False, opset_version=14,
                          input_names=["x", "past_k", "past_v"], output_names=["y", "k", "v"],
                          dynamic_axes={"past_k": {3: "past"}, "past_v": {3: "past"}, "k": {3: "total"}, "v": {3: "total"}})
        graph = esgraph.onnx.load(path)
        xs = x.numpy()
        # Correct first: a few steps of the loop against PyTorch's.
        model = esgraph.compile(graph, threads=args.threads, shapes={"past": (0, args.steps - 1)})
        k = v = cache(0)
        for step in range(5):
            with torch.no_grad():
                want = [t.numpy() for t in module(x, torch.from_numpy(k), torch.from_numpy(v))]
            got = model.run([xs, k, v])
            for g, w in zip(got, want):
                assert np.abs(g - w).max() <= 1e-4 * max(1.0, np.abs(w).max()), step
            _, k, v = got

        session = peers.ort_session(path, args.threads) if "ORT" in peers.available() else None
        totals, grown, stats, theirs = [], [], None, []
        for _ in range(args.rounds):  # esgraph's loop and ORT's alternate
            before = resident_mib()
            model = esgraph.compile(graph, threads=args.threads, shapes={"past": (0, args.steps - 1)})
            totals.append(loop(model, xs, args.steps))
            grown.append(resident_mib() - before)
            stats = model.stats()
            del model
            theirs.append(ort_loop(session, xs, args.steps) if session else None)
        ours_total = statistics.median(totals) * 1e3
        print(f"{args.steps} steps (past 0..{args.steps - 1}), medians of {args.rounds} loops:")
        print(f"  esgraph: {ours_total:.1f} ms in all (compile included), {stats['plans']} plan(s) compiled, "
              f"{stats['bindings']} bindings; resident memory grown {min(grown):.0f}-{max(grown):.0f} MiB a loop")
        if all(theirs):
            ort_total = statistics.median(t["total_ms"] for t in theirs)
            print(f"  ONNX Runtime: {ort_total:.1f} ms in all; esgraph / ORT {ours_total / ort_total:.2f}x")
        lengths = sorted(p for p in {1, 16, 64, 128, 256, args.steps // 2, args.steps - 1} if p < args.steps)
        static = {p: esgraph.compile(graph, threads=args.threads, shapes={"past": p}) for p in lengths}
        for p, plan in static.items():  # its memory touched once, as the symbolic model's is by the loops
            plan.run([xs, cache(p), cache(p)], out=outputs(p))
        first, second, kept = [], [], []
        for _ in range(args.rounds):
            model = esgraph.compile(graph, threads=args.threads, shapes={"past": (0, args.steps - 1)})
            first.append(step_times(model, xs, args.steps, static, args.runs))
            second.append(step_times(model, xs, args.steps, static, 0))
            assert model.stats()["plans"] == 1
            del model
            keeping = esgraph.compile(graph, threads=args.threads, shapes={"past": (0, args.steps - 1)}, max_plans=0)
            step_times(keeping, xs, args.steps, {}, args.runs)
            kept.append(step_times(keeping, xs, args.steps, {}, args.runs))
            assert keeping.stats()["bindings"] == args.steps
            del keeping
        symbolic = esgraph.compile(graph, threads=args.threads, shapes={"past": (0, args.steps - 1)})
        warm = {}
        for past in lengths:  # (symbolic, static) medians, the two alternating in rounds
            k = v = np.random.default_rng(past).standard_normal(cache(past).shape).astype(np.float32)
            mine, theirs_out = outputs(past), outputs(past)
            pairs = [(median_ms(lambda: symbolic.run([xs, k, v], out=mine), args.runs),
                      median_ms(lambda: static[past].run([xs, k, v], out=theirs_out), args.runs)) for _ in range(args.rounds)]
            warm[past] = (statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs))
        print(f"{'past':>5} {'1st loop':>9} {'2nd loop':>9} {'no binding':>11} {'static plan':>12} {'2nd/none':>9} "
              f"{'2nd/static':>11} {'static once':>12} {'2nd/once':>9} {'ORT step':>9} {'warm: bound/static':>19}  (ms)")
        for past in lengths:
            window = range(max(1, past - 4), min(args.steps, past + 5))
            one, two, none = (statistics.median(s[0][p] for s in loops for p in window) * 1e3 for loops in (first, second, kept))
            alone = statistics.median(s[1][past] for s in first) * 1e3
            in_loop = statistics.median(s[2][past] for s in second) * 1e3
            theirs_step = statistics.median(t["step_ms"][past] for t in theirs) if all(theirs) else float("nan")
            bound, fixed = warm[past]
            print(f"{past:5d} {one:9.3f} {two:9.3f} {none:11.3f} {alone:12.3f} {two / none:8.2f}x {two / alone:10.2f}x"
                  f" {in_loop:12.3f} {two / in_loop:8.2f}x {theirs_step:9.3f}"
                  f" {bound:7.3f}/{fixed:.3f} {bound / fixed:.2f}x")


if __name__ == "__main__":
    main()
