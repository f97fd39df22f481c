"""Compile once, load anywhere: the time from a fresh process's first call to the end of its
first run, per way of getting a runnable model, each side on `--threads` threads:

    onnx   esgraph.onnx.load + esgraph.compile + first run
    graph  esgraph.Graph.load (the graph file) + compile + first run
    esgm   esgraph.load_model (the compiled-model file) + first run
    cached esgraph.compile of the ONNX file with a compile cache (cache_dir): a miss in an empty
           cache (import, compile, store), then a hit in another process (a load) + first run
    ort    ONNX Runtime creating its session from the model it optimized offline
           (optimized_model_filepath, loaded with optimizations off) + first run

With --import-models (vit: torchvision's ViT-B/16), what an ONNX file costs before it runs:
esgraph.onnx.load + compile against ONNX Runtime's session creation (its optimizations on),
the time to a runnable model, then three runs each, and the peak resident memory of all of it.

Each figure is measured in a process of its own (imports done before the clock starts, the
page cache warm), the ways alternating round by round; each keeps its best round. Peak
resident memory (VmHWM) is each process's. Outputs of the loaded model are checked against
the compiled one first.

    PYTHONPATH=build/default/python .venv/bin/python bench/model_load.py [--rounds 5] [--models resnet34,encoder,decoder]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(kind, path, feeds_path, threads):
    """Runs in a fresh process: prints the seconds to a first run's end and the peak RSS."""
    import esgraph  # noqa: F401 - imported before the clock starts, as onnxruntime is
    feeds = list(np.load(feeds_path).values())
    if kind in ("ort", "session"):
        import onnxruntime
    if kind in ("onnx", "import"):
        import esgraph.onnx  # noqa: F401 - its imports (onnx, protobuf) before the clock too
    runs = 3 if kind in ("import", "session") else 1
    start = time.perf_counter()
    if kind in ("ort", "session"):
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        if kind == "ort":  # the model it optimized offline
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        loaded = time.perf_counter()
        for _ in range(runs):
            session.run(None, {i.name: a for i, a in zip(session.get_inputs(), feeds)})
    else:
        if kind == "esgm":
            model = esgraph.load_model(path, threads=threads)
        elif kind in ("miss", "hit"):
            model = esgraph.compile(path, threads=threads, cache_dir=os.environ["BENCH_CACHE_DIR"])
            assert model.stats()["cache_hits" if kind == "hit" else "cache_misses"] == 1
        else:
            graph = esgraph.Graph.load(path) if kind == "graph" else esgraph.onnx.load(path)
            model = esgraph.compile(graph, threads=threads)
        loaded = time.perf_counter()
        for _ in range(runs):
            model.run(feeds)
    end = time.perf_counter()
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:"))
    print(json.dumps({"total": end - start, "load": loaded - start, "peak_mib": peak}))


def holder(path, threads):
    """Runs in a fresh process: loads the model, runs it once, says so, and waits for stdin."""
    import esgraph
    model = esgraph.load_model(path, threads=threads)
    model.run([np.zeros(s, np.float32) for s in json.loads(sys.stdin.readline())])
    print("ready", flush=True)
    sys.stdin.readline()


