"""A request's glossary at work on its texts: which entries each text matches, the spans kept verbatim (entries whose
target is their source), the target-side constraints of each unit the model translates (token ids of the targets,
as the decoder emits them inside a sentence), and the report of what the output holds."""

from __future__ import annotations

import re
from collections.abc import Callable

from app.glossaries.entries import Entry
from app.glossaries.matching import Match, Matcher

Constraints = tuple[tuple[int, ...], ...]


class GlossaryUse:
    """A glossary compiled for one route: `encode` gives a target term's token ids (no EOS); a unit carries at most
    `max_constraints` constraints (the leftmost ones: the beam they need is bounded by the server's max_beam_size)."""

    def __init__(self, entries: tuple[Entry, ...], encode: Callable[[str], list[int]], max_constraints: int):
        self.matcher, self.encode, self.max_constraints = Matcher(entries), encode, max_constraints
        self._ids: dict[str, tuple[int, ...]] = {}

    def matched(self, text: str) -> list[Entry]:
        """The entries a text matches, each once, in the order they first occur."""
        return list(dict.fromkeys((m.source, m.target) for m in self.matcher.find(text)))

    def verbatim(self, text: str) -> list[tuple[int, int]]:
        """Spans of the text matched by entries kept as they are (do-not-translate: target equals source)."""
        return [(m.start, m.end) for m in self.matcher.find(text) if m.verbatim]

    def _target_ids(self, match: Match) -> tuple[int, ...]:
        if match.target not in self._ids:
            self._ids[match.target] = tuple(self.encode(match.target))
        return self._ids[match.target]

    def constraints(self, unit: str) -> tuple[Constraints, list[tuple[int, int]]]:
        """The unit's constraints: the token ids of each matched target that differs from its source, one per
        occurrence (a term found twice is wanted twice), and the span of the unit each one translates."""
        matches = [m for m in self.matcher.find(unit) if not m.verbatim]
        found = [(ids, (m.start, m.end)) for m in matches if (ids := self._target_ids(m))][: self.max_constraints]
        return tuple(ids for ids, _ in found), [span for _, span in found]

    @staticmethod
    def report(entries: list[Entry], output: str) -> list[dict]:
        """Per matched entry: its terms and whether the target stands in the output as whole words (case-sensitive,
        but for a capital first letter at the output's start)."""
        return [{"source": s, "target": t, "applied": whole_words(t, output)} for s, t in entries]


def whole_words(term: str, text: str) -> bool:
    """Whether `term` stands in `text` as whole words, or with a capital first letter at its start (¿ and ¡ before)."""
    exact = re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text) is not None
    capital = term[:1].upper() + term[1:]
    return exact or re.match(rf"[\s¿¡\"'(«]*{re.escape(capital)}(?!\w)", text) is not None


def union(first: list[tuple[int, int]], second: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Two sorted lists of spans as one, sorted and non-overlapping (a span overlapping an earlier one is left out)."""
    out: list[tuple[int, int]] = []
    for start, end in sorted([*first, *second], key=lambda s: (s[0], -s[1])):
        if not out or start >= out[-1][1]:
            out.append((start, end))
    return out
