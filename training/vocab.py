"""Teach the shared SentencePiece model the characters it cannot spell, and grow an exported model to match.

The vocabulary (8,000 pieces, trained at 99.95% character coverage on mostly technical text, no byte fallback) has no
piece for "/", "X", "Z", "%", "[", "¡", "Á", "É", "Ú", "Ñ", "ü"...: each became <unk> and vanished from the output
("Abrir etchosts en el editor ML." for "Open /etc/hosts in the XML editor."). `spm` adds one piece per character of
the corpus that the model maps to <unk> (most frequent first, and the characters people type in Spanish whatever their
count) up to the next multiple of 64 of the whole vocabulary; `model` grows an exported model made with the old
pieces: the new pieces' rows go after the old pieces (a letter's starts as its lower-case form's row, any other
character's as <unk>'s, which the model read in its place), the language tokens after them.

    python -m training.vocab spm   # work/spm.model grown in place (the old one kept as spm.8000.model)
    python -m training.vocab model --model training/work/cand3576 --out training/work/grown
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections import Counter
from pathlib import Path

import sentencepiece as spm
import torch
from safetensors.torch import load_file
from sentencepiece import sentencepiece_model_pb2

from model.loading.checkpoint import save_native
from model.network.config import ModelConfig
from model.network.transformer import Seq2SeqTransformer
from training.common import WORK

ALWAYS = "¡¿ÁÉÍÓÚÑÜáéíóúñü€£°«»/%&@#$[]{}<>+*=|~^`_XZ"  # typed in Spanish and English text, whatever the corpus holds
ROW_MULTIPLE = 64  # the grown vocabulary (pieces and language tokens) is a multiple of this (GPU tiles, top-k chunks)
MIN_COUNT = 20  # a character seen fewer times in the corpus is not worth a row


def unspelled(sp: spm.SentencePieceProcessor, counts: Counter) -> list[str]:
    """Characters the model maps to <unk> after its normalization, ALWAYS first, then by count in the corpus."""
    out: list[str] = []
    for ch in [*ALWAYS, *(c for c, n in counts.most_common() if n >= MIN_COUNT)]:
        if ch in out or not ch.isprintable() or ch.isspace() or sp.normalize(ch).lstrip("\u2581") != ch:
            continue
        if sp.unk_id() in sp.encode(ch):
            out.append(ch)
    return out


def grow_spm(path: Path, corpus: list[Path], languages: int) -> list[str]:
    """Append a piece for each unspelled character to the SentencePiece model at `path`, as many as fit up to a
    multiple of 64 rows (with `languages` language tokens after the pieces), the corpus's rarest left out; the
    characters added."""
    sp = spm.SentencePieceProcessor(model_file=str(path))
    counts: Counter = Counter()
    for f in corpus:
        with f.open(encoding="utf-8") as lines:
            for line in lines:
                counts.update(line)
    chars = unspelled(sp, counts)
    room = -(sp.get_piece_size() + languages) % ROW_MULTIPLE
    while room < sum(ch in ALWAYS for ch in chars):  # the rarest of the corpus's own make way
        room += ROW_MULTIPLE
    chars = chars[:room]
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(path.read_bytes())
    score = min(p.score for p in proto.pieces if p.type == p.NORMAL) - 1.0  # single characters with no alternative
    for ch in chars:
        proto.pieces.add(piece=ch, score=score, type=sentencepiece_model_pb2.ModelProto.SentencePiece.NORMAL)
    path.write_bytes(proto.SerializeToString())
    return chars


def grow_model(model_dir: Path, spm_path: Path, out: Path) -> list[str]:
    """Write `model_dir` grown to the pieces of `spm_path` (which extends the model's own) into `out`; the new
    pieces."""
    meta = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    cfg = ModelConfig.from_dict(meta["architecture"])
    tokens: dict[str, int] = meta.get("language_tokens", {})
    old = cfg.src_vocab_size - len(tokens)  # the old pieces
    sp = spm.SentencePieceProcessor(model_file=str(spm_path))
    added = [sp.id_to_piece(i) for i in range(old, sp.get_piece_size())]
    size = sp.get_piece_size() + len(tokens)
    state = load_file(str(model_dir / "model.safetensors"))
    grown: dict[str, torch.Tensor] = {}
    for name, w in state.items():
        if w.shape[:1] != (cfg.src_vocab_size,):
            grown[name] = w
            continue
        rows, noise = [], 0.01 * w.float().std().item()
        for ch in added:
            base = sp.piece_to_id(ch.lower()) if ch.lower() != ch else cfg.unk_id
            base = base if base < old else cfg.unk_id  # a letter whose lower case is new too ("Ü"): as <unk>
            rows.append(w[base] + noise * torch.randn_like(w[base].float()).to(w.dtype))
        grown[name] = torch.cat([w[:old], torch.stack(rows), w[old:]]) if rows else w
    new_cfg = ModelConfig.from_dict({**cfg.to_dict(), "src_vocab_size": size, "tgt_vocab_size": size})
    model = Seq2SeqTransformer(new_cfg)
    model.load_state_dict({**model.state_dict(), **grown}, strict=True)
    new_tokens = {code: sp.get_piece_size() + i for i, code in enumerate(tokens)}
    save_native(model.half(), spm_path, out, meta["source_lang"], meta["target_lang"], new_tokens or None,
                casing=meta.get("casing"))  # fmt: skip
    if (model_dir / "training.json").exists():
        shutil.copyfile(model_dir / "training.json", out / "training.json")
    return added


def main() -> None:
    """Grow work/spm.model in place, or an exported model to it."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("spm", "model"))
    p.add_argument("--model", type=Path, help="(model) an exported model made with the old pieces")
    p.add_argument("--out", type=Path, help="(model) where to write it grown")
    p.add_argument("--languages", type=int, default=2, help="(spm) language tokens after the pieces")
    args = p.parse_args()
    if args.what == "spm":
        path = WORK / "spm.model"
        before = spm.SentencePieceProcessor(model_file=str(path)).get_piece_size()
        shutil.copyfile(path, WORK / f"spm.{before}.model")
        added = grow_spm(path, [WORK / "train.src", WORK / "train.tgt"], args.languages)
        print(f"{len(added)} pieces added after {before}: {''.join(added)}")
    else:
        added = grow_model(args.model, WORK / "spm.model", args.out)
        print(f"{args.out}: {len(added)} rows added: {''.join(added)}")


if __name__ == "__main__":
    main()
