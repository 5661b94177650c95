"""Checkpoints: the native format (config.json + model.safetensors + SentencePiece) and Hugging Face imports (OPUS-MT,
NLLB-200/M2M100, mBART-50). `describe` reads what a checkpoint is without its weights; `load` adds the network."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, fields
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from model.loading.description import Description
from model.loading.hf import KINDS, hf_config, hf_state, read_json, read_state
from model.loading.hf import generation_defaults as hf_defaults
from model.loading.hf_tokenizer import hf_tokenizer
from model.loading.languages import Languages, api_codes
from model.loading.tokenizer import Tokenizer
from model.network.config import ModelConfig
from model.network.precision import prepare
from model.network.transformer import Seq2SeqTransformer
from model.runner.params import GenerationDefaults

FORMAT = "mt-server/1"
HUB_FILES = ["*.json", "*.spm", "*.model", "model.safetensors", "pytorch_model.bin"]


@dataclass
class Checkpoint(Description):
    """A loaded model with its description."""

    model: Seq2SeqTransformer
    precision: str = "float32"  # float32, float16, bfloat16 or int8 (model.network.precision)
    parameters: int = 0  # weights of the network as stored (int8 keeps the count of the float network)


def _load_strict(model: Seq2SeqTransformer, state: dict[str, torch.Tensor]) -> None:
    """Load weights, naming every missing or unexpected tensor on mismatch."""
    expected = set(model.state_dict())
    missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or unexpected:
        raise ValueError(f"checkpoint mismatch: missing tensors {missing}, unexpected tensors {unexpected}")
    model.load_state_dict(state, strict=True)


def _unique_state(model: Seq2SeqTransformer) -> dict[str, torch.Tensor]:
    """State dict without tied aliases (safetensors stores each tensor once)."""
    state, seen = {}, set()
    for name, tensor in model.state_dict().items():
        if tensor.data_ptr() in seen:
            continue
        seen.add(tensor.data_ptr())
        state[name] = tensor.detach().contiguous().cpu()
    return state


def save_native(
    model: Seq2SeqTransformer,
    spm_path: Path,
    out: Path,
    source_lang: str,
    target_lang: str,
    language_tokens: dict[str, int] | None = None,
    name: str | None = None,
    casing: dict[str, str] | None = None,
) -> None:
    """Write a native checkpoint directory (one shared SentencePiece model). With `language_tokens` (API code ->
    token id after the SentencePiece pieces), the checkpoint serves every pair between those languages, the target's
    token prepended to the source as multi-target OPUS-MT models do; `source_lang`/`target_lang` are then its
    first pair (the default direction of `python -m model`). `casing` (source language -> "sentence" or
    "capitals"): the server gives it text of that language typed in capitals, and with "sentence" also text starting
    lower-case, in sentence case (app.casing), as its training text was written."""
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "format": FORMAT,
        "name": name or f"{source_lang}-{target_lang}",
        "source_lang": source_lang,
        "target_lang": target_lang,
        **({"language_tokens": language_tokens} if language_tokens else {}),
        **({"casing": casing} if casing else {}),
        "architecture": model.cfg.to_dict(),
        "tokenizer": {"source": "spm.model", "target": "spm.model"},
    }
    (out / "config.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    if Path(spm_path).resolve() != (out / "spm.model").resolve():
        shutil.copyfile(spm_path, out / "spm.model")
    save_file(_unique_state(model), str(out / "model.safetensors"))


def _native_state(model: Seq2SeqTransformer, path: Path) -> dict[str, torch.Tensor]:
    """A native checkpoint's tensors, with the tied aliases that were saved once restored."""
    state = load_file(str(path / "model.safetensors"))
    full = model.state_dict()
    for name, tensor in full.items():
        if name not in state:
            twin = next((n for n, t in full.items() if n in state and t.data_ptr() == tensor.data_ptr()), None)
            if twin is not None:
                state[name] = state[twin]
    return state


def _describe_native(path: Path, meta: dict) -> Description:
    """A native checkpoint: its own pair, or every pair between the languages of its `language_tokens` (the
    target's token before the source, never decoded into text); greedy defaults."""
    cfg = ModelConfig.from_dict(meta["architecture"])
    tok = meta["tokenizer"]
    src, tgt = path / tok["source"], path / tok["target"]
    codes = {code: int(i) for code, i in meta.get("language_tokens", {}).items()}
    tokenizer = Tokenizer.from_files(
        src,
        tgt if tgt != src else None,
        eos_id=cfg.eos_id,
        pad_id=cfg.pad_id,
        unk_id=cfg.unk_id,
        specials=frozenset(codes.values()),
    )
    if codes:  # its first pair first on each side (the default direction of `python -m model`)
        sources = (meta["source_lang"], *sorted(set(codes) - {meta["source_lang"]}))
        targets = (meta["target_lang"], *sorted(set(codes) - {meta["target_lang"]}))
        languages = Languages(sources, targets, codes)
    else:
        languages = Languages((meta["source_lang"],), (meta["target_lang"],))
    casing = dict(meta.get("casing", {}))
    return Description(path, meta["name"], "native", cfg, tokenizer, languages, GenerationDefaults(), casing)


def _pair_from_name(label: str) -> tuple[str, str]:
    """Language pair from an OPUS-MT style name (opus-mt-en-es, opus-mt-en-ROMANCE)."""
    match = re.search(r"([A-Za-z]{2,})-([A-Za-z]{2,})$", label)
    return (match.group(1), match.group(2)) if match else ("und", "und")


