"""Models people run, through torch.compile(backend="esgraph") and torch.export, against eager
PyTorch: torchvision's classification, segmentation and detection models and Hugging Face
transformers built from small configs with random weights (nothing is downloaded), and a
decoder whose KV cache grows every step. Outputs match to 1e-4 of their largest magnitude;
detections match as sets (IoU >= 0.99, the same labels)."""
import gc
import logging
import warnings

import pytest
import torch
import torch.nn as nn
import torchvision

import esgraph
import esgraph.torch as esg_torch
from torch_models import hugging_face, main_output


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch.manual_seed(0)
    torch._dynamo.reset()
    torch._logging.set_logs(dynamo=logging.ERROR)  # graph-break notices of the detection model
    yield
    torch._dynamo.reset()
    gc.collect()  # compiled_functions() lists only what is still in use


def assert_close(got, want, rtol=1e-4):
    got, want = main_output(got), main_output(want)
    assert got.shape == want.shape
    assert (got - want).abs().max().item() <= rtol * want.abs().max().item()


def compiled(model, *inputs, **options):
    fast = torch.compile(model, backend="esgraph", options=options or None)
    with torch.no_grad():
        return fast(*inputs), model(*inputs)


VISION = {
    "resnet18": lambda: torchvision.models.resnet18(),
    "mobilenet_v3_small": lambda: torchvision.models.mobilenet_v3_small(),
    "efficientnet_b0": lambda: torchvision.models.efficientnet_b0(),
    "deeplabv3_mobilenet_v3": lambda: torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None, aux_loss=False),
    "lraspp_mobilenet_v3": lambda: torchvision.models.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None),
}


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("name", VISION)
def test_torchvision_classification_and_segmentation(name, batch):
    model = VISION[name]().eval()
    got, want = compiled(model, torch.randn(batch, 3, 64, 64))
    assert_close(got, want)


def test_torchvision_model_through_torch_export():
    model = torchvision.models.resnet18().eval()
    x = torch.randn(2, 3, 64, 64)
    batch = torch.export.Dim("batch", min=1, max=16)
    program = torch.export.export(model, (x,), dynamic_shapes=({0: batch},))
    ranges = esg_torch.symbol_ranges(program)
    assert list(ranges.values()) == [(1, 16)]
    compiled_model = esgraph.compile(esg_torch.load(program), shapes=ranges)
    for n in (1, 5):
        x = torch.randn(n, 3, 64, 64)
        with torch.no_grad():
            assert_close(torch.from_numpy(compiled_model(x.numpy())), model(x))


def test_torchvision_detection_matches_as_sets():
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, box_score_thresh=0.0, detections_per_img=300).eval()
    # torchvision's own initialization leaves this untrained network's features alike, so that
    # every box scores the same and which are kept is a matter of ties; He-normal weights give
    # the boxes scores of their own.
    for layer in model.modules():
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            nn.init.normal_(layer.weight, std=(2.0 / layer.weight[0].numel()) ** 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (got,), (want,) = compiled(model, [torch.rand(3, 128, 128)])
    assert len(torch.unique(want["scores"])) == len(want["scores"]) > 0
    assert len(got["boxes"]) == len(want["boxes"])
    # Each box of one side has a box of the same label at IoU >= 0.99 on the other.
    matches = (torchvision.ops.box_iou(got["boxes"], want["boxes"]) >= 0.99) & (got["labels"][:, None] == want["labels"][None, :])
    assert matches.any(1).all() and matches.any(0).all()
    reached = set().union(*(ops_of(f.gm) for f in esg_torch.compiled_functions()))
    assert "torchvision.roi_align.default" in reached


def ops_of(gm):
    from esgraph.torch._aten.registry import overload_name
    return {overload_name(n.target) for n in gm.graph.nodes if n.op == "call_function"}


def test_torchvision_nms():
    boxes = torch.rand(40, 4) * 50
    boxes[:, 2:] += boxes[:, :2] + 1
    scores = torch.rand(40)
    got, want = compiled(lambda b, s: torchvision.ops.nms(b, s, 0.3), boxes, scores)
    assert torch.equal(got, want)


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "vit"])
def test_hugging_face_models(name, batch):
    pytest.importorskip("transformers")
    model = hugging_face(name)
    inputs = torch.randn(batch, 3, 64, 64) if name == "vit" else torch.randint(0, 1000, (batch, 16))
    got, want = compiled(model, inputs)
    assert_close(got, want)


