"""The esgraph command line: compile, quantize, run, inspect and draw models.

    python3 -m esgraph compile model.onnx -o model.esgm [--bind N=8 | --bind N=1..64] [--backend cpu]
    python3 -m esgraph run  model.onnx [-i x=input.npy] [--bind N=8] [--repeat 20] [--max-memory 2G]
    python3 -m esgraph info model.onnx [-i x=input.npy] [--bind N=8]
    python3 -m esgraph dot  model.onnx [-o graph.dot] [--compiled] [-i x=input.npy]
    python3 -m esgraph quantize model.onnx -o model_int8.onnx -c x=batch0.npy -c x=batch1.npy
        [--method minmax|percentile|entropy] [--keep-float NAME] [--symmetric] [--per-tensor]
        [--weight-only 4 [--block-size 32]]
    python3 -m esgraph ascend-check [--simulated] [--cann-include DIR]
    python3 -m esgraph cann-headers [--cann-include DIR]

Models are ONNX files (.onnx), TensorFlow models (a frozen GraphDef, .pb, or a SavedModel
directory), PyTorch programs written by torch.export.save (.pt2; reading one needs PyTorch; its
symbolic dims keep their ranges, which --bind overrides), compiled-model files (as written by `compile` or Model.save,
recognized by their first bytes) or esgraph graph files (anything else, as written by
Graph.save). Symbolic dimensions are bound with --bind (run, info and dot --compiled bind the
ones left to 1, and say so); inputs not given with -i are random. A model whose graph depends on
its inputs' values (a shape read from an input) or sizes (Shape of a dynamic axis) runs, shows
and draws the graph of the inputs given: the inputs holding shapes must be given with -i.
A compiled model runs as it was compiled: no pass runs and no plan is made for the sizes it
holds plans for.
"""
import argparse
import collections
import functools
import os
import statistics
import sys
import time
import zipfile

import numpy as np

from . import _C


def _load(path, bind, given=None):
    """(graph, the ONNX model or None, the inputs the graph holds as constants). ONNX inputs'
    symbolic dimensions named in `bind` are fixed while importing, so shape computations on them
    (Shape -> Gather -> Reshape, as exporters write for a dynamic batch) fold. A binding of a size
    below 0, or of a symbol the model does not have, is refused rather than ignored. A model whose
    graph depends on its inputs' values or sizes gives the graph of the inputs the command runs on
    (`given` with -i, the rest as _inputs makes them), those values frozen into it."""
    for name, size in bind.items():
        if (size if isinstance(size, int) else size[0]) < 0:
            raise SystemExit(f"--bind {name}: a size is at least 0, got {size}")
    graph, model, frozen = _load_graph(path, bind, given)
    symbols = _symbols(_signature(graph))
    if model is not None:  # the symbols the import fixed
        symbols |= {d.dim_param for vi in model.graph.input for d in vi.type.tensor_type.shape.dim if d.dim_param}
    unknown = sorted(set(bind) - symbols)
    if unknown:
        have = ", ".join(sorted(symbols)) if symbols else "none"
        raise SystemExit(f"--bind {', '.join(unknown)}: {path} has no such symbolic dimension (its symbols: {have})")
    return graph, model, frozen


def _load_graph(path, bind, given):
    if path.endswith(".onnx"):
        from . import onnx as esg_onnx
        opened = esg_onnx.open_model(path)
        model = opened.proto
        shapes = {}
        for vi in model.graph.input:
            dims = vi.type.tensor_type.shape.dim
            if any(d.dim_param in bind for d in dims):
                shapes[vi.name] = [bind.get(d.dim_param, d.dim_param) if d.dim_param else d.dim_value for d in dims]
        graph = esg_onnx.load(opened, input_shapes=shapes)
        if isinstance(graph, esg_onnx.ValueDependentGraph):
            return _graph_for_the_inputs(path, graph, bind, given)
        return graph, model, set()
    if path.endswith(".pb") or os.path.isfile(os.path.join(path, "saved_model.pb")):
        from . import tensorflow as esg_tf
        return esg_tf.load(path), None, set()
    if path.endswith(".pt2"):
        return _exported_program(path)[0], None, set()
    return _C.Graph.load(path), None, set()


