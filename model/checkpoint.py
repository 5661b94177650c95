"""Checkpoints: the native format (config.json + model.safetensors + SentencePiece) and OPUS-MT/Marian import."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from model.config import ModelConfig
from model.tokenizer import Tokenizer
from model.transformer import Seq2SeqTransformer

FORMAT = "mt-server/1"


@dataclass
class Checkpoint:
    """A loaded model with its tokenizer and language pair."""

    model: Seq2SeqTransformer
    tokenizer: Tokenizer
    name: str
    source_lang: str
    target_lang: str
    path: Path


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


def save_native(model: Seq2SeqTransformer, spm_path: Path, out: Path, source_lang: str, target_lang: str) -> None:
    """Write a native checkpoint directory (one shared SentencePiece model)."""
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "format": FORMAT,
        "name": f"{source_lang}-{target_lang}",
        "source_lang": source_lang,
        "target_lang": target_lang,
        "architecture": model.cfg.to_dict(),
        "tokenizer": {"source": "spm.model", "target": "spm.model"},
    }
    (out / "config.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    if Path(spm_path).resolve() != (out / "spm.model").resolve():
        shutil.copyfile(spm_path, out / "spm.model")
    save_file(_unique_state(model), str(out / "model.safetensors"))


def _load_native(path: Path, meta: dict) -> tuple[Seq2SeqTransformer, Tokenizer, str, str]:
    """Read a native checkpoint."""
    cfg = ModelConfig.from_dict(meta["architecture"])
    model = Seq2SeqTransformer(cfg)
    state = load_file(str(path / "model.safetensors"))
    full = model.state_dict()
    for name, tensor in full.items():  # restore tied aliases saved once
        if name not in state:
            twin = next((n for n, t in full.items() if n in state and t.data_ptr() == tensor.data_ptr()), None)
            if twin is not None:
                state[name] = state[twin]
    _load_strict(model, state)
    tok = meta["tokenizer"]
    src, tgt = path / tok["source"], path / tok["target"]
    tokenizer = Tokenizer.from_files(
        src, tgt if tgt != src else None, eos_id=cfg.eos_id, pad_id=cfg.pad_id, unk_id=cfg.unk_id
    )
    return model, tokenizer, meta["source_lang"], meta["target_lang"]


def marian_config(hf: dict) -> ModelConfig:
    """Our architecture from a Hugging Face Marian config.json."""
    for a, b in [("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")]:
        if hf.get(a) != hf.get(b, hf.get(a)):
            raise ValueError(f"unsupported Marian config: {a}={hf.get(a)} differs from {b}={hf.get(b)}")
    vocab = hf["vocab_size"]
    shared = hf.get("share_encoder_decoder_embeddings", True)
    return ModelConfig(
        src_vocab_size=vocab,
        tgt_vocab_size=vocab if shared else (hf.get("decoder_vocab_size") or vocab),
        d_model=hf["d_model"],
        n_heads=hf["encoder_attention_heads"],
        encoder_layers=hf["encoder_layers"],
        decoder_layers=hf["decoder_layers"],
        d_ff=hf["encoder_ffn_dim"],
        activation={"silu": "swish"}.get(
            hf.get("activation_function", "swish"), hf.get("activation_function", "swish")
        ),
        pre_norm=bool(hf.get("normalize_before", False)),
        scale_embedding=bool(hf.get("scale_embedding", True)),
        share_embeddings=shared,
        tie_output=bool(hf.get("tie_word_embeddings", True)),
        final_logits_bias=True,
        max_positions=hf.get("max_position_embeddings", 512),
        pe_layout="halves",
        dropout=0.0,
        pad_id=hf["pad_token_id"],
        eos_id=hf["eos_token_id"],
        unk_id=1,
        decoder_start_id=hf.get("decoder_start_token_id", hf["pad_token_id"]),
    )


_MARIAN_RENAMES = [
    (r"^model\.shared\.weight$", "tgt_embed.weight"),
    (r"^model\.decoder\.embed_tokens\.weight$", "tgt_embed.weight"),
    (r"^model\.encoder\.embed_tokens\.weight$", "src_embed.weight"),
    (r"^model\.(encoder|decoder)\.layers\.(\d+)\.", r"\1.\2."),
    (r"\.encoder_attn\.", ".cross_attn."),
    (r"\.self_attn_layer_norm\.", ".SELF_NORM."),
    (r"\.encoder_attn_layer_norm\.", ".cross_block.norm."),
    (r"\.final_layer_norm\.", ".ffn_block.norm."),
    (r"\.fc([12])\.", r".ffn.fc\1."),
    (r"^lm_head\.weight$", "out_proj.weight"),
    (r"^final_logits_bias$", "final_logits_bias"),
]


def marian_state(hf_state: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """Rename Hugging Face Marian tensors to ours (positions are computed, not loaded)."""
    state = {}
    for name, tensor in hf_state.items():
        if "embed_positions" in name:
            continue
        if not name.startswith(("model.", "lm_head", "final_logits_bias")):
            name = "model." + name
        new = name
        for pattern, repl in _MARIAN_RENAMES:
            new = re.sub(pattern, repl, new)
        block = "attn_block" if new.startswith("encoder.") else "self_block"
        state[new.replace(".SELF_NORM.", f".{block}.norm.")] = tensor
    if "final_logits_bias" in state:
        state["final_logits_bias"] = state["final_logits_bias"].reshape(-1)
    if cfg.share_embeddings:
        state.setdefault("src_embed.weight", state["tgt_embed.weight"])
    if cfg.tie_output:
        state["out_proj.weight"] = state["tgt_embed.weight"]
    return state


def _load_marian(path: Path) -> tuple[Seq2SeqTransformer, Tokenizer]:
    """Import an OPUS-MT checkpoint in the Hugging Face layout, without `transformers`."""
    hf_config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    if (path / "model.safetensors").exists():
        hf_state = load_file(str(path / "model.safetensors"))
    else:
        hf_state = torch.load(path / "pytorch_model.bin", map_location="cpu", weights_only=True)
    tokenizer = Tokenizer.from_files(path / "source.spm", path / "target.spm", path / "vocab.json")
    return from_marian(hf_config, hf_state, tokenizer.unk_id), tokenizer


def from_marian(hf_config: dict, hf_state: dict[str, torch.Tensor], unk_id: int = 1) -> Seq2SeqTransformer:
    """Our network with a Hugging Face Marian model's weights (its config.json as a dict and its state dict)."""
    bias = hf_state.get("final_logits_bias")
    if bias is not None and not bias.any():  # OPUS-MT ships zeros: skipping them spares a (N, V) pass per step
        hf_state = {k: v for k, v in hf_state.items() if k != "final_logits_bias"}
    has_bias = "final_logits_bias" in hf_state
    cfg = marian_config(hf_config)
    cfg = ModelConfig.from_dict({**cfg.to_dict(), "unk_id": unk_id, "final_logits_bias": has_bias})
    model = Seq2SeqTransformer(cfg)
    _load_strict(model, marian_state(hf_state, cfg))
    return model


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
    patterns = ["config.json", "*.spm", "vocab.json", "model.safetensors", "pytorch_model.bin", "spm.model"]
    return Path(snapshot_download(str(spec), allow_patterns=patterns))


def _pair_from_name(path: Path) -> tuple[str, str]:
    """Language pair from an OPUS-MT style directory name (opus-mt-en-es)."""
    match = re.search(r"([a-z]{2,3})-([a-z]{2,3})$", path.name)
    return (match.group(1), match.group(2)) if match else ("und", "und")


def load(
    spec: str | Path, device: str = "cpu", dtype: torch.dtype = torch.float32, pair: tuple[str, str] | None = None
) -> Checkpoint:
    """Load a native or Marian checkpoint onto `device` in eval mode."""
    path = resolve(spec)
    meta = json.loads((path / "config.json").read_text(encoding="utf-8"))
    if meta.get("format") == FORMAT:
        model, tokenizer, src, tgt = _load_native(path, meta)
    elif meta.get("model_type") == "marian":
        model, tokenizer = _load_marian(path)
        src, tgt = _pair_from_name(path)
    else:
        raise ValueError(f"{path}/config.json is neither a native ({FORMAT}) nor a Marian checkpoint")
    src, tgt = pair or (src, tgt)
    model = model.to(device=device, dtype=dtype).eval()
    return Checkpoint(model, tokenizer, f"{src}-{tgt}", src, tgt, path)
