"""Stage 9: assemble work/train.{en,es} and train the shared SentencePiece model work/spm.model."""

import argparse
import random
import re
import shutil
import time
from pathlib import Path

import sentencepiece as spm

from training.common import EVERYDAY, WORK, n_words, read_lines, read_tsv, write_lines

SEED = 42
VOCAB = 8000
# name: copies in the training data. Human pairs come first (they win when an English side repeats); the phrasebook
# (everyday language, short) and the documentation and help pages (human prose, few) are repeated; the catalogs
# already outnumber the distilled pairs.
SOURCES = {"phrasebook": 15, "docs": 3, "helpdocs": 3, "catalogs": 1, "bible": 1, "dictionary": 1, "distilled": 1}
HELD_OUT = ("dev", "test")  # Handbook pairs; the everyday phrases are held out too


def key(text: str) -> str:
    """Loose matching key: lowercase letters and digits only."""
    return re.sub(r"[^\w]+", "", text.lower())


def keep_pair(en: str, es: str) -> bool:
    """Length filter: 1..80 words per side and a word ratio within 1:2.5."""
    a, b = n_words(en), n_words(es)
    return 1 <= a <= 80 and 1 <= b <= 80 and 0.4 <= b / a <= 2.5


def assemble() -> list[tuple[str, str]]:
    """Merge the sources, drop held-out English, deduplicate, length-filter, weight and shuffle."""
    held = {key(en) for name in HELD_OUT for en in read_lines(WORK / f"{name}.en")}
    held |= {key(en) for en, _ in read_tsv(EVERYDAY)}
    seen: set[str] = set()
    pairs = []
    for name in SOURCES:
        kept = []
        en_lines, es_lines = read_lines(WORK / f"{name}.en"), read_lines(WORK / f"{name}.es")
        counts = {"read": len(en_lines), "held-out": 0, "duplicate": 0, "length": 0}
        for en, es in zip(en_lines, es_lines, strict=True):
            k = key(en)
            if k in held:
                counts["held-out"] += 1
            elif k in seen:
                counts["duplicate"] += 1
            elif not keep_pair(en, es):
                counts["length"] += 1
            else:
                seen.add(k)
                kept.append((en, es))
        pairs += kept * SOURCES[name]
        print(f"{name:10s} " + ", ".join(f"{k} {v}" for k, v in counts.items()) + f", kept {len(kept)}")
    random.Random(SEED).shuffle(pairs)
    return pairs


def train_spm(pairs: list[tuple[str, str]]) -> None:
    """Train a shared unigram SentencePiece model on both sides of the training pairs."""
    text = WORK / "spm_input.txt"
    write_lines(text, [side for pair in pairs for side in pair])
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
    pairs = assemble()
    write_lines(WORK / "train.en", [en for en, _ in pairs])
    write_lines(WORK / "train.es", [es for _, es in pairs])
    print(f"train: {len(pairs)} pairs with repeats ({time.time() - start:.0f}s)")
    if args.spm:
        shutil.copy(args.spm, WORK / "spm.model")
    else:
        train_spm(pairs)
    sp = spm.SentencePieceProcessor(model_file=str(WORK / "spm.model"))
    tokens = sum(len(sp.encode(es)) for _, es in pairs)
    print(
        f"spm: {sp.get_piece_size()} pieces, pad={sp.pad_id()} eos={sp.eos_id()} unk={sp.unk_id()} "
        f"bos={sp.bos_id()}; {tokens} Spanish target tokens ({time.time() - start:.0f}s)"
    )


if __name__ == "__main__":
    main()