@functools.lru_cache(maxsize=None)
def _exported_program(path):
    """(graph, {symbol: (min, max)}) of a torch.export.save file. An AOTInductor package (a .pt2
    of compiled code for PyTorch's own runtime) holds no program to read: refused by name."""
    try:
        with zipfile.ZipFile(path) as z:
            if any("/data/aotinductor/" in f"/{name}" for name in z.namelist()):
                raise SystemExit(f"{path} is an AOTInductor package (code compiled by TorchInductor for PyTorch's runtime), "
                                 f"not a program: write the model with torch.export.save(torch.export.export(model, args), path)")
    except zipfile.BadZipFile:
        raise SystemExit(f"{path} is not a .pt2 file (a zip archive written by torch.export.save)") from None
    try:
        import torch
    except ImportError:
        raise SystemExit(f"reading {path} needs PyTorch (pip install torch): a .pt2 file is a pickled PyTorch program") from None
    from . import torch as esg_torch
    program = torch.export.load(path)
    return esg_torch.load(program, name=os.path.splitext(os.path.basename(path))[0]), esg_torch.symbol_ranges(program)


def _onnx_signature(model, names):
    """The ONNX model's inputs among `names` as (name, dtype name, dims), as _signature gives a graph's."""
    from .onnx._dtypes import esg_dtype
    signature = []
    for vi in model.graph.input:
        if vi.name in names:
            dims = [d.dim_param or (d.dim_value if d.HasField("dim_value") else f"{vi.name}_{i}")
                    for i, d in enumerate(vi.type.tensor_type.shape.dim)]
            signature.append((vi.name, esg_dtype(vi.type.tensor_type.elem_type).name, dims))
    return signature


def _graph_for_the_inputs(path, graph, bind, given):
    """The graph a value-dependent model (esgraph.onnx.ValueDependentGraph) takes for the inputs
    the command runs on. Its shape inputs' values fix that graph, so they must be given with -i;
    the other inputs are made as for any model (random, at their --bind sizes or 1)."""
    if graph.collections:
        raise SystemExit(f"{path}: input(s) {', '.join(sorted(graph.collections))} are sequences or optionals, which the "
                         "command line does not make; in Python, esgraph.compile(esgraph.onnx.load(...)) takes them as lists "
                         "of arrays")
    files = {g.partition("=")[0] for g in given or []}
    missing = [name for name in graph.shape_inputs if name not in files]
    if missing:
        raise SystemExit(f"{path}: the graph depends on the values of {', '.join(missing)}: give them with -i NAME=FILE.npy "
                         "(the command runs the graph those values make; in Python, esgraph.compile of the model reads "
                         "them at each run)")
    signature = _onnx_signature(graph.model, set(graph.input_names))
    values = _inputs(signature, given, _bound_or_one(signature, bind, given))
    concrete = graph.graph_for(values)
    frozen = set(graph.shape_inputs)
    fixed = [f"the values of {', '.join(sorted(frozen))}"] if frozen else []
    fixed += [f"the sizes {', '.join(f'{n}{list(values[n].shape)}' for n in graph.input_names)}"] if graph.by_shapes else []
    if fixed:  # (a model that only gives sequences depends on nothing)
        print(f"esgraph: {path}'s graph depends on its inputs; this is the graph for {' and '.join(fixed)}", file=sys.stderr)
    return concrete, graph.model, frozen


def _is_compiled_model(path):
    if os.path.isdir(path):  # a SavedModel
        return False
    with open(path, "rb") as f:
        return f.read(8) == b"ESGMODEL"


def _load_compiled(path, args):
    """A compiled-model file's model and the graph it was compiled from."""
    if getattr(args, "backend", None):
        raise SystemExit(f"--backend: {path} is a compiled model; it runs on the backend it was compiled for")
    model = _C.load_model(path, threads=getattr(args, "threads", 0))
    return model, model.graph()


