"""Timing shared by the comparison scripts in bench/: one warm-up call (it compiles plans and
touches memory), then the median of several timed calls; and the process's resident memory."""
import statistics
import time


def median_ms(fn, runs):
    """Median wall time of fn() in milliseconds over `runs` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def resident_mib():
    """This process's resident memory (VmRSS) in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")
