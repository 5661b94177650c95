"""Stage 5: human pairs from the Spanish gettext catalogs fetched by fetch_catalogs.sh into work/catalogs.{en,es}."""

import re
import time
from collections import Counter, defaultdict
from pathlib import Path

import polib

from training.common import BAD, WORK, clean, sentence_pairs, write_lines

ACCEL = re.compile(r"(?<!\w)_(?=\w)|&(?!#?\w+;)(?=\w)|\s*\(_?\w\)$")  # _File, &File, "Archivo (_F)"
FORMAT = re.compile(r"%[-+ #0-9.lhqjzt]*[a-zA-Z%]|%\d|%\(|\$\{?\w|</?[a-zA-Z][^<>]*>")  # printf, KDE, shell, tags
ONE_WORD_VOTES = 3  # a single word is kept only if this many catalogs agree on its translation


def normalise(text: str) -> str | None:
    """Plain text of a message (accelerators removed), or None for format strings, markup and code."""
    text = ACCEL.sub("", text)
    if FORMAT.search(text):
        return None
    text = clean(text)  # also unescapes &amp; and the like
    letters = sum(ch.isalpha() for ch in text)
    if not text or BAD.search(text) or letters < 0.6 * len(text) or "\\" in text:
        return None
    return text


def messages(path: Path) -> list[tuple[str, str]]:
    """(msgid, msgstr) of one .mo catalog, singular forms only, both sides normalised."""
    try:
        entries = polib.mofile(str(path))
    except (OSError, ValueError, UnicodeDecodeError):
        return []
    out = []
    for e in entries:
        es = e.msgstr_plural.get(0, "") if e.msgid_plural else e.msgstr
        en, es = normalise(e.msgid), normalise(es)
        if en and es and en != es:
            out.append((en, es))
    return out


def vote(files: list[Path]) -> list[tuple[str, str]]:
    """Each English message with its most frequent Spanish across catalogs; one-word ones need agreement."""
    votes: dict[str, Counter] = defaultdict(Counter)
    for path in files:
        for en, es in set(messages(path)):
            for a, b in sentence_pairs(en, es):
                votes[a][b] += 1
    pairs = []
    for en, counter in votes.items():
        es, n = counter.most_common(1)[0]
        if len(en.split()) > 1 or n >= ONE_WORD_VOTES:
            pairs.append((en, es))
    return sorted(pairs)


def main() -> None:
    """Read every catalog, vote, and write the pairs."""
    start = time.time()
    files = sorted((WORK / "mo").glob("*/*.mo"))
    pairs = vote(files)
    write_lines(WORK / "catalogs.en", [en for en, _ in pairs])
    write_lines(WORK / "catalogs.es", [es for _, es in pairs])
    print(f"{len(files)} catalogs -> {len(pairs)} pairs ({time.time() - start:.0f}s)")


if __name__ == "__main__":
    main()
