"""Stage 9: assemble the two-way training pairs work/train.{src,tgt} (each source line starts with its target's
`>>es<<` or `>>en<<` code) and train the shared SentencePiece model work/spm.model."""

import argparse
import random
import re
import shutil
import time
import unicodedata
from pathlib import Path

import sentencepiece as spm

from training.common import WORK, everyday_held_out, n_words, read_lines, write_lines

SEED = 42
VOCAB = 8000
# name: copies in the training data, per direction. Human pairs come first (they win when a source side repeats);
# the phrasebook (everyday language, short) and the documentation and help pages (human prose, few) are repeated;
# the catalogs already outnumber the distilled pairs. The phrasebook's share stays about a quarter (6 copies of 11,842
# pairs and their casing variants since 2026-11-28's second build, 9 of 6,843 and 12 of 3,604 before): more of it
# would cost the technical prose.
SOURCES = {"phrasebook": 6, "docs": 3, "helpdocs": 3, "catalogs": 1, "bible": 1, "dictionary": 1, "distilled": 1}
HELD_OUT = ("dev", "test")  # Handbook pairs; the everyday phrases (both sets, both sides) are held out too
# Casing and punctuation variants of short pairs (what people type: "hello world", "HELLO WORLD", "como estas"):
# sources whose pairs get them, the share of their pairs that do (when short enough) and how many variants each.
AUGMENT = {"phrasebook": (1.0, 2), "dictionary": (0.5, 1), "catalogs": (0.15, 1)}
SHORT = 8  # words


def key(text: str) -> str:
    """Loose matching key: lowercase letters and digits only."""
    return re.sub(r"[^\w]+", "", text.lower())


def keep_pair(en: str, es: str) -> bool:
    """Length filter: 1..80 words per side and a word ratio within 1:2.5."""
    a, b = n_words(en), n_words(es)
    return 1 <= a <= 80 and 1 <= b <= 80 and 0.4 <= b / a <= 2.5


def held_out_keys() -> set[str]:
    """Keys of both sides of the Handbook dev/test pairs, of both everyday phrase sets and of every alternative of the
    phrases people type first."""
    held = {key(line) for name in HELD_OUT for lang in ("en", "es") for line in read_lines(WORK / f"{name}.{lang}")}
    return held | {key(phrase) for phrase in everyday_held_out()}


def _strip_end(text: str) -> str:
    return text[:-1] if text.endswith(".") else text


def _no_accents(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def variants(src: str, tgt: str, target: str, rng: random.Random, n: int) -> list[tuple[str, str]]:
    """`n` ways people type a short source, each with the translation they expect: the first is all lowercase
    without the final full stop, the others drawn from all capitals, Title Case, no final punctuation and, for a
    Spanish source, without ¿ ¡ (and accents)."""
    lower = (_strip_end(src.lower()), _strip_end(tgt.lower()))
    others = [
        (src.upper(), tgt.upper()),
        (" ".join(w[:1].upper() + w[1:] for w in src.split()), tgt),
        (src.rstrip(".!?"), tgt),
    ]
    if target == "en":  # Spanish as people type it on an English keyboard
        plain = src.replace("¿", "").replace("¡", "")
        others += [(plain, tgt), (_no_accents(plain).lower().rstrip(".!?"), tgt.lower().rstrip("."))]
    picked = [lower, *rng.sample(others, min(n - 1, len(others)))]
    return [(s, t) for s, t in dict(picked).items() if s and t and s != src]


def assemble(rng: random.Random) -> list[tuple[str, str, str]]:
    """(source, target, target language) for both directions: merge the sources, drop held-out sides, deduplicate
    on the source, length-filter, add casing variants, weight and shuffle."""
    held = held_out_keys()
    triples = []
    for target in ("es", "en"):
        seen: set[str] = set()
        for name in SOURCES:
            en_lines, es_lines = read_lines(WORK / f"{name}.en"), read_lines(WORK / f"{name}.es")
            counts = {"read": len(en_lines), "held-out": 0, "duplicate": 0, "length": 0}
            kept, extra = [], []
            for en, es in zip(en_lines, es_lines, strict=True):
                src, tgt = (en, es) if target == "es" else (es, en)
                k = key(src)
                if k in held or key(tgt) in held:
                    counts["held-out"] += 1
                elif k in seen:
                    counts["duplicate"] += 1
                elif not keep_pair(en, es):
                    counts["length"] += 1
                else:
                    seen.add(k)
                    kept.append((src, tgt))
            share, n = AUGMENT.get(name, (0.0, 0))
            for src, tgt in kept:
                if n and n_words(src) <= SHORT and rng.random() < share:
                    extra += [v for v in variants(src, tgt, target, rng, n) if key(v[0]) not in held]
            copies = SOURCES[name]
            triples += [(s, t, target) for s, t in kept + extra] * copies
            print(
                f"->{target} {name:10s} " + ", ".join(f"{k} {v}" for k, v in counts.items()),
                f"kept {len(kept)}, variants {len(extra)}, x{copies}",
            )
    rng.shuffle(triples)
    return triples


def train_spm(lines: list[str]) -> None:
    """Train a shared unigram SentencePiece model on both sides of the training pairs."""
    text = WORK / "spm_input.txt"
    write_lines(text, lines)
    spm.SentencePieceTrainer.train(
        input=str(text),
        model_prefix=str(WORK / "spm"),
        vocab_size=VOCAB,
        model_type="unigram",
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        normalization_rule_name="nmt_nfkc",
        character_coverage=0.9995,
        input_sentence_size=1_000_000,
        shuffle_input_sentence=True,
        num_threads=2,
        minloglevel=2,
    )
    text.unlink()


def main() -> None:
    """Write the training pairs, train (or copy) the SentencePiece model and print counts."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--spm", type=Path, help="reuse this SentencePiece model (to continue a model trained with it)")
    args = p.parse_args()
    start = time.time()
    triples = assemble(random.Random(SEED))
    write_lines(WORK / "train.src", [f">>{lang}<< {src}" for src, _, lang in triples])
    write_lines(WORK / "train.tgt", [tgt for _, tgt, _ in triples])
    print(f"train: {len(triples)} pairs with repeats ({time.time() - start:.0f}s)")
    if args.spm:
        shutil.copy(args.spm, WORK / "spm.model")
    else:
        train_spm([side for src, tgt, _ in triples for side in (src, tgt)])
    sp = spm.SentencePieceProcessor(model_file=str(WORK / "spm.model"))
    for lang in ("es", "en"):
        tokens = sum(len(ids) for ids in sp.encode([tgt for _, tgt, t in triples if t == lang]))
        print(f"->{lang}: {sum(t == lang for *_, t in triples)} pairs, {tokens} target tokens")
    print(f"spm: {sp.get_piece_size()} pieces, pad={sp.pad_id()} eos={sp.eos_id()} unk={sp.unk_id()} bos={sp.bos_id()}")


if __name__ == "__main__":
    main()
