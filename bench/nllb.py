"""Random NLLB-200 (M2M100 layout) checkpoints for the benchmarks: one builder for every shape, saved with a tiny NLLB
tokenizer (bench.harness.fixtures) so that `model.loading.checkpoint.load` serves them as it serves a real NLLB-200."""

from __future__ import annotations

from pathlib import Path

import torch

EOS = 2  # M2M100 layout: <s> 0, <pad> 1, </s> 2 (also the decoder start), <unk> 3
FIRST = 4  # the first id that is no special token
NLLB600M = {"d_model": 1024, "layers": 12, "heads": 16, "ffn": 4096, "vocab": 256206}  # nllb-200-distilled-600M
NLLB1_3B = {"d_model": 1024, "layers": 24, "heads": 16, "ffn": 8192, "vocab": 256206}  # nllb-200-(distilled-)1.3B
TINY = {"d_model": 64, "layers": 2, "heads": 4, "ffn": 128, "vocab": 1000}


def describe(shape: dict) -> str:
    """The shape in words."""
    return (
        f"d_model {shape['d_model']}, {shape['layers']}+{shape['layers']} layers, {shape['heads']} heads, "
        f"ffn {shape['ffn']}, vocab {shape['vocab']}, pre-LN, scaled embeddings, relu"
    )


def hf_model(shape: dict, seed: int = 0):
    """A random `M2M100ForConditionalGeneration` of `shape` (NLLB-200's network and settings) in eval mode."""
    from transformers import GenerationConfig, M2M100Config, M2M100ForConditionalGeneration

    from bench.harness.fixtures import hf_shape, m2m100_ids

    sizes = hf_shape(shape["d_model"], shape["layers"], shape["heads"], shape["ffn"], positions=1024)
    cfg = M2M100Config(
        vocab_size=shape["vocab"], scale_embedding=True, activation_function="relu", **sizes, **m2m100_ids()
    )
    torch.manual_seed(seed)
    model = M2M100ForConditionalGeneration(cfg).eval()
    model.generation_config = GenerationConfig(**m2m100_ids())
    return model


def write(out: Path, shape: dict = TINY, seed: int = 0) -> Path:
    """A random NLLB-shaped checkpoint directory (`save_pretrained` + NLLB tokenizer files)."""
    from bench.harness.fixtures import m2m100_tokenizer

    tok = m2m100_tokenizer(out, "nllb")
    if len(tok) > shape["vocab"]:
        raise ValueError(f"vocab {shape['vocab']} is smaller than the tokenizer's {len(tok)} pieces")
    hf_model(shape, seed).save_pretrained(out)
    return out
