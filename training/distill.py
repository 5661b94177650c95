"""Stage 2: translate work/english.txt with Apertium eng-spa into work/distilled.{en,es}."""

import argparse
import re
import subprocess
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from training.common import WORK, clean, read_lines, write_lines

CHUNK = 4000
WORKERS = 2
BLANK = re.compile(r"\n[ \t]*\n")
LOWER_UNKNOWN = re.compile(r"[*#@][a-záéíóúñü]")
MARK = re.compile(r"[*#@](?=\w)")
CAPITAL_UNKNOWN = re.compile(r"[*#@]([A-ZÁÉÍÓÚÑ][\w'-]*)")
WORD = re.compile(r"[A-Za-z][\w'-]*")
SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,;:!?])")
# Systematic teacher errors, found where the trained model repeated them: (English, Spanish) patterns of a pair whose
# Spanish is Apertium's mistake. "world" the noun as the adjective "mundial" (139 of 1,343 two-way pairs with "world";
# the model then wrote "Hello world" -> "Hola mundial"), "very much" as "muy mucho".
TEACHER_ERRORS = (
    (re.compile(r"\bworld\b", re.I), re.compile(r"^(?!.*\bmundos?\b).*\bmundial(es)?\b", re.I)),
    (re.compile(r""), re.compile(r"\bmuy mucho\b", re.I)),
)


def apertium(sentences: list[str]) -> list[str]:
    """Translate sentences with `apertium eng-spa`, one blank-line-separated block per sentence."""
    text = "".join(f"{s}\n\n" for s in sentences)
    out = subprocess.run(["apertium", "eng-spa"], input=text, capture_output=True, text=True, check=True).stdout
    blocks = [clean(b) for b in BLANK.split(out.strip())]
    if len(blocks) == len(sentences):
        return blocks
    if len(sentences) == 1:
        return [clean(out)]
    half = len(sentences) // 2  # alignment lost: retry the halves separately
    return apertium(sentences[:half]) + apertium(sentences[half:])


def casing(english: list[str]) -> tuple[Counter, Counter]:
    """Count how often each word (lowercased key) is written lowercase / capitalised mid-sentence."""
    lower: Counter = Counter()
    capital: Counter = Counter()
    for sentence in english:
        for word in WORD.findall(sentence)[1:]:
            (lower if word.islower() else capital)[word.lower()] += 1
    return lower, capital


def keep(spanish: str, lower: Counter | None = None, capital: Counter | None = None) -> str | None:
    """Return the Spanish with name marks stripped, or None if it has an unknown word that is not a name.

    With casing counts (--strict-names), a capitalised unknown word counts as a name only if the English
    writes it capitalised mid-sentence at least as often as lowercase (drops a sentence-initial "*Slit").
    """
    if not spanish or LOWER_UNKNOWN.search(spanish):
        return None
    if lower is not None and capital is not None:
        for word in CAPITAL_UNKNOWN.findall(spanish):
            if capital[word.lower()] < max(1, lower[word.lower()]):
                return None
    return SPACE_BEFORE_PUNCT.sub(r"\1", MARK.sub("", spanish))


def mistaken(english: str, spanish: str) -> bool:
    """Whether a pair holds one of the teacher's known systematic errors (`TEACHER_ERRORS`)."""
    return any(en.search(english) and es.search(spanish) for en, es in TEACHER_ERRORS)


def main() -> None:
    """Translate in parallel chunks, filter the unknown-word pairs and write the parallel files."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--strict-names", action="store_true", help="also drop capitalised non-name unknowns")
    args = parser.parse_args()
    start = time.time()
    english = read_lines(WORK / "english.txt")
    chunks = [english[i : i + CHUNK] for i in range(0, len(english), CHUNK)]
    with ThreadPoolExecutor(WORKERS) as pool:
        spanish = [s for block in pool.map(apertium, chunks) for s in block]
    counts = casing(english) if args.strict_names else (None, None)
    pairs = [(en, None if mistaken(en, es) else keep(es, *counts)) for en, es in zip(english, spanish, strict=True)]
    kept = [(en, es) for en, es in pairs if es]
    write_lines(WORK / "distilled.en", [en for en, _ in kept])
    write_lines(WORK / "distilled.es", [es for _, es in kept])
    elapsed = time.time() - start
    print(f"translated {len(english)} sentences in {elapsed:.0f}s ({len(english) / elapsed:.0f}/s)")
    print(f"kept {len(kept)} pairs ({100 * len(kept) / max(1, len(english)):.1f}%)")


if __name__ == "__main__":
    main()