def sharing(path, shapes, threads):
    """Two processes holding the same loaded model: each one's Rss and Pss (smaps_rollup), in MiB."""
    procs = [subprocess.Popen([sys.executable, __file__, "--hold", path, str(threads)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        p.stdin.write(json.dumps(shapes) + "\n")
        p.stdin.flush()
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    figures = []
    for p in procs:
        with open(f"/proc/{p.pid}/smaps_rollup") as f:
            kb = {line.split(":")[0]: int(line.split()[1]) for line in f if line.split(":")[0] in ("Rss", "Pss")}
        # The model file's own mapping: its pages, and this process's share of them.
        with open(f"/proc/{p.pid}/smaps") as f:
            lines = f.read().splitlines()
        at = next(i for i, line in enumerate(lines) if line.endswith(path))
        for line in lines[at + 1:at + 8]:
            key = line.split(":")[0]
            if key in ("Rss", "Pss"):
                kb["file " + key] = int(line.split()[1])
        figures.append({k: v / 1024 for k, v in kb.items()})
    for p in procs:
        p.stdin.write("\n")
        p.stdin.flush()
        p.wait()
    return figures


def build_models(names):
    import torch
    import torchvision
    torch.manual_seed(0)
    sys.path.insert(0, HERE)
    made = {}
    if "resnet34" in names:
        made["resnet34"] = (torchvision.models.resnet34().eval(), (torch.randn(1, 3, 224, 224),))
    if "encoder" in names:  # BERT-base-sized: 12 layers, hidden 768, 12 heads, sequence 128
        layer = torch.nn.TransformerEncoderLayer(768, 12, 3072, batch_first=True)
        encoder = torch.nn.TransformerEncoder(layer, 12, enable_nested_tensor=False).eval()
        with torch.no_grad():  # each layer its own weights (the layers start as copies of one)
            for p in encoder.parameters():
                p.normal_(0, 0.02)
        made["encoder"] = (encoder, (torch.randn(1, 128, 768),))
    if "decoder" in names:  # bench/decoder.py's step over a 64-token cache
        import decoder
        d = decoder
        made["decoder"] = (d.Decoder().eval(), (torch.randn(1, 1, d.WIDTH),
                                                 *(torch.randn(d.LAYERS, 1, d.HEADS, 64, d.WIDTH // d.HEADS) for _ in range(2))))
    return made


def prepare(name, module, inputs, folder, threads):
    """The model's four files and its inputs; checks the loaded model against the compiled one."""
    import torch
    import esgraph
    import esgraph.onnx
    import onnxruntime
    onnx_path = os.path.join(folder, f"{name}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, inputs, onnx_path, opset_version=14)
    graph = esgraph.onnx.load(onnx_path)
    graph_path = os.path.join(folder, f"{name}.esg")
    graph.save(graph_path)
    model = esgraph.compile(graph, threads=threads)
    esgm_path = os.path.join(folder, f"{name}.esgm")
    model.save(esgm_path)
    feeds = [t.numpy() for t in inputs]
    for got, want in zip(esgraph.load_model(esgm_path, threads=threads).run(feeds), model.run(feeds)):
        np.testing.assert_array_equal(got, want)
    feeds_path = os.path.join(folder, f"{name}.npz")
    np.savez(feeds_path, *feeds)
    ort_path = os.path.join(folder, f"{name}.ort.onnx")
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = ort_path
    onnxruntime.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    return {"onnx": onnx_path, "graph": graph_path, "esgm": esgm_path, "ort": ort_path}, feeds_path


def import_against_session(name, folder, rounds, threads):
    """ONNX import + compile against ORT's session creation, fresh processes alternating, each
    with three runs after: the best time to a runnable model, and the peak memory of that round."""
    import torch
    import torchvision
    torch.manual_seed(0)
    module, inputs = {"vit": (torchvision.models.vit_b_16, (torch.randn(1, 3, 224, 224),))}[name]
    onnx_path = os.path.join(folder, f"{name}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module().eval(), inputs, onnx_path, opset_version=17)
    feeds_path = os.path.join(folder, f"{name}.npz")
    np.savez(feeds_path, *[t.numpy() for t in inputs])
    best = {}
    for _ in range(rounds):
        for kind in ("import", "session"):
            m = measure(kind, onnx_path, feeds_path, threads)
            best.setdefault(kind, []).append(m)
    load = {k: min(m["load"] for m in ms) for k, ms in best.items()}
    peak = {k: min(m["peak_mib"] for m in ms) for k, ms in best.items()}
    print(f"{name}: {os.path.getsize(onnx_path) / 2**20:.0f} MiB of ONNX; esgraph import + compile {load['import']:.3f} s "
          f"against ORT's session {load['session']:.3f} s ({load['import'] / load['session']:.2f}x); peak resident memory through "
          f"three runs {peak['import']:.0f} MiB against {peak['session']:.0f} MiB ({peak['import'] / peak['session']:.2f}x); "
          f"every round's load times: esgraph " + ", ".join(f"{m['load']:.2f}" for m in best["import"]) +
          "; ORT " + ", ".join(f"{m['load']:.2f}" for m in best["session"]))


def measure(kind, path, feeds_path, threads, cache_dir=None):
    env = {**os.environ, "BENCH_CACHE_DIR": cache_dir} if cache_dir else None
    out = subprocess.run([sys.executable, __file__, "--worker", kind, path, feeds_path, str(threads)],
                         capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--models", default="resnet34,encoder,decoder")
    ap.add_argument("--import-models", default="", help="vit: ONNX import + compile against ORT's session creation")
    ap.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--hold", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.hold:
        return holder(args.hold[0], int(args.hold[1]))
    if args.worker:
        kind, path, feeds_path, threads = args.worker
        return worker(kind, path, feeds_path, int(threads))
    import onnxruntime
    print(f"{args.threads} threads on every side; onnxruntime {onnxruntime.__version__}; fresh processes, best of {args.rounds} rounds")
    kinds = ["onnx", "graph", "esgm", "ort"]
    with tempfile.TemporaryDirectory() as folder:
        for name in filter(None, args.import_models.split(",")):
            import_against_session(name, folder, args.rounds, args.threads)
        print(f"{'model':>9} " + " ".join(f"{k:>14}" for k in kinds) + "   esgm/onnx esgm/graph esgm/ort  (s to the first run's end; peak MiB)")
        for name, (module, inputs) in build_models(list(filter(None, args.models.split(",")))).items():
            paths, feeds_path = prepare(name, module, inputs, folder, args.threads)
            best = {}
            for _ in range(args.rounds):
                for kind in kinds:
                    m = measure(kind, paths[kind], feeds_path, args.threads)
                    if kind not in best or m["total"] < best[kind]["total"]:
                        best[kind] = m
                with tempfile.TemporaryDirectory() as cache:  # each round's miss in an empty cache, then its hit
                    for kind in ("miss", "hit"):
                        m = measure(kind, paths["onnx"], feeds_path, args.threads, cache)
                        if kind not in best or m["total"] < best[kind]["total"]:
                            best[kind] = m
            print(f"{'':>9} files: ONNX {os.path.getsize(paths['onnx']) / 2**20:.0f} MiB, graph {os.path.getsize(paths['graph']) / 2**20:.0f} MiB, "
                  f"esgm {os.path.getsize(paths['esgm']) / 2**20:.0f} MiB, ORT's {os.path.getsize(paths['ort']) / 2**20:.0f} MiB")
            cells = " ".join(f"{best[k]['total']:7.3f} ({best[k]['peak_mib']:4.0f})" for k in kinds)
            e = best["esgm"]["total"]
            print(f"{name:>9} {cells}   {e / best['onnx']['total']:9.2f} {e / best['graph']['total']:10.2f} "
                  f"{e / best['ort']['total']:8.2f}   (esgm load {best['esgm']['load']:.3f} s)")
            hit, miss = best["hit"]["load"], best["miss"]["load"]
            print(f"{'':>9} to a runnable model: ONNX import + compile {best['onnx']['load']:.3f} s, .esgm load "
                  f"{best['esgm']['load']:.3f} s; with a compile cache, a miss (import, compile, store) {miss:.3f} s, a hit in "
                  f"another process {hit:.3f} s: {hit / miss:.2f}x the miss, {hit / best['onnx']['load']:.2f}x an uncached import + "
                  f"compile (peak {best['hit']['peak_mib']:.0f} MiB)")
            shared = sharing(paths["esgm"], [list(t.shape) for t in inputs], args.threads)
            print(f"{'':>9} two processes holding the loaded model: " +
                  "; ".join(f"Rss {f['Rss']:.0f} MiB, Pss {f['Pss']:.0f} MiB, of which the .esgm mapping Rss {f['file Rss']:.0f}, "
                                                  f"Pss {f['file Pss']:.0f}" for f in shared))


if __name__ == "__main__":
    main()