def _bindings(pairs, ranges=False):
    """{name: size}, or with `ranges` also {name: (min, max)} for NAME=MIN..MAX."""
    out = {}
    for pair in pairs or []:
        name, _, value = pair.partition("=")
        low, dots, high = value.partition("..")
        if ranges and dots and low.isdigit() and high.isdigit():
            out[name] = (int(low), int(high))
        elif value.lstrip("-").isdigit():
            out[name] = int(value)
        else:
            raise SystemExit(f"--bind expects NAME=SIZE{' or NAME=MIN..MAX' if ranges else ''}, got '{pair}'")
    return out


def _signature(graph):
    """The graph's inputs as (name, dtype name, dims), symbolic dims as their names."""
    info = graph.inspect()
    return [(info["values"][v]["name"], info["values"][v]["dtype"].name, list(info["values"][v]["shape"]))
            for v in info["inputs"]]


def _compile(graph, bind, **options):
    """Compiles with the bindings of the symbols the graph still has (an ONNX import may have
    fixed the others already)."""
    symbols = _symbols(_signature(graph))
    return _C.compile(graph, shapes={k: v for k, v in bind.items() if k in symbols}, **options)


def _byte_count(text, option):
    """A byte count written as 4096, 512K, 64M or 2G (powers of 1024); 0 when not given."""
    if not text:
        return 0
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    digits, unit = (text[:-1], units[text[-1].upper()]) if text[-1:].upper() in units else (text, 1)
    if not digits.isdigit():
        raise SystemExit(f"{option} expects a byte count such as 4096, 512M or 2G, got '{text}'")
    return int(digits) * unit


def _symbols(signature):
    """The symbolic dimensions of inputs given as (name, dtype, dims)."""
    return {d for _, _, dims in signature for d in dims if isinstance(d, str)}


def _bound_or_one(signature, bind, given=None):
    """`bind`, with every symbol the command line would have to make up a size for (one of an
    input of `signature` not given with -i) and --bind leaves unbound set to 1, as ONNX Runtime
    users expect; stderr says which."""
    files = {g.partition("=")[0] for g in given or []}
    made_up = _symbols(i for i in signature if i[0] not in files) - _symbols(i for i in signature if i[0] in files)
    unbound = sorted(made_up - set(bind))
    if unbound:
        print(f"esgraph: {', '.join(unbound)} bound to 1 (not given; --bind NAME=SIZE sets {'them' if len(unbound) > 1 else 'it'})",
              file=sys.stderr)
    return {**bind, **{d: 1 for d in unbound}}


