"""Timing shared by the comparison scripts in bench/, and the process's resident memory.

`side_by_side` is the method every esgraph-against-a-peer figure uses: the sides alternate in
rounds (so a drift of the shared VM's speed hits both), each warmed up by a few calls at the
start of each round, and each keeps its best round's median. Before a side's round the process
pauses, so that the side before it has stopped spinning: OpenBLAS's idle threads (PyTorch
eager's products) spin about 0.1 s after a call and doubled a small model's time after them.
`median_ms` times one side alone."""
import statistics
import time


def _median_of(fn, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def median_ms(fn, runs):
    """Median wall time of fn() in milliseconds over `runs` calls after one warm-up call."""
    fn()
    return _median_of(fn, runs)


def side_by_side(fns, rounds=3, runs=9, warmup=3, pause_s=0.3):
    """{name: fn} -> {name: ms}: the sides alternate `rounds` times; in each round a side is
    warmed up by `warmup` calls after a pause of `pause_s`, then timed over `runs`; it keeps its
    best round's median. A side whose fn is None is left out."""
    best = {}
    for _ in range(rounds):
        for name, fn in fns.items():
            if fn is None:
                continue
            time.sleep(pause_s)
            for _ in range(warmup):
                fn()
            ms = _median_of(fn, runs)
            best[name] = min(best.get(name, ms), ms)
    return best


def resident_mib():
    """This process's resident memory (VmRSS) in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")
