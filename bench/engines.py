"""The engines the benchmarks compare, each as one function (sources, beam size, new tokens) -> the best hypothesis's
token ids per source, every engine forced to generate exactly `new` tokens: ours, `transformers`, CTranslate2."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch

Engine = Callable[[list[list[int]], int, int], list[list[int]]]


def ours(model, overlap: bool = False) -> Engine:
    """Our offline generation (the server's batch step) over `model` (a model or a StaticDecoder), with the host
    allocator the server's engine core sets; no per-step scores, as `transformers` and CTranslate2 compute none by
    default; `overlap`: one step kept in flight."""
    from model.runner.generate import generate
    from model.runner.host_memory import keep_freed_memory
    from model.runner.params import DecodeParams
    from model.runner.search import Request

    keep_freed_memory()

    def run(batch: list[list[int]], beam: int, new: int) -> list[list[int]]:
        params = DecodeParams(beam_size=beam, max_new_tokens=new, min_new_tokens=new, return_scores=False)
        requests = [Request(i, s, params) for i, s in enumerate(batch)]
        return [h[0].tokens for h in generate(model, requests, overlap=overlap)]

    return run


def hf(model) -> Engine:
    """`generate` of a Marian or M2M100 (NLLB) model with its config's special tokens (pad never generated), forced
    to `new` tokens."""
    from transformers import GenerationConfig

    pad, eos, start = (getattr(model.config, f"{k}_token_id") for k in ("pad", "eos", "decoder_start"))

    def run(batch: list[list[int]], beam: int, new: int) -> list[list[int]]:
        width = max(map(len, batch))
        ids = torch.tensor([s + [pad] * (width - len(s)) for s in batch], device=model.device)
        gen = GenerationConfig(
            decoder_start_token_id=start, eos_token_id=eos, pad_token_id=pad, bad_words_ids=[[pad]], num_beams=beam,
            do_sample=False, max_new_tokens=new, min_new_tokens=new, length_penalty=1.0, early_stopping=False,
        )  # fmt: skip
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=(ids != pad).long(), generation_config=gen)
        return [[t for t in row if t not in (eos, pad)] for row in out[:, 1:].tolist()]

    return run


def ct2_convert(hf_dir: Path, out: Path) -> Path:
    """CTranslate2's conversion of a saved Marian checkpoint (float32 weights; the compute type is chosen at load)."""
    import warnings

    import ctranslate2

    if not (out / "model.bin").exists():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ctranslate2.converters.TransformersConverter(str(hf_dir)).convert(str(out), quantization=None)
    return out


def ct2(ct2_dir: Path, compute_type: str, threads: int) -> Engine:
    """A CTranslate2 `Translator` on the CPU (`compute_type` float32, int8, bfloat16, ...), fed token strings;
    `min_decoding_length` = `max_decoding_length` count generated tokens only."""
    import ctranslate2

    vocab = json.loads((ct2_dir / "shared_vocabulary.json").read_text(encoding="utf-8"))
    index = {p: i for i, p in enumerate(vocab)}
    opts = {"device": "cpu", "inter_threads": 1, "intra_threads": threads}
    translator = ctranslate2.Translator(str(ct2_dir), compute_type=compute_type, **opts)

    def run(batch: list[list[int]], beam: int, new: int) -> list[list[int]]:
        results = translator.translate_batch(
            [[vocab[i] for i in src] for src in batch], beam_size=beam, max_batch_size=len(batch),
            min_decoding_length=new, max_decoding_length=new,
        )  # fmt: skip
        return [[index[t] for t in r.hypotheses[0]] for r in results]

    return run


def ct2_types() -> set[str]:
    """The compute types CTranslate2 offers on this CPU (bfloat16 only on some)."""
    import ctranslate2

    return set(ctranslate2.get_supported_compute_types("cpu"))