def _inputs(signature, given, bind, frozen=(), flag="-i"):
    """The arrays of the inputs of `signature`: those given with -i read, the rest random at
    their sizes. Inputs in `frozen` (a value-dependent model's, held by its graph) are skipped.
    `flag` is the option that gave the files, for messages."""
    arrays = {}
    files, seen = {}, set()
    for g in given or []:
        name, sep, path = g.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"{flag} expects NAME=FILE.npy, got '{g}'")
        if name in seen:
            raise SystemExit(f"{flag} {name}: given twice")
        seen.add(name)
        if os.path.isdir(path):
            raise SystemExit(f"{flag} {name}: {path} is a folder; give a .npy file")
        if not os.path.isfile(path):
            raise SystemExit(f"{flag} {name}: no such file: {path}")
        if name not in frozen:
            files[name] = path
    rng = np.random.default_rng(0)
    for name, dtype, dims in signature:
        if name in files:
            path = files.pop(name)
            with open(path, "rb") as f:  # numpy reads what lacks the header as a pickle, and says so
                head = f.read(6)
            if head.startswith(b"PK\x03\x04"):
                raise SystemExit(f"{flag} {name}: {path} holds several arrays (.npz); give one .npy file")
            if head != b"\x93NUMPY":
                raise SystemExit(f"{flag} {name}: {path} is not a .npy file (it does not start with numpy's header)")
            try:  # no pickles: a .npy file holds an array and nothing else
                arrays[name] = np.load(path, allow_pickle=False)
            except (ValueError, OSError, EOFError) as e:
                raise SystemExit(f"{flag} {name}: {path} is not a .npy file numpy can read ({type(e).__name__}: {e})") from None
            want = np.dtype(getattr(_C, dtype).numpy)
            if arrays[name].dtype != want:  # the command converts nothing: the file is the input
                how = ("as bf16's bit patterns in uint16 (the upper halves of float32s: (array.astype(numpy.float32).view("
                       "numpy.uint32) >> 16).astype(numpy.uint16))" if dtype == "bf16" else f"as {want} (numpy: array.astype(numpy.{want}))")
                raise SystemExit(f"{flag} {name}: {path} holds {arrays[name].dtype}, the model's `{name}` is {dtype}: save it {how}")
            continue
        shape = []
        for d in dims:
            if isinstance(d, str) and d not in bind:
                raise SystemExit(f"input '{name}' has the symbolic dimension '{d}': give --bind {d}=SIZE or -i {name}=FILE.npy")
            shape.append(bind[d] if isinstance(d, str) else d)
        if dtype.startswith("f"):
            arrays[name] = rng.standard_normal(shape).astype(np.float16 if dtype == "f16" else
                                                            np.float64 if dtype == "f64" else np.float32)
        elif dtype == "bool":
            arrays[name] = rng.random(shape) < 0.5
        elif dtype == "bf16":  # bit patterns: the upper halves of random f32s
            arrays[name] = (rng.standard_normal(shape).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        else:
            arrays[name] = rng.integers(0, 4, shape).astype(getattr(_C, dtype).numpy)
    if files:
        raise SystemExit(f"the model has no input named {', '.join(files)}")
    return arrays


def cmd_compile(args):
    """Compiles once to a compiled-model file. A ranged symbol's plan is made here (by a run at
    the range's largest sizes) so that the file holds it; an unbound symbol's size classes are
    planned where the model runs."""
    if _is_compiled_model(args.model):
        raise SystemExit(f"{args.model} is compiled already; compile its source model")
    shapes = _bindings(args.bind, ranges=True)
    if args.model.endswith(".pt2"):  # the program's own ranges, where --bind says nothing
        shapes = {**_exported_program(args.model)[1], **shapes}
    fixed = {k: v for k, v in shapes.items() if isinstance(v, int)}
    graph, _, _ = _load(args.model, fixed)
    symbols = _symbols(_signature(graph))
    ranged = sorted(k for k, v in shapes.items() if isinstance(v, tuple) and k not in symbols)
    if ranged:
        raise SystemExit(f"--bind {', '.join(ranged)}: {args.model} has no such symbolic dimension "
                         f"(its symbols: {', '.join(sorted(symbols)) or 'none'})")
    options = dict(backend=args.backend or "cpu", precision=args.precision, streams=args.streams,
                   backend_options=_bindings(args.backend_option))
    start = time.perf_counter()
    model = _C.compile(graph, shapes={k: v for k, v in shapes.items() if k in symbols}, **options)
    largest = {k: (v[1] if isinstance(v, tuple) else v) for k, v in shapes.items()}
    if any(isinstance(v, tuple) for v in shapes.values()) and not symbols - set(largest):
        model.run(_inputs(_signature(graph), None, largest))
    compile_ms = (time.perf_counter() - start) * 1e3
    model.save(args.output)
    print(f"{args.output}: {os.path.getsize(args.output)} bytes, compiled in {compile_ms:.1f} ms "
          f"for {options['backend']}; load it with esgraph.load_model or run it with `python3 -m esgraph run`")
    return 0


def _calibration(signature, given):
    """The calibration batches of -c NAME=FILE.npy: the k-th file of each input is batch k's."""
    files = collections.defaultdict(list)
    for g in given or []:
        name, sep, path = g.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"-c expects NAME=FILE.npy, got '{g}'")
        files[name].append(path)
    names = [name for name, _, _ in signature]
    unknown = sorted(set(files) - set(names))
    if unknown:
        raise SystemExit(f"-c {', '.join(unknown)}: the model has no such input (its inputs: {', '.join(names)})")
    missing = [name for name in names if name not in files]
    if missing:
        raise SystemExit(f"calibration needs a batch of every input: give -c {missing[0]}=FILE.npy (one a batch)")
    counts = {name: len(files[name]) for name in names}
    if len(set(counts.values())) > 1:
        raise SystemExit("every input needs as many calibration batches: " + ", ".join(f"{n} {c}" for n, c in counts.items()))
    batches = []
    for k in range(counts[names[0]]):
        arrays = _inputs(signature, [f"{n}={files[n][k]}" for n in names], {}, flag="-c")
        batches.append([arrays[n] for n in names])
    return batches


