"""Tiny real artefacts for tests: SentencePiece models, a native checkpoint, a random Marian checkpoint."""

from __future__ import annotations

import json
import random
from pathlib import Path

import sentencepiece as spm
import torch

from model.loading.checkpoint import save_native
from model.network.config import ModelConfig
from model.network.transformer import Seq2SeqTransformer

EN = "the a cat dog house red big small runs sleeps eats green tree river city night day world hello good".split()
ES = "el la gato perro casa roja grande pequeño corre duerme come verde árbol río ciudad noche día mundo hola".split()


def corpus(words: list[str], n: int = 400, seed: int = 0) -> list[str]:
    """Synthetic sentences from a word list (with a few accented and non-Latin characters)."""
    rng = random.Random(seed)
    extra = ["¿qué?", "niño", "über", "café", "naïve", "日本", "—"]
    return [" ".join(rng.choice(words + extra) for _ in range(rng.randint(3, 12))) for _ in range(n)]


def train_spm(
    prefix: Path, lines: list[str], vocab_size: int, model_type: str = "unigram", byte_fallback: bool = True, **ids: int
) -> Path:
    """Train a tiny SentencePiece model (unigram with byte fallback unless told otherwise)."""
    text = prefix.with_suffix(".txt")
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(text),
        model_prefix=str(prefix),
        vocab_size=vocab_size,
        model_type=model_type,
        byte_fallback=byte_fallback,
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


def hf_shape(d_model: int = 32, layers: int = 2, heads: int = 4, ffn: int = 64, positions: int = 128) -> dict:
    """The size and dropout arguments of a tiny Hugging Face encoder-decoder config (Marian, M2M100, mBART)."""
    return dict(
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=ffn,
        decoder_ffn_dim=ffn,
        max_position_embeddings=positions,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
    )


def make_marian(
    out: Path,
    seed: int = 0,
    d_model: int = 32,
    layers: int = 2,
    heads: int = 4,
    ffn: int = 64,
    embed_std: float = 1.0,
    targets: tuple[str, ...] = (),
    generation: dict | None = None,
    byte_fallback: bool = True,
    positions: int = 128,
) -> Path:
    """A random Hugging Face MarianMTModel with its MarianTokenizer files (needs `transformers`); a small
    `embed_std` flattens its next-token distributions, so beams overtake each other. `targets` adds `>>xx<<` tokens
    (a multi-target OPUS-MT model); `generation` its generation_config.json (as OPUS-MT's: num_beams, ...);
    `byte_fallback=False` leaves rare characters without a piece, as real OPUS-MT vocabularies do; `positions` its
    max_position_embeddings (OPUS-MT: 512)."""
    from transformers import MarianConfig, MarianMTModel

    out.mkdir(parents=True, exist_ok=True)
    small = {} if byte_fallback else {"byte_fallback": False, "hard_vocab_limit": False}  # as many pieces as it finds
    src = train_spm(out / "src", corpus(EN), 300, **small)
    tgt = train_spm(out / "tgt", corpus(ES, seed=1), 300, **small)
    pieces = ["</s>", "<unk>"]
    for model_file in (src, tgt):
        sp = spm.SentencePieceProcessor(model_file=str(model_file))
        pieces += [sp.id_to_piece(i) for i in range(sp.get_piece_size()) if sp.id_to_piece(i) not in pieces]
    pieces = [p for p in pieces if p not in ("<s>", "<pad>")] + [f">>{t}<<" for t in targets] + ["<pad>"]
    vocab = {p: i for i, p in enumerate(pieces)}
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    src.rename(out / "source.spm")
    tgt.rename(out / "target.spm")
    pad = vocab["<pad>"]
    cfg = MarianConfig(
        vocab_size=len(vocab),
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=None,
        activation_function="swish",
        **hf_shape(d_model, layers, heads, ffn, positions),
    )
    torch.manual_seed(seed)
    model = MarianMTModel(cfg).eval()
    with torch.no_grad():
        model.model.shared.weight.normal_(0, embed_std)
        model.final_logits_bias.normal_(0, 0.5)
    if generation is not None:
        from transformers import GenerationConfig

        model.generation_config = GenerationConfig(decoder_start_token_id=pad, eos_token_id=0, pad_token_id=pad)
        model.generation_config.update(**{k: [[pad]] if v == "pad" else v for k, v in generation.items()})
    model.save_pretrained(out)
    return out


NLLB_CODES = ["eng_Latn", "spa_Latn", "fra_Latn", "deu_Latn", "zho_Hans", "zho_Hant"]


def _fairseq_spm(out: Path) -> Path:
    """A tiny BPE SentencePiece model laid out as fairseq's (<unk> 0, <s> 1, </s> 2), named as NLLB ships it."""
    train_spm(out / "sentencepiece.bpe", corpus(EN) + corpus(ES, seed=1), 300, "bpe", False)
    return out / "sentencepiece.bpe.model"


def m2m100_tokenizer(out: Path, tokenizer: str = "nllb"):
    """A tiny NLLB or M2M100 tokenizer saved in `out` (needs `transformers`, and protobuf to read the SentencePiece
    model); returns it."""
    from transformers import M2M100Tokenizer, NllbTokenizer

    out.mkdir(parents=True, exist_ok=True)
    model_file = _fairseq_spm(out)
    if tokenizer == "nllb":
        tok = NllbTokenizer.from_pretrained(str(out), extra_special_tokens=NLLB_CODES, src_lang="eng_Latn")
    else:
        sp = spm.SentencePieceProcessor(model_file=str(model_file))
        vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
        vocab.update((sp.id_to_piece(i), i + 1) for i in range(3, sp.get_piece_size()))
        (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        tok = M2M100Tokenizer(str(out / "vocab.json"), str(model_file), src_lang="en")
    tok.save_pretrained(out)
    return tok


def m2m100_ids() -> dict[str, int]:
    """The special token ids of an M2M100/NLLB generation config: decoder start and EOS </s>, pad, BOS <s>."""
    return {"decoder_start_token_id": 2, "eos_token_id": 2, "pad_token_id": 1, "bos_token_id": 0}


def make_m2m100(
    out: Path, tokenizer: str = "nllb", seed: int = 0, generation: dict | None = None, embed_std: float = 0.5
) -> Path:
    """A random M2M100ForConditionalGeneration (the NLLB-200 network) with an NLLB or M2M100 tokenizer saved beside
    it (needs `transformers`, and protobuf to read the SentencePiece model)."""
    from transformers import GenerationConfig, M2M100Config, M2M100ForConditionalGeneration

    tok = m2m100_tokenizer(out, tokenizer)
    size = max([*tok.get_vocab().values(), *getattr(tok, "lang_token_to_id", {}).values()]) + 9  # + made-up words
    cfg = M2M100Config(vocab_size=size, **hf_shape())
    torch.manual_seed(seed)
    model = M2M100ForConditionalGeneration(cfg).eval()
    with torch.no_grad():  # outputs that vary with the input and position (sometimes ending early) need big weights
        for module in model.model.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.normal_(0, 3 / module.weight.shape[1] ** 0.5)
        embed = model.model.shared.weight
        embed.normal_(0, embed_std)
        model.model.decoder.layer_norm.bias.copy_(3 * embed[2] / embed[2].norm())
    model.generation_config = GenerationConfig(**m2m100_ids(), **(generation or {}))
    model.save_pretrained(out)
    return out
