"""Hugging Face checkpoints without `transformers`: Marian (OPUS-MT), M2M100 (NLLB-200) and mBART as one network,
their tensors renamed to ours, and their generation defaults."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import torch

from model.network.config import ModelConfig
from model.runner.params import GenerationDefaults

KINDS = ("marian", "m2m_100", "mbart")
FAIRSEQ_OFFSET = 2  # fairseq positions start after the padding index (pad_id 1)


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file's object ({} when the file is absent)."""
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _same(hf: dict, a: str, b: str) -> None:
    """Reject configs whose encoder and decoder differ where our layers share one size."""
    if hf.get(a) != hf.get(b, hf.get(a)):
        raise ValueError(f"unsupported {hf['model_type']} config: {a}={hf.get(a)} differs from {b}={hf.get(b)}")


def hf_config(hf: dict) -> ModelConfig:
    """Our architecture from a Hugging Face Marian, M2M100/NLLB or mBART config.json."""
    kind = hf["model_type"]
    _same(hf, "encoder_attention_heads", "decoder_attention_heads")
    _same(hf, "encoder_ffn_dim", "decoder_ffn_dim")
    vocab = hf["vocab_size"]
    shared = hf.get("share_encoder_decoder_embeddings", True)
    activation = hf.get("activation_function", "swish" if kind == "marian" else "relu")
    base = dict(
        src_vocab_size=vocab,
        tgt_vocab_size=vocab if shared else (hf.get("decoder_vocab_size") or vocab),
        d_model=hf["d_model"],
        n_heads=hf["encoder_attention_heads"],
        encoder_layers=hf["encoder_layers"],
        decoder_layers=hf["decoder_layers"],
        d_ff=hf["encoder_ffn_dim"],
        activation={"silu": "swish"}.get(activation, activation),
        scale_embedding=bool(hf.get("scale_embedding", kind != "mbart")),
        share_embeddings=shared,
        tie_output=bool(hf.get("tie_word_embeddings", True)),
        max_positions=hf.get("max_position_embeddings", 512 if kind == "marian" else 1024),
        dropout=0.0,
        pad_id=hf["pad_token_id"],
        eos_id=hf["eos_token_id"],
        decoder_start_id=hf.get("decoder_start_token_id", hf["pad_token_id"]),
    )
    if kind == "marian":
        extra = dict(pre_norm=bool(hf.get("normalize_before", False)), final_logits_bias=True, pe_layout="halves")
        extra.update(align_layer=hf["decoder_layers"] - 1, align_heads=(0,))  # Marian's guided-alignment head
    elif kind == "m2m_100":  # pre-LN with final norms, offset fairseq sinusoids (NLLB-200 is this network)
        extra = dict(pre_norm=True, pe_layout="fairseq", pe_offset=FAIRSEQ_OFFSET, unk_id=3)
    elif kind == "mbart":  # pre-LN, learned positions (offset rows dropped on import), norm after the embedding
        extra = dict(pre_norm=True, pe_layout="learned", embed_norm=True, final_logits_bias=True, unk_id=3)
    else:
        raise ValueError(f"unsupported model_type {kind!r}; expected one of {KINDS}")
    return ModelConfig(**base, **extra)


_RENAMES = [
    (r"^model\.shared\.weight$", "tgt_embed.weight"),
    (r"^model\.decoder\.embed_tokens\.weight$", "tgt_embed.weight"),
    (r"^model\.encoder\.embed_tokens\.weight$", "src_embed.weight"),
    (r"^model\.encoder\.embed_positions\.weight$", "src_pos.weight"),
    (r"^model\.decoder\.embed_positions\.weight$", "tgt_pos.weight"),
    (r"^model\.encoder\.layernorm_embedding\.", "src_embed_norm."),
    (r"^model\.decoder\.layernorm_embedding\.", "tgt_embed_norm."),
    (r"^model\.encoder\.layer_norm\.", "encoder_norm."),
    (r"^model\.decoder\.layer_norm\.", "decoder_norm."),
    (r"^model\.(encoder|decoder)\.layers\.(\d+)\.", r"\1.\2."),
    (r"\.encoder_attn\.", ".cross_attn."),
    (r"\.self_attn_layer_norm\.", ".SELF_NORM."),
    (r"\.encoder_attn_layer_norm\.", ".cross_block.norm."),
    (r"\.final_layer_norm\.", ".ffn_block.norm."),
    (r"\.fc([12])\.", r".ffn.fc\1."),
    (r"^lm_head\.weight$", "out_proj.weight"),
    (r"^final_logits_bias$", "final_logits_bias"),
]


def hf_state(hf_state: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """Rename Hugging Face tensors to ours (sinusoidal positions are computed, not loaded)."""
    state = {}
    for name, tensor in hf_state.items():
        if name.endswith("embed_positions.weights") or ("embed_positions" in name and cfg.pe_layout != "learned"):
            continue
        if not name.startswith(("model.", "lm_head", "final_logits_bias")):
            name = "model." + name
        new = name
        for pattern, repl in _RENAMES:
            new = re.sub(pattern, repl, new)
        block = "attn_block" if new.startswith("encoder.") else "self_block"
        state[new.replace(".SELF_NORM.", f".{block}.norm.")] = tensor
    for name in ("src_pos.weight", "tgt_pos.weight"):
        if name in state:  # fairseq's learned tables keep two rows before position 0
            state[name] = state[name][FAIRSEQ_OFFSET:]
    if "final_logits_bias" in state:
        state["final_logits_bias"] = state["final_logits_bias"].reshape(-1)
    if cfg.share_embeddings:
        state.setdefault("src_embed.weight", state["tgt_embed.weight"])
    if cfg.tie_output:
        state["out_proj.weight"] = state["tgt_embed.weight"]
    return state


def read_state(path: Path) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors from model.safetensors or pytorch_model.bin."""
    from safetensors.torch import load_file

    if (path / "model.safetensors").exists():
        return load_file(str(path / "model.safetensors"))
    return torch.load(path / "pytorch_model.bin", map_location="cpu", weights_only=True)


def _ids(value: Any) -> set[int]:
    """A token id or a list of them, as a set."""
    if value is None:
        return set()
    return set(value) if isinstance(value, list) else {value}


def generation_defaults(path: Path, cfg: ModelConfig) -> GenerationDefaults:
    """Decoding defaults from generation_config.json over config.json, as transformers' generate reads them."""
    gen = {**read_json(path / "config.json"), **read_json(path / "generation_config.json")}
    max_new = gen.get("max_new_tokens") or (gen["max_length"] - 1 if gen.get("max_length") else None)
    bad = tuple(tuple(w) for w in gen.get("bad_words_ids") or () if w and list(w) not in ([cfg.pad_id], [cfg.eos_id]))
    return GenerationDefaults(
        beam_size=gen.get("num_beams") or 1,
        max_new_tokens=max_new,
        min_new_tokens=max(0, (gen.get("min_length") or 0) - 1),
        length_penalty=1.0 if gen.get("length_penalty") is None else gen["length_penalty"],
        repetition_penalty=gen.get("repetition_penalty") or 1.0,
        no_repeat_ngram_size=gen.get("no_repeat_ngram_size") or 0,
        early_stopping=gen.get("early_stopping") is True,
        forced_eos=cfg.eos_id in _ids(gen.get("forced_eos_token_id")),
        bad_words_ids=bad,
    )
