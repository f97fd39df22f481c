"""The PyTorch models the tests check and bench/torch_compile.py measures, in one place: Hugging
Face architectures from small configs with random weights (nothing is downloaded), and what a
model's result leads with."""
import warnings

import torch


def hugging_face(name, hidden=256, layers=4, heads=4, vocabulary=1000, image=64):
    """BERT, GPT-2, Llama (grouped-query attention, two query heads a key head) or ViT."""
    from transformers import (BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, ViTConfig,
                              ViTModel)
    small = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=4 * hidden)
    make = {"bert": lambda: BertModel(BertConfig(vocab_size=vocabulary, **small)),
            "gpt2": lambda: GPT2LMHeadModel(GPT2Config(vocab_size=vocabulary, n_embd=hidden, n_layer=layers, n_head=heads)),
            "llama": lambda: LlamaForCausalLM(LlamaConfig(vocab_size=vocabulary, num_key_value_heads=heads // 2, **small)),
            "vit": lambda: ViTModel(ViTConfig(image_size=image, patch_size=16, **small))}[name]
    with warnings.catch_warnings():  # the configs' special tokens lie outside a small vocabulary
        warnings.simplefilter("ignore")
        return make().eval()


def main_output(out):
    """The tensor a model's result leads with: logits, a hidden state, a segmentation map."""
    if isinstance(out, torch.Tensor):
        return out
    for key in ("logits", "last_hidden_state", "out"):
        if hasattr(out, key) or (isinstance(out, dict) and key in out):
            return out[key] if isinstance(out, dict) else getattr(out, key)
    return out[0]
