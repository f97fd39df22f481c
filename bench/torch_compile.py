"""torch.compile(model, backend="esgraph") against eager PyTorch and TorchInductor, side by side
in one process (issue 49).

    PYTHONPATH=build/default/python .venv/bin/python bench/torch_compile.py [--models a,b] [--batches 1,8]

Every side runs under torch.no_grad() on the same inputs, PyTorch with torch.set_num_threads(T)
and esgraph on T threads (T: every core, esgraph's default). Inductor runs in its best CPU
inference setting: torch._inductor.config.freezing = True. Outputs are checked against eager
first (1e-4 of the largest magnitude; detections are not in this table). Steady state: the sides
alternate rounds, each keeps its best round's median (timing.side_by_side).

Compile time, both caches cold (a fresh TORCHINDUCTOR_CACHE_DIR, no esgraph cache): the time of
the first call of each side (Dynamo's tracing is in both), and the backend's own share of it
(inside the backend calls, aot_autograd's lowering among them, plus its graphs' first calls:
converting, compiling, planning and running).
"""
import argparse
import atexit
import gc
import os
import shutil
import sys
import tempfile
import time
import warnings

if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:  # cold, and gone afterwards (Inductor writes ~0.5 GB a run)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-cold-")
    atexit.register(shutil.rmtree, os.environ["TORCHINDUCTOR_CACHE_DIR"], ignore_errors=True)

import torch  # noqa: E402
import torchvision  # noqa: E402

import esgraph.torch as esg_torch  # noqa: E402
from timing import side_by_side  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python", "torch_frontend"))
from torch_models import hugging_face, main_output  # noqa: E402  the models the tests check

THREADS = os.cpu_count()


# Hidden 512, 4 layers, 8 heads; 128 tokens or 224x224 images.
SMALL = dict(hidden=512, layers=4, heads=8, vocabulary=8000, image=224)
MODELS = {
    "resnet18": (lambda: torchvision.models.resnet18(), "image"),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(), "image"),
    "efficientnet_b0": (lambda: torchvision.models.efficientnet_b0(), "image"),
    "deeplabv3_mobilenet_v3": (lambda: torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None, aux_loss=False), "image"),
    "bert": (lambda: hugging_face("bert", **SMALL), "tokens"),
    "gpt2": (lambda: hugging_face("gpt2", **SMALL), "tokens"),
    "llama": (lambda: hugging_face("llama", **SMALL), "tokens"),
    "vit": (lambda: hugging_face("vit", **SMALL), "image"),
}


def inputs_for(kind, batch):
    return torch.randn(batch, 3, 224, 224) if kind == "image" else torch.randint(0, 8000, (batch, 128))


class BackendClock:
    """The esgraph backend's own time: inside its calls from Dynamo (aot_autograd's lowering
    among it), and the first call of each graph it compiled (converting, compiling, planning
    and running it)."""

    def __init__(self):
        self.in_calls = 0.0

    def backend(self, gm, example_inputs, **kwargs):
        t0 = time.perf_counter()
        try:
            return esg_torch.esgraph_backend(gm, example_inputs, **kwargs)
        finally:
            self.in_calls += time.perf_counter() - t0

    @property
    def seconds(self):
        return self.in_calls + sum(fn.build_seconds for fn in esg_torch.compiled_functions())


def first_call(fn, x):
    t0 = time.perf_counter()
    with torch.no_grad():
        out = fn(x)
    return out, time.perf_counter() - t0