def cmd_quantize(args):
    """Post-training int8 quantization (esgraph.quantize) calibrated on the batches given; writes
    an ONNX QDQ file (.onnx) or an esgraph graph file, and prints each quantized op's error."""
    if _is_compiled_model(args.model):
        raise SystemExit(f"{args.model} is compiled already; quantize its source model")
    graph, _, _ = _load(args.model, _bindings(args.bind))
    if not isinstance(graph, _C.Graph):
        raise SystemExit(f"{args.model}: its graph depends on its inputs' values; fix its shapes with --bind first")
    batches = _calibration(_signature(graph), args.calibration) if args.calibration or not args.weight_only else []
    start = time.perf_counter()
    q = _C.quantize(graph, batches, method=args.method, percentile=args.percentile, per_channel=not args.per_tensor,
                    symmetric=args.symmetric, keep_float=args.keep_float or [], threads=args.threads,
                    weight_only=bool(args.weight_only), bits=args.weight_only or 4, block_size=args.block_size)
    seconds = time.perf_counter() - start
    if args.output.endswith(".onnx"):
        from . import onnx as esg_onnx
        esg_onnx.save(q.graph, args.output)
    else:
        q.graph.save(args.output)
    how = f"{args.weight_only}-bit weights" if args.weight_only else args.method
    print(f"{args.output}: {len(q.layers)} ops quantized in {seconds:.1f} s ({how}, {len(batches)} batches)")
    print(f"  {'result':24} {'op':8} {'scale':>10} {'zero':>5} {'range':>22} {'max error':>10} {'SQNR dB':>8}")
    for layer in q.layers:
        scale = f"{layer.scale:10.4g}" if layer.quantized_result else f"{'f32':>10}"
        zero = f"{layer.zero_point:5}" if layer.quantized_result else f"{'':5}"
        span = f"[{layer.min:.3g}, {layer.max:.3g}]"
        print(f"  {layer.name:24} {layer.op:8} {scale} {zero} {span:>22} {layer.max_error:10.3g} {layer.sqnr_db:8.1f}")
    return 0


def cmd_run(args):
    bind = _bindings(args.bind)
    start = time.perf_counter()
    frozen = set()
    if _is_compiled_model(args.model):
        model, graph = _load_compiled(args.model, args)
    else:
        graph, _, frozen = _load(args.model, bind, args.input)
        bind = _bound_or_one(_signature(graph), bind, args.input)
        model = _compile(graph, bind, threads=args.threads, backend=args.backend or "cpu",
                         max_memory_bytes=_byte_count(args.max_memory, "--max-memory"))
    compile_ms = (time.perf_counter() - start) * 1e3
    inputs = _inputs(_signature(graph), args.input, bind, frozen)
    outputs = model.run(inputs)
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        model.run(inputs)
        times.append((time.perf_counter() - start) * 1e3)
    for name, value in zip(model.output_names, outputs):
        print(f"{name}: {value.dtype}{list(value.shape)}")
        print(np.array2string(value, threshold=args.show, edgeitems=3, precision=5))
    verb = "load" if _is_compiled_model(args.model) else "compile"
    print(f"{verb} {compile_ms:.1f} ms; run median {statistics.median(times):.3f} ms over {args.repeat} run(s)"
          if times else f"{verb} {compile_ms:.1f} ms")
    return 0


def cmd_info(args):
    if _is_compiled_model(args.model):
        model, graph = _load_compiled(args.model, args)
        print(f"compiled model: {args.model}")
        for name, dtype, dims in _signature(graph):
            print(f"  input  {name}: {dtype}[{', '.join(map(str, dims))}]")
        print(f"esgraph nodes: {graph.node_count}")
        print(model.report())
        return 0
    graph, onnx_model, _ = _load(args.model, _bindings(args.bind), args.input)
    print(f"model: {args.model}")
    for name, dtype, dims in _signature(graph):
        print(f"  input  {name}: {dtype}[{', '.join(map(str, dims))}]")
    if onnx_model is not None:
        for vi in onnx_model.graph.output:
            print(f"  output {vi.name}")
        counts = collections.Counter(n.op_type for n in onnx_model.graph.node)
        print(f"ONNX ops ({sum(counts.values())} nodes): " + ", ".join(f"{op} {n}" for op, n in counts.most_common()))
    print(f"esgraph nodes: {graph.node_count}")
    bind = _bound_or_one(_signature(graph), _bindings(args.bind))
    print(_compile(graph, bind, backend=args.backend or "cpu").report())
    return 0


