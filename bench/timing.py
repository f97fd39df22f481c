"""Timing shared by the comparison scripts in bench/: one warm-up call (it compiles plans and
touches memory), then the median of several timed calls."""
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