def measure(name, batch, rounds, runs):
    make, kind = MODELS[name]
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make().eval()
    x = inputs_for(kind, batch)
    with torch.no_grad():
        want = main_output(model(x))
    scale = want.abs().max().item()

    torch._dynamo.reset()
    gc.collect()  # the clock sums the compiled graphs still alive: this model's only
    clock = BackendClock()
    esg = torch.compile(model, backend=clock.backend)
    out, esg_first = first_call(esg, x)
    esg_err = (main_output(out) - want).abs().max().item() / scale

    torch._dynamo.reset()
    torch._inductor.config.freezing = True
    inductor = torch.compile(model)
    out, ind_first = first_call(inductor, x)
    ind_err = (main_output(out) - want).abs().max().item() / scale

    def run(fn):
        def once():
            with torch.no_grad():
                fn(x)
        return once
    ms = side_by_side({"eager": run(model), "inductor": run(inductor), "esgraph": run(esg)}, rounds=rounds, runs=runs)
    return dict(esgraph=ms["esgraph"], eager=ms["eager"], inductor=ms["inductor"], esg_err=esg_err, ind_err=ind_err,
                esg_first=esg_first, ind_first=ind_first, backend=clock.seconds, in_calls=clock.in_calls)


def generation(tokens, rounds):
    """GPT-2's own generation (transformers' DynamicCache, which grows a token a step) compiled with
    dynamic=True and fallback="eager" (position ids and masks are sizes as values, which esgraph
    leaves to PyTorch): the best round's mean ms a token against eager's, and how many of the
    tokens are eager's."""
    model = hugging_face("gpt2", **SMALL)

    def step(ids, past):
        out = model(input_ids=ids, past_key_values=past, use_cache=True)
        return out.logits[:, -1], out.past_key_values

    def generate(fn):
        ids, past, out = torch.arange(1, 33).reshape(1, 32), None, []
        with torch.no_grad():
            logits, past = fn(ids, past)  # the prompt
            t0 = time.perf_counter()
            for _ in range(tokens):
                ids = logits.argmax(-1, keepdim=True)
                out.append(int(ids))
                logits, past = fn(ids, past)
        return out, (time.perf_counter() - t0) * 1e3 / tokens

    torch._dynamo.reset()
    fast = torch.compile(step, backend="esgraph", dynamic=True, options={"fallback": "eager"})
    want, _ = generate(step)
    got, _ = generate(fast)  # compiles for the lengths Dynamo specializes, then one graph serves
    best = {"same tokens": sum(a == b for a, b in zip(got, want))}
    for _ in range(rounds):
        for name, fn in (("eager", step), ("esgraph", fast)):
            time.sleep(0.3)
            best[name] = min(best.get(name, float("inf")), generate(fn)[1])  # each round's mean a token
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--batches", default="1,8")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--tokens", type=int, default=64, help="tokens a generation round makes (0: no generation row)")
    args = p.parse_args()
    torch.set_num_threads(THREADS)
    print(f"torch {torch.__version__}, {THREADS} threads each; Inductor with freezing; best round's median of {args.runs} "
          f"runs over {args.rounds} alternating rounds")
    print("| model | batch | esgraph ms | eager ms | Inductor ms | / eager | / Inductor | error (esgraph, Inductor) "
          "| first call s (esgraph, Inductor) | esgraph backend s (in its calls: aot_autograd) | backend / Inductor's first call |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            r = measure(name, batch, args.rounds, args.runs)
            print(f"| {name} | {batch} | {r['esgraph']:.2f} | {r['eager']:.2f} | {r['inductor']:.2f} | "
                  f"{r['esgraph'] / r['eager']:.2f} | {r['esgraph'] / r['inductor']:.2f} | {r['esg_err']:.1e}, {r['ind_err']:.1e} | "
                  f"{r['esg_first']:.2f}, {r['ind_first']:.1f} | {r['backend']:.2f} ({r['in_calls']:.2f}) | {r['backend'] / r['ind_first']:.3f} |",
                  flush=True)
    if args.tokens:
        ms = generation(args.tokens, args.rounds)
        print(f"\nGPT-2 generation ({args.tokens} tokens after a 32-token prompt, dynamic=True, fallback='eager'): "
              f"esgraph {ms['esgraph']:.2f} ms a token, eager {ms['eager']:.2f}, ratio {ms['esgraph'] / ms['eager']:.2f}; "
              f"{ms['same tokens']} of {args.tokens} tokens as eager's")


if __name__ == "__main__":
    main()