def cmd_dot(args):
    bind = _bindings(args.bind)
    if _is_compiled_model(args.model):
        model, graph = _load_compiled(args.model, args)
        text = model.to_dot() if args.compiled else graph.to_dot()
        return _write(text, args.output)
    graph, _, _ = _load(args.model, bind, args.input)
    return _write(_compile(graph, _bound_or_one(_signature(graph), bind)).to_dot() if args.compiled else graph.to_dot(), args.output)


def _write(text, path):
    if path:
        with open(path, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


def _header_check(include, required):
    """The CANN header check's table on stdout (esgraph/cann_headers.py): True when it found no
    difference or could not run and was not `required` to (then it says why on stderr)."""
    from . import cann_headers
    try:
        check = cann_headers.check(include)
    except cann_headers.CannHeadersError as e:
        print(f"esgraph: the CANN header check {'cannot run' if required else 'did not run'}: {e}", file=sys.stderr)
        return not required
    sys.stdout.write(check.table())
    sys.stdout.flush()
    return check.passed


def cmd_cann_headers(args):
    """esgraph's declarations of CANN against CANN's headers: 0 when they agree, 1 when something
    differs, 2 when the check cannot run."""
    from . import cann_headers
    try:
        check = cann_headers.check(args.cann_include)
    except cann_headers.CannHeadersError as e:
        print(f"esgraph cann-headers: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(check.table())
    return 0 if check.passed else 1


def cmd_ascend_check(args):
    """The smoke set on the device (docs/ascend.md): 0 when every case matches the CPU, 1 when
    one does not or CANN's headers differ from esgraph's declarations, 2 when the device cannot
    start (the message names what is missing), 3 when every case that ran matched and the others
    were refused by name (what this CANN or device cannot run: a CANN before 8.3 runs the aclnn
    cases and refuses the generated kernels). CANN's headers are checked first, before anything
    runs: those given with --cann-include, else an installation's ($ASCEND_HOME_PATH/include)."""
    backend = "ascend-sim" if args.simulated else "ascend"
    include = args.cann_include
    if include is None and not args.simulated and os.environ.get("ASCEND_HOME_PATH"):
        include = os.path.join(os.environ["ASCEND_HOME_PATH"], "include")
    headers_agree = include is None or _header_check(include, required=args.cann_include is not None)
    try:
        check = _C.ascend_check(backend)
    except _C.BackendError as e:
        print(f"esgraph ascend-check: the {backend} backend cannot start: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(check["table"])
    if not headers_agree:
        return 1
    return 0 if check["passed"] else 3 if check["partial"] else 1


def main(argv=None):
    parser = argparse.ArgumentParser(prog="esgraph", description="Compile, quantize, run, inspect and draw models with esgraph.")
    sub = parser.add_subparsers(dest="command", required=True)
    comp = sub.add_parser("compile", help="compile once to a compiled-model file, which run, info, dot and esgraph.load_model load")
    comp.add_argument("-o", "--output", required=True, help="the compiled-model file to write (.esgm)")
    comp.add_argument("--precision", default="f32", choices=["f32", "bf16"], help="convolutions' and products' multiplications")
    comp.add_argument("--streams", type=int, default=1, help="streams for independent branches (default 1)")
    comp.add_argument("--backend-option", action="append", metavar="NAME=VALUE", help="an option of the backend (docs/backends.md)")
    run = sub.add_parser("run", help="compile and run a model; print its outputs and timing")
    run.add_argument("--repeat", type=int, default=10, help="timed runs after the first (default 10)")
    run.add_argument("--threads", type=int, default=0, help="threads (0: every core)")
    run.add_argument("--show", type=int, default=20, help="print arrays up to this many elements in full")
    run.add_argument("--max-memory", metavar="BYTES",
                     help="refuse a model whose run would need more memory than this (4096, 512M, 2G; default: no limit)")
    info = sub.add_parser("info", help="inputs, outputs, ops and the memory plan")
    dot = sub.add_parser("dot", help="the graph as Graphviz DOT")
    dot.add_argument("-o", "--output", help="write here instead of stdout")
    dot.add_argument("--compiled", action="store_true", help="the compiled launch list (fused kernels)")
    quant = sub.add_parser("quantize", help="quantize to int8 from calibration batches (esgraph.quantize); print each op's error")
    quant.add_argument("-o", "--output", required=True, help="the quantized model: an ONNX QDQ file (.onnx), else an esgraph graph file")
    quant.add_argument("-c", "--calibration", action="append", metavar="NAME=FILE.npy",
                       help="a calibration batch of input NAME (repeat: the k-th file of each input is batch k's)")
    quant.add_argument("--method", default="minmax", choices=["minmax", "percentile", "entropy"], help="calibration (default minmax)")
    quant.add_argument("--percentile", type=float, default=99.99, help="percentile's share of values inside the range")
    quant.add_argument("--keep-float", action="append", metavar="NAME", help="a node, result or op name left in f32")
    quant.add_argument("--symmetric", action="store_true", help="activations as i8 around 0 (default u8 with a zero point)")
    quant.add_argument("--per-tensor", action="store_true", help="one scale per weight tensor (default one per output channel)")
    quant.add_argument("--threads", type=int, default=0, help="threads of the calibration runs (0: every core)")
    quant.add_argument("--weight-only", type=int, choices=[2, 4, 8], metavar="BITS",
                       help="weight-only instead: products' weights as 2, 4 or 8-bit codes (calibration then optional)")
    quant.add_argument("--block-size", type=int, default=32, help="--weight-only's blocks along K (default 32)")
    check = sub.add_parser("ascend-check", help="run the Ascend smoke set on the device against the CPU; print the table")
    check.add_argument("--simulated", action="store_true", help="on esgraph's simulated device (backend ascend-sim)")
    headers = sub.add_parser("cann-headers", help="check esgraph's declarations of CANN against CANN's headers")
    for p in (check, headers):
        p.add_argument("--cann-include", metavar="DIR",
                       help="a folder of CANN's headers (default: $ASCEND_HOME_PATH/include)")
    for p in (run, info, dot):
        p.add_argument("-i", "--input", action="append", metavar="NAME=FILE.npy",
                       help="an input from a .npy file" + ("" if p is run else
                                                           " (a model whose graph depends on its inputs' values takes the graph of these)"))
    for p in (comp, run, info, dot, quant):
        p.add_argument("model", help="an .onnx file, a TensorFlow frozen GraphDef (.pb) or SavedModel directory, a torch.export program (.pt2), a compiled-model file or an esgraph graph file")
        p.add_argument("--bind", action="append", metavar="SYMBOL=SIZE" + ("|MIN..MAX" if p is comp else ""),
                       help="a size for a symbolic dimension" + (", or the range of sizes its plan serves" if p is comp else ""))
        if p not in (dot, quant):
            p.add_argument("--backend", choices=_C.backends(),
                           help="where to compile for (default cpu; ascend-sim: the simulated Ascend device)")
    args = parser.parse_args(argv)
    if args.command == "ascend-check":
        return cmd_ascend_check(args)
    if args.command == "cann-headers":
        return cmd_cann_headers(args)
    if not os.path.exists(args.model):
        parser.error(f"no such file: {args.model}")
    try:
        return {"compile": cmd_compile, "run": cmd_run, "info": cmd_info, "dot": cmd_dot, "quantize": cmd_quantize}[args.command](args)
    except _C.Error as e:
        print(f"esgraph: {e}", file=sys.stderr)
        return 1
    except MemoryError:  # an allocation the machine refused: no traceback, and what to do instead
        print(f"esgraph: out of memory running {args.model}" +
              (" (--max-memory BYTES refuses such a model before it allocates)" if args.command == "run" else ""), file=sys.stderr)
        return 1
