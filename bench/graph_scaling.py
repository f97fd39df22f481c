"""How printing and compiling grow with a graph's size, and what a compile holds at its peak.

Chains of N alternating neg/tanh nodes (N = 50k .. 400k), and graphs of nested `if`s at the
nesting limit: the time to print (`str(graph)`) and to compile, and the peak resident memory a
compile adds, each measured in a fresh process so one size's heap does not hide the next's.

    PYTHONPATH=build/default/python .venv/bin/python bench/graph_scaling.py
"""
import json
import resource
import subprocess
import sys
import time

SIZES = [50_000, 100_000, 200_000, 400_000]


def chain(n):
    import esgraph
    from esgraph import ops
    with esgraph.GraphBuilder("chain") as b:
        y = b.input("x", esgraph.f32, [4])
        for i in range(n):
            y = ops.tanh(y) if i % 2 else ops.neg(y)
    return b.build([y])


def nested(copies):
    """`copies` if-chains, each nested to the limit (64 deep)."""
    import esgraph
    from esgraph import ops
    with esgraph.GraphBuilder("nested") as b:
        p = b.input("p", esgraph.bool_, [])
        x = b.input("x", esgraph.f32, [4])

        def nest(d):
            return ops.exp(x) if d == 0 else ops.if_(p, lambda: nest(d - 1), lambda: -x)

        outs = [nest(64) for _ in range(copies)]
    return b.build(outs)


def measure(kind, size, what):
    import esgraph
    graph = chain(size) if kind == "chain" else nested(size)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if what == "print":
        text = str(graph)
    else:
        esgraph.compile(graph, threads=1, max_nodes=0)
    seconds = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
    print(json.dumps({"kind": kind, "size": size, "nodes": graph.node_count, "what": what, "seconds": seconds,
                      "peak_kib": peak_kib, "chars": len(text) if what == "print" else 0}))


def main():
    if len(sys.argv) == 4:
        return measure(sys.argv[1], int(sys.argv[2]), sys.argv[3])
    rows = []
    for kind, sizes in (("chain", SIZES), ("nested", [250, 500, 1000, 2000])):
        for size in sizes:
            for what in ("print", "compile"):
                out = subprocess.run([sys.executable, __file__, kind, str(size), what], check=True, capture_output=True, text=True)
                rows.append(json.loads(out.stdout))
    print("| graph | nodes | print | chars | compile | compile peak | per node |")
    print("|---|---|---|---|---|---|---|")
    for p, c in zip(rows[::2], rows[1::2]):
        label = f"chain of {p['size']:,}" if p["kind"] == "chain" else f"{p['size']:,} if-chains 64 deep"
        print(f"| {label} | {p['nodes']:,} | {p['seconds'] * 1e3:.0f} ms | {p['chars'] / 1e6:.1f} M | "
              f"{c['seconds'] * 1e3:.0f} ms | {c['peak_kib'] / 1024:.0f} MiB | {c['seconds'] / c['nodes'] * 1e6:.2f} us, "
              f"{c['peak_kib'] * 1024 / c['nodes']:.0f} B |")


if __name__ == "__main__":
    main()