def _describe_hf(path: Path, label: str, meta: dict) -> Description:
    """A Hugging Face checkpoint: OPUS-MT serves its pair (every `>>xx<<` target when it has them), NLLB/M2M100 and
    mBART-50 every pair of the language tokens they know."""
    kind = meta["model_type"]
    cfg = hf_config(meta)
    tokenizer, tokens = hf_tokenizer(path, kind)
    cfg = ModelConfig.from_dict({**cfg.to_dict(), "unk_id": tokenizer.unk_id})
    ids = {code: tokens[token] for code, token in api_codes(tokens).items()}
    if kind == "marian":
        src, tgt = _pair_from_name(label)
        languages = Languages((src,), tuple(ids) or (tgt,), ids)
        name = label if ids else f"{src}-{tgt}"
    else:
        languages, name = Languages(tuple(ids), tuple(ids), ids, forced=True), label
    return Description(path, name, kind, cfg, tokenizer, languages, hf_defaults(path, cfg), {})


def _pick(known: tuple[str, ...], wanted: str, side: str) -> tuple[str, ...]:
    """The languages of one side that a SRC-TGT spec keeps ("mul" keeps all; a one-language side is renamed)."""
    if wanted in known or len(known) > 1 and wanted == "mul":
        return (wanted,) if wanted in known else known
    if len(known) == 1:
        return (wanted,)
    raise ValueError(f"model spec asks for {side} {wanted!r}; the checkpoint knows {sorted(known)}")


def _with_pair(desc: Description, pair: tuple[str, str]) -> Description:
    """The description restricted (or, for a one-pair checkpoint, renamed) to the SRC-TGT of a model spec."""
    langs = desc.languages
    sources, targets = _pick(langs.sources, pair[0], "source"), _pick(langs.targets, pair[1], "target")
    tokens = dict(langs.tokens)
    for old, new in ((langs.sources, sources), (langs.targets, targets)):
        if len(old) == 1 and old != new and old[0] in tokens:
            tokens[new[0]] = tokens.pop(old[0])
    desc.languages = Languages(sources, targets, tokens, langs.forced)
    desc.name = f"{pair[0]}-{pair[1]}"
    return desc


def describe(spec: str | Path, pair: tuple[str, str] | None = None) -> Description:
    """What a checkpoint is (architecture, tokenizer, languages, generation defaults), without loading its weights."""
    path = resolve(spec)
    meta = read_json(path / "config.json")
    if meta.get("format") == FORMAT:
        desc = _describe_native(path, meta)
    elif meta.get("model_type") in KINDS:
        desc = _describe_hf(path, Path(str(spec)).name, meta)
    else:
        raise ValueError(
            f"{path}/config.json: model_type {meta.get('model_type')!r} is not served; expected a native "
            f"({FORMAT}) checkpoint or one of {list(KINDS)} (OPUS-MT, NLLB-200/M2M100, mBART-50)"
        )
    return _with_pair(desc, pair) if pair else desc


def _network(desc: Description) -> Seq2SeqTransformer:
    """Build the network and read its weights."""
    if desc.kind == "native":
        model = Seq2SeqTransformer(desc.config)
        _load_strict(model, _native_state(model, desc.path))
        return model
    return hf_network(desc.config, read_state(desc.path))


def hf_network(cfg: ModelConfig, state: dict[str, torch.Tensor]) -> Seq2SeqTransformer:
    """Our network with a Hugging Face model's tensors (`cfg`: its config as ours, from `hf_config`)."""
    bias = state.get("final_logits_bias")
    if bias is not None and not bias.any():  # OPUS-MT ships zeros: skipping them spares a (N, V) pass per step
        state = {k: v for k, v in state.items() if k != "final_logits_bias"}
    cfg = ModelConfig.from_dict({**cfg.to_dict(), "final_logits_bias": "final_logits_bias" in state})
    model = Seq2SeqTransformer(cfg)
    _load_strict(model, hf_state(state, cfg))
    return model


def load(
    spec: str | Path,
    device: str = "cpu",
    dtype: torch.dtype | str = torch.float32,
    pair: tuple[str, str] | None = None,
) -> Checkpoint:
    """Load a native or Hugging Face checkpoint onto `device` in eval mode; `dtype` is a torch float dtype or a
    precision name of model.network.precision ("int8": float32 weights, then dynamic int8 quantization, CPU only).
    float32 on CPU also holds each linear weight prepacked for oneDNN (model.network.packed: twice the memory of those
    weights)."""
    precision = dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")
    desc = describe(spec, pair)
    model = _network(desc)
    size = sum(t.numel() for t in model.parameters())
    model = prepare(model, precision, device)
    parts = {f.name: getattr(desc, f.name) for f in fields(Description)}
    return Checkpoint(**{**parts, "config": model.cfg}, model=model, precision=precision, parameters=size)


def resolve(spec: str | Path) -> Path:
    """A local directory as is; otherwise a hub model id, downloaded (needs a network and huggingface_hub)."""
    path = Path(spec)
    if path.is_dir():
        return path
    if path.exists() or str(spec).startswith((".", "/")):
        raise FileNotFoundError(f"model directory not found: {spec}")
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise FileNotFoundError(f"{spec} is not a directory and huggingface_hub is not installed") from exc
    return Path(snapshot_download(str(spec), allow_patterns=HUB_FILES))
