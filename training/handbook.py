"""Stage 4: align Debian Handbook en-US/es-ES sentences into held-out work/{dev,test}.{en,es}."""

import random
import re
import time
from pathlib import Path

from training.common import HANDBOOK, WORK, good_sentence, html_paragraphs, split_sentences, write_lines

DEV_SIZE = 500
SEED = 1234
SPANISH_HINT = re.compile(r"\b(el|la|los|las|de|del|que|en|es|un|una|para|se|por|con|y|su|sus)\b", re.I)


def confident(en: str, es: str) -> bool:
    """True for a translated, prose-like pair with a plausible Spanish/English length ratio."""
    return (
        en != es
        and good_sentence(en)
        and good_sentence(es, hi=60)
        and 0.8 <= len(es) / len(en) <= 1.8
        and bool(SPANISH_HINT.search(es))
    )


def align_html(en_path: Path, es_path: Path) -> list[tuple[str, str]]:
    """Pair paragraphs 1:1 if both pages have as many, then sentences 1:1 in paragraphs with equal counts."""
    en_paras, es_paras = html_paragraphs(en_path), html_paragraphs(es_path)
    if len(en_paras) != len(es_paras):
        return []  # paragraph structure differs: not confident
    pairs = []
    for en_para, es_para in zip(en_paras, es_paras, strict=True):
        en_sents, es_sents = split_sentences(en_para), split_sentences(es_para)
        if len(en_sents) == len(es_sents):
            pairs.extend((en, es) for en, es in zip(en_sents, es_sents, strict=True) if confident(en, es))
    return pairs


def aligned_pairs() -> list[tuple[str, str]]:
    """Every Handbook chapter aligned with its es-ES translation."""
    pairs = []
    for en_path in sorted((HANDBOOK / "en-US").glob("*.html")):
        es_path = HANDBOOK / "es-ES" / en_path.name
        if es_path.exists():
            pairs.extend(align_html(en_path, es_path))
    return pairs


def main() -> None:
    """Deduplicate by English, shuffle with a fixed seed and split into dev and test."""
    start = time.time()
    unique = dict(aligned_pairs())
    pairs = sorted(unique.items())
    random.Random(SEED).shuffle(pairs)
    splits = {"dev": pairs[:DEV_SIZE], "test": pairs[DEV_SIZE:]}
    for name, split in splits.items():
        write_lines(WORK / f"{name}.en", [en for en, _ in split])
        write_lines(WORK / f"{name}.es", [es for _, es in split])
        print(f"{name}: {len(split)} pairs")
    print(f"({time.time() - start:.0f}s)")


if __name__ == "__main__":
    main()
