"""Random Marian (OPUS-MT layout) models for the benchmarks: one builder for every shape, in memory or on disk with
tokenizer files, and random source ids.

    python -m bench.marian /tmp/opus-mt-en-de                  # OPUS-MT shape on disk; the pair comes from the name
    python -m bench.marian /tmp/opus-mt-en-de --beam-default   # with OPUS-MT's generation config (bench/gpu/check.sh)
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import torch

EOS = 0  # Marian layout: </s> 0, <unk> 1, <pad> = vocab - 1 = decoder start
FIRST = 2  # the first id that is no special token
CPU = {"d_model": 256, "layers": 3, "heads": 4, "ffn": 1024, "vocab": 8000}  # bench.model_speed
OPUS = {"d_model": 512, "layers": 6, "heads": 8, "ffn": 2048, "vocab": 58101}  # opus-mt-en-de and its kin
TINY = {"d_model": 64, "layers": 2, "heads": 4, "ffn": 128, "vocab": 1000}


def describe(shape: dict) -> str:
    """The shape in words."""
    return (
        f"d_model {shape['d_model']}, {shape['layers']}+{shape['layers']} layers, {shape['heads']} heads, "
        f"ffn {shape['ffn']}, vocab {shape['vocab']}, swish"
    )


def hf_model(shape: dict, seed: int = 0, **config):
    """A random `MarianMTModel` of `shape` in eval mode (float32, CPU); `config` overrides MarianConfig fields."""
    from transformers import MarianConfig, MarianMTModel

    pad = shape["vocab"] - 1
    cfg = MarianConfig(
        vocab_size=shape["vocab"],
        decoder_vocab_size=shape["vocab"],
        d_model=shape["d_model"],
        encoder_layers=shape["layers"],
        decoder_layers=shape["layers"],
        encoder_attention_heads=shape["heads"],
        decoder_attention_heads=shape["heads"],
        encoder_ffn_dim=shape["ffn"],
        decoder_ffn_dim=shape["ffn"],
        activation_function="swish",
        max_position_embeddings=512,
        scale_embedding=True,
        pad_token_id=pad,
        eos_token_id=EOS,
        decoder_start_token_id=pad,
        forced_eos_token_id=None,
        **config,
    )  # fmt: skip  (forced_eos None: the default 0 would force EOS as the last forced token)
    torch.manual_seed(seed)
    model = MarianMTModel(cfg).eval()
    with torch.no_grad():  # the decoder starts from the pad row: zero, as in real OPUS-MT (CTranslate2 assumes it)
        model.model.shared.weight[pad].zero_()
    return model


def ours_of(hf) -> torch.nn.Module:
    """Our network with the weights of a `MarianMTModel` (as model.loading.checkpoint loads its directory)."""
    from model.loading.checkpoint import hf_network
    from model.loading.hf import hf_config

    return hf_network(hf_config(hf.config.to_dict()), hf.state_dict()).eval()


def random_lines(rng: random.Random, lines: int = 400) -> list[str]:
    """Lines of random lowercase words (one sentence each): what the tiny SentencePiece models are trained on."""
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 8))) for _ in range(300)]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(5, 15))) for _ in range(lines)]


def write_tokenizer(out: Path, vocab_size: int, seed: int = 0) -> None:
    """source.spm / target.spm (tiny unigram models) and a vocab.json of `vocab_size` entries, <pad> last."""
    import sentencepiece as spm

    rng = random.Random(seed)
    corpus = out / "corpus.txt"
    corpus.write_text("\n".join(random_lines(rng)) + "\n", encoding="utf-8")
    pieces: list[str] = []
    for side in ("source", "target"):
        spm.SentencePieceTrainer.train(
            input=str(corpus), model_prefix=str(out / side), vocab_size=150, model_type="unigram",
            character_coverage=1.0, eos_id=EOS, unk_id=1, bos_id=-1, pad_id=-1, minloglevel=2,
        )  # fmt: skip
        (out / f"{side}.model").replace(out / f"{side}.spm")
        (out / f"{side}.vocab").unlink()
        proc = spm.SentencePieceProcessor(model_file=str(out / f"{side}.spm"))
        pieces += [p for p in (proc.id_to_piece(i) for i in range(proc.get_piece_size())) if p not in pieces]
    corpus.unlink()
    vocab = {p: i for i, p in enumerate(pieces)}
    while len(vocab) < vocab_size - 1:  # filler pieces, then <pad> last
        vocab[f"\u2581w{len(vocab)}"] = len(vocab)
    vocab["<pad>"] = vocab_size - 1
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")


def write(out: Path, shape: dict = CPU, seed: int = 0, **config) -> Path:
    """A random Marian checkpoint directory (`save_pretrained` + tokenizer files) that the server and CTranslate2's
    converter load; `config` overrides MarianConfig fields (e.g. num_beams=4)."""
    out.mkdir(parents=True, exist_ok=True)
    write_tokenizer(out, shape["vocab"], seed)
    hf_model(shape, seed, **config).save_pretrained(out)
    return out


def write_opus_mt(out: Path, shape: dict = CPU) -> Path:
    """A random Marian checkpoint with OPUS-MT's generation config (beam 4, max_length 512, pad never generated)."""
    path = write(out, shape)
    pad = shape["vocab"] - 1
    gen = json.loads((path / "generation_config.json").read_text(encoding="utf-8"))
    gen |= {"num_beams": 4, "max_length": 512, "bad_words_ids": [[pad]]}
    (path / "generation_config.json").write_text(json.dumps(gen, indent=2), encoding="utf-8")
    return path


def sources(n: int, vocab: int, seed: int = 1, eos: int = EOS, first: int = FIRST) -> list[list[int]]:
    """Random source ids, 10-40 tokens each with `eos` last; ids from `first` up, never the last (Marian's pad)."""
    rng = random.Random(seed)
    return [[rng.randrange(first, vocab - 1) for _ in range(rng.randint(9, 39))] + [eos] for _ in range(n)]


def main(argv: list[str] | None = None) -> int:
    """Write an OPUS-MT-shaped checkpoint (or --tiny) to the given folder."""
    p = argparse.ArgumentParser(prog="python -m bench.marian", description=main.__doc__)
    p.add_argument("out", type=Path)
    p.add_argument("--tiny", action="store_true", help="d_model 64, 2+2 layers, vocab 1000 (checks the script)")
    p.add_argument("--beam-default", action="store_true", help="OPUS-MT's generation config: num_beams 4")
    args = p.parse_args(argv)
    shape = TINY if args.tiny else OPUS
    print(write_opus_mt(args.out, shape) if args.beam_default else write(args.out, shape))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