class CachedDecoder(nn.Module):
    """One decoder layer's step: the new token's q, k and v, its k and v appended to the cache
    (which grows every step), attention over the whole cache."""

    def __init__(self, width=64, heads=4):
        super().__init__()
        self.heads, self.qkv, self.out = heads, nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x, past_k, past_v):
        n, t, width = x.shape
        q, k, v = (y.view(n, t, self.heads, -1).transpose(1, 2) for y in self.qkv(x).chunk(3, -1))
        k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        x = x + self.out(y.transpose(1, 2).reshape(n, t, width))
        return x + self.mlp(x), k, v


def decode(backend, steps=12):
    """`steps` tokens through CachedDecoder compiled with dynamic=True, each checked against
    eager PyTorch; the graphs Dynamo handed the backend."""
    graphs = []

    def counting(gm, example_inputs, **kwargs):
        graphs.append(gm)
        return torch._dynamo.lookup_backend(backend)(gm, example_inputs, **kwargs)

    torch._dynamo.reset()
    torch.manual_seed(0)
    decoder = CachedDecoder().eval()
    fast = torch.compile(decoder, backend=counting, dynamic=True)
    x = torch.randn(1, 1, 64)
    k = v = ek = ev = torch.zeros(1, 4, 0, 16)
    with torch.no_grad():
        for _ in range(steps):
            got, k, v = fast(x, k, v)
            want, ek, ev = decoder(x, ek, ev)
            assert_close(got, want)
            assert k.shape == ek.shape
            x = got
    return graphs


def test_a_decoder_loop_whose_cache_grows_every_step_compiles_once():
    """Dynamo specializes the cache lengths 0 and 1 (a graph each, as for aot_autograd's own
    backend); from 2 on, one graph, built once, serves every length."""
    graphs = decode("esgraph")
    last = esg_torch.compiled_functions()[-1]
    stats = last.model.stats()
    assert last.builds == 1 and stats["bindings"] >= 9 and stats["plans"] < stats["bindings"]
    assert len(graphs) == len(decode("aot_eager")) <= 4


def test_hugging_face_generation_with_its_growing_cache():
    """GPT-2's own KV cache (transformers' DynamicCache) grows a token a step, dynamic=True:
    the position ids and masks are aranges and fills of the symbolic length, which esgraph
    leaves to PyTorch with fallback="eager"; the rest compiles into graphs that serve every
    length. The tokens are eager's, token for token, and Dynamo hands esgraph the graphs it
    hands aot_autograd's own backend."""
    pytest.importorskip("transformers")
    from transformers import GPT2Config, GPT2LMHeadModel
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = GPT2LMHeadModel(GPT2Config(vocab_size=1000, n_embd=128, n_layer=2, n_head=4)).eval()

    def step(ids, past):
        out = model(input_ids=ids, past_key_values=past, use_cache=True)
        return out.logits[:, -1], out.past_key_values

    def generate(fn, tokens=8):
        ids, past, out = torch.tensor([[5, 17, 256, 3, 999]]), None, []
        with torch.no_grad():
            for _ in range(tokens):
                logits, past = fn(ids, past)
                ids = logits.argmax(-1, keepdim=True)
                out.append(int(ids))
        return out

    def graphs_for(backend, **options):
        graphs = []

        def counting(gm, example_inputs, **kwargs):
            graphs.append(gm)
            return (esg_torch.esgraph_backend(gm, example_inputs, options=options) if backend == "esgraph"
                    else torch._dynamo.lookup_backend(backend)(gm, example_inputs))
        torch._dynamo.reset()
        return generate(torch.compile(step, backend=counting, dynamic=True)), graphs

    want = generate(step)
    got, graphs = graphs_for("esgraph", fallback="eager")
    assert got == want
    serving = [f for f in esg_torch.compiled_functions() if f.model is not None and f.model.stats()["bindings"] > 1]
    assert serving and all(f.builds == 1 for f in serving)
    assert len(graphs) == len(graphs_for("aot_eager")[1])
