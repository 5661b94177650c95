"""Tiny real artefacts for tests: SentencePiece models, a native checkpoint, a random Marian checkpoint."""

from __future__ import annotations

import json
import random
from pathlib import Path

import sentencepiece as spm
import torch

from model.checkpoint import save_native
from model.config import ModelConfig
from model.transformer import Seq2SeqTransformer

EN = "the a cat dog house red big small runs sleeps eats green tree river city night day world hello good".split()
ES = "el la gato perro casa roja grande pequeño corre duerme come verde árbol río ciudad noche día mundo hola".split()


def corpus(words: list[str], n: int = 400, seed: int = 0) -> list[str]:
    """Synthetic sentences from a word list (with a few accented and non-Latin characters)."""
    rng = random.Random(seed)
    extra = ["¿qué?", "niño", "über", "café", "naïve", "日本", "—"]
    return [" ".join(rng.choice(words + extra) for _ in range(rng.randint(3, 12))) for _ in range(n)]


def train_spm(prefix: Path, lines: list[str], vocab_size: int, **ids: int) -> Path:
    """Train a tiny unigram SentencePiece model with byte fallback."""
    text = prefix.with_suffix(".txt")
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(text),
        model_prefix=str(prefix),
        vocab_size=vocab_size,
        model_type="unigram",
        byte_fallback=True,
        character_coverage=1.0,
        minloglevel=2,
        **ids,
    )
    return prefix.with_suffix(".model")


def tiny_config(vocab: int, **overrides) -> ModelConfig:
    """A small but real Transformer shape."""
    base = dict(
        src_vocab_size=vocab,
        tgt_vocab_size=vocab,
        d_model=32,
        n_heads=4,
        encoder_layers=2,
        decoder_layers=2,
        d_ff=64,
        pre_norm=True,
        scale_embedding=True,
        share_embeddings=True,
        dropout=0.0,
        max_positions=256,
    )
    return ModelConfig(**{**base, **overrides})


def make_native(out: Path, seed: int = 0) -> Path:
    """A random native en-es checkpoint with a shared 320-piece vocabulary."""
    out.mkdir(parents=True, exist_ok=True)
    model_path = train_spm(
        out / "spm_src", corpus(EN) + corpus(ES, seed=1), 320, pad_id=0, eos_id=1, unk_id=2, bos_id=-1
    )
    torch.manual_seed(seed)
    model = Seq2SeqTransformer(tiny_config(320, final_logits_bias=True, tie_output=False))
    sp = spm.SentencePieceProcessor(model_file=str(model_path))
    with torch.no_grad():  # a random model whose outputs are readable, depend on the input and end with EOS
        model.out_proj.weight.mul_(4.0)
        for layer in model.decoder:
            layer.cross_attn.out_proj.weight.mul_(6.0)
        for i in range(sp.get_piece_size()):
            if sp.is_byte(i):
                model.final_logits_bias[i] = -30.0
        model.final_logits_bias[1] = 1.0
    save_native(model, model_path, out, "en", "es")
    return out


def make_marian(
    out: Path, seed: int = 0, d_model: int = 32, layers: int = 2, heads: int = 4, ffn: int = 64, embed_std: float = 1.0
) -> Path:
    """A random Hugging Face MarianMTModel with its MarianTokenizer files (needs `transformers`); a small
    `embed_std` flattens its next-token distributions, so beams overtake each other."""
    from transformers import MarianConfig, MarianMTModel

    out.mkdir(parents=True, exist_ok=True)
    src = train_spm(out / "src", corpus(EN), 300)
    tgt = train_spm(out / "tgt", corpus(ES, seed=1), 300)
    pieces = ["</s>", "<unk>"]
    for model_file in (src, tgt):
        sp = spm.SentencePieceProcessor(model_file=str(model_file))
        pieces += [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if sp.id_to_piece(i) not in pieces]
    pieces = [p for p in pieces if p not in ("<s>", "<pad>")] + [">>es<<", "<pad>"]
    vocab = {p: i for i, p in enumerate(pieces)}
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    src.rename(out / "source.spm")
    tgt.rename(out / "target.spm")
    pad = vocab["<pad>"]
    cfg = MarianConfig(
        vocab_size=len(vocab),
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=ffn,
        decoder_ffn_dim=ffn,
        max_position_embeddings=128,
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=None,
        activation_function="swish",
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
    )
    torch.manual_seed(seed)
    model = MarianMTModel(cfg).eval()
    with torch.no_grad():
        model.model.shared.weight.normal_(0, embed_std)
        model.final_logits_bias.normal_(0, 0.5)
    model.save_pretrained(out)
    return out
