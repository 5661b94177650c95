"""Tokenizers of Hugging Face checkpoints from their files, without `transformers`: SentencePiece pieces mapped to ids
through the checkpoint's vocabulary (Marian and M2M100 vocab.json, NLLB and mBART-50 tokenizer.json), with the
language tokens each one knows."""

from __future__ import annotations

from pathlib import Path

from model.loading.hf import read_json
from model.loading.languages import split_token
from model.loading.tokenizer import Tokenizer

# fairseq's M2M-100 language list: its `__xx__` tokens follow vocab.json in this order when no file names them
M2M100_CODES = (
    "af am ar ast az ba be bg bn br bs ca ceb cs cy da de el en es et fa ff fi fr fy ga gd gl gu ha he hi hr ht hu "
    "hy id ig ilo is it ja jv ka kk km kn ko lb lg ln lo lt lv mg mk ml mn mr ms my ne nl no ns oc or pa pl ps pt ro "
    "ru sd si sk sl so sq sr ss su sv sw ta th tl tn tr uk ur uz vi wo xh yi yo zh zu"
).split()


def _added_tokens(path: Path) -> dict[str, int]:
    """Tokens added on top of the base vocabulary, as tokenizer.json or tokenizer_config.json list them."""
    added = {t["content"]: t["id"] for t in read_json(path / "tokenizer.json").get("added_tokens", [])}
    decoder = read_json(path / "tokenizer_config.json").get("added_tokens_decoder", {})
    added.update({t["content"]: int(i) for i, t in decoder.items()})
    return added


def _listed_specials(path: Path) -> list[str]:
    """additional_special_tokens of special_tokens_map.json or tokenizer_config.json (M2M100's language tokens)."""
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        tokens = read_json(path / name).get("additional_special_tokens") or []
        if tokens:
            return [t["content"] if isinstance(t, dict) else t for t in tokens]
    return []


def _m2m100_vocab(path: Path) -> tuple[dict[str, int], dict[str, int]]:
    """vocab.json, and the `__xx__` language tokens after it (named by the files, else fairseq's list)."""
    vocab = read_json(path / "vocab.json")
    added = {t: i for t, i in _added_tokens(path).items() if t not in vocab}
    if not any(split_token(t) for t in added):
        config = read_json(path / "tokenizer_config.json")
        listed = [t for t in _listed_specials(path) if t.startswith("__")]
        if not listed and config.get("language_codes", "m2m100") != "m2m100":
            raise ValueError(f"{path}: M2M100 language codes {config['language_codes']!r} are not known here")
        tokens = listed or [f"__{c}__" for c in M2M100_CODES]
        added = {t: len(vocab) + i for i, t in enumerate(tokens)}
    return vocab, added


def _fairseq_vocab(path: Path) -> tuple[dict[str, int], dict[str, int]]:
    """tokenizer.json's vocabulary (a BPE dict or a Unigram list) and its added tokens (NLLB, mBART-50)."""
    model = read_json(path / "tokenizer.json").get("model", {})
    vocab = model.get("vocab")
    if not vocab:
        raise FileNotFoundError(f"{path}: tokenizer.json with a vocabulary is needed for this checkpoint")
    if isinstance(vocab, list):  # Unigram: [[piece, score], ...] in id order
        vocab = {piece: i for i, (piece, _) in enumerate(vocab)}
    return vocab, _added_tokens(path)


def hf_tokenizer(path: Path, kind: str) -> tuple[Tokenizer, dict[str, int]]:
    """The checkpoint's tokenizer and its language tokens (token -> id, in id order)."""
    if kind == "marian":
        source, target, base = path / "source.spm", path / "target.spm", read_json(path / "vocab.json")
        added = {t: i for t, i in base.items() if t.startswith(">>")}
    else:
        config = read_json(path / "tokenizer_config.json")
        source = target = path / config.get("spm_file", "sentencepiece.bpe.model")
        base, added = _m2m100_vocab(path) if (path / "vocab.json").exists() else _fairseq_vocab(path)
    vocab = {**base, **added}
    languages = dict(sorted(((t, i) for t, i in added.items() if split_token(t)), key=lambda item: item[1]))
    specials = frozenset(added.values()) | frozenset(vocab[t] for t in ("<s>", "<mask>") if t in vocab)
    tokenizer = Tokenizer.from_files(source, target if target != source else None, vocab, specials=specials)
    return tokenizer, languages
