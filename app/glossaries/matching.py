"""Finding a glossary's source terms in a text: case-insensitive after Unicode normalisation (NFKC, then casefold),
on word boundaries (a term inside a longer word does not match), leftmost first and, at one place, longest first;
multi-word terms match across any run of whitespace. One regular expression per glossary, built once: Python's
alternation takes the first alternative that matches at the leftmost place, so terms are tried longest first, each
with its boundaries (an Aho-Corasick automaton would find the longest term and then have to fall back by hand when
its boundary fails)."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass


def _clusters(text: str) -> list[tuple[int, int]]:
    """(start, end) of each base character with the combining marks after it: normalised as one piece, so that a
    decomposed "é" folds like a precomposed one."""
    out: list[tuple[int, int]] = []
    for i, char in enumerate(text):
        if out and unicodedata.combining(char):
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


def fold(text: str) -> tuple[str, list[tuple[int, int]]]:
    """The text normalised (NFKC, casefolded) and, for each of its characters, the span of the text it came from."""
    parts, spans = [], []
    for start, end in _clusters(text):
        folded = unicodedata.normalize("NFKC", text[start:end]).casefold()
        parts.append(folded)
        spans.extend([(start, end)] * len(folded))
    return "".join(parts), spans


def term_key(term: str) -> str:
    """A term as matching sees it: folded, whitespace runs as one space (two entries with one key are one term)."""
    return " ".join(fold(term)[0].split())


@dataclass(frozen=True)
class Match:
    """A glossary entry found in a text: where (in the text as given), and the entry as written in the glossary."""

    start: int
    end: int
    source: str
    target: str
    plural: bool = False  # the text holds the entry's source in the plural; `target` is the target's plural

    @property
    def verbatim(self) -> bool:
        """The entry keeps its term as it is (do-not-translate): its target is its source."""
        return self.source == self.target


class Matcher:
    """A glossary's terms compiled once; `find` gives the non-overlapping matches in a text, in order. `derived`:
    (term, entry's source, target) matched as the entry with that target (its plural: `plurals`), where no entry
    has that term."""

    def __init__(self, entries: tuple[tuple[str, str], ...], derived: tuple[tuple[str, str, str], ...] = ()):
        self.entries = {term_key(term): (s, t, True) for term, s, t in derived}
        self.entries.update({term_key(s): (s, t, False) for s, t in entries})
        keys = sorted(self.entries, key=len, reverse=True)
        alternatives = [r"\s+".join(map(re.escape, k.split(" "))) for k in keys]
        self.pattern = re.compile(rf"(?<!\w)(?:{'|'.join(alternatives)})(?!\w)") if keys else None

    def find(self, text: str) -> list[Match]:
        """Leftmost-longest matches of the glossary's terms in `text`."""
        if self.pattern is None:
            return []
        folded, spans = fold(text)
        out = []
        for m in self.pattern.finditer(folded):
            source, target, plural = self.entries[" ".join(m.group().split())]
            out.append(Match(spans[m.start()][0], spans[m.end() - 1][1], source, target, plural))
        return out
