"""A request's glossary at work on its texts: which entries each text matches, the spans kept verbatim (entries whose
target is their source), the target-side constraints of each unit the model translates (token ids of the targets,
as the decoder emits them inside a sentence), and the report of what the output holds."""

from __future__ import annotations

import re
from collections.abc import Callable

from app.casing import Casing
from app.errors import ApiError
from app.glossaries.after import mend
from app.glossaries.agreement import Agreeing, capital
from app.glossaries.entries import Entry
from app.glossaries.matching import Match, Matcher
from app.glossaries.plurals import Plurals
from model.runner.params import Agreement

Constraints = tuple[tuple[int, ...], ...]


class GlossaryUse:
    """A glossary compiled for one route: `encode` gives a target term's token ids (no EOS), `spells` whether the
    model's vocabulary writes a character; a unit carries at most `max_constraints` constraints (the beam they need is
    bounded by the server's max_beam_size), each of at most `max_tokens` tokens (the output limit); `agreeing`, where
    the target language has a table, makes the word before each term agree with it; `plurals`, where both languages
    have rules, matches an entry's plural with its target's ("Passwords" -> "contraseñas")."""

    def __init__(
        self, entries: tuple[Entry, ...], encode: Callable[[str], list[int]], max_constraints: int,
        spells: Callable[[str], bool] = lambda _: True, max_tokens: int = 1 << 30, agreeing: Agreeing | None = None,
        plurals: Plurals | None = None,
    ):  # fmt: skip
        self.plurals = plurals
        derived = tuple((p[0], s, p[1]) for s, t in entries if plurals and (p := plurals.entry((s, t))))
        self.matcher, self.encode, self.max_constraints = Matcher(entries, derived), encode, max_constraints
        self.spells, self.max_tokens, self.agreeing = spells, max_tokens, agreeing
        self._ids: dict[str, tuple[int, ...]] = {}
        self._found_in: dict[str, list[Match]] = {}  # per text: planning, constraints, agreement and the answer ask

    def matched(self, text: str) -> list[Entry]:
        """The entries a text matches, each once, in the order they first occur."""
        return list(dict.fromkeys((m.source, m.target) for m in self._matches(text)))

    def _matches(self, text: str) -> list[Match]:
        """The matcher's matches but an entry's plural where the word before makes it a verb ("it updates"); found
        once per text."""
        if text not in self._found_in:
            verb = lambda m: m.plural and self.plurals and self.plurals.verb_before(text, m.start)  # noqa: E731
            self._found_in[text] = [m for m in self.matcher.find(text) if not verb(m)]
        return self._found_in[text]

    def verbatim(self, text: str) -> list[tuple[int, int]]:
        """Spans of the text matched by entries kept as they are (do-not-translate: target equals source) that the
        model cannot write: they stay out of its input; the others are constraints of their sentence."""
        spans = [(m.start, m.end) for m in self._matches(text) if m.verbatim]
        return [(a, b) for a, b in spans if not all(map(self.spells, text[a:b]))]

    def _target_ids(self, target: str) -> tuple[int, ...]:
        if target not in self._ids:
            self._ids[target] = tuple(self.encode(target))
        return self._ids[target]

    def constraints(self, unit: str) -> tuple[Constraints, list[tuple[int, int]]]:
        """The unit's constraints: the token ids of each matched target, one per occurrence (a term found twice is
        wanted twice), capitalised where a capital starts the unit with it, or for a do-not-translate entry the text
        as it is written there (the sentence stays whole around it); and the span of the unit each one translates."""
        found = self._found(unit)
        return tuple(ids for ids, _, _, _ in found), [span for _, span, _, _ in found]

    def agreement(self, unit: str) -> Agreement | None:
        """How the word before each of the unit's constraints is made to agree with it (not with terms kept as
        written), or None without a table for the target language."""
        if self.agreeing is None:
            return None
        found, text = self._found(unit), unit.lstrip()
        terms = [None if m.verbatim else (m.source, m.target, opens, m.plural) for _, _, m, opens in found]
        sentence = text.rstrip()[-1:] in (".", "!", "?") and len(text.split()) >= 3  # not "Files deleted."
        return self.agreeing(terms, capitalised=text[:1].isupper(), sentence=sentence)

    def _found(self, unit: str) -> list[tuple[tuple[int, ...], tuple[int, int], Match, bool]]:
        """Each constraint of the unit: its ids, its span in the unit, its match and whether it opens the unit
        (capitalised: see `constraints`)."""
        start = len(unit) - len(unit.lstrip())
        found = []
        for m in self._matches(unit):
            opens = m.start == start and unit[start : start + 1].isupper()  # the sentence starts with the term
            target = unit[m.start : m.end] if m.verbatim else capital(m.target) if opens else m.target
            if ids := self._checked(m.source, target):
                found.append((ids, (m.start, m.end), m, opens))
        derived = [k for k, (_, _, m, _) in enumerate(found) if m.plural]
        if len(found) > self.max_constraints and derived:  # plurals of entries go first: the entries as written fit
            dropped = set(derived[max(0, self.max_constraints - (len(found) - len(derived))) :])
            found = [f for k, f in enumerate(found) if k not in dropped]
        if len(found) > self.max_constraints:
            raise ApiError(422, "validation", f"glossary: a sentence matches {len(found)} terms, over the "
                           f"{self.max_constraints} one sentence may carry (max_beam_size - 1)")  # fmt: skip
        return found

    def _checked(self, source: str, target: str) -> tuple[int, ...]:
        """The target's token ids; 422 naming the entry when the model cannot write it or it exceeds the output."""
        unwritable = "".join(dict.fromkeys(c for c in target if not self.spells(c)))
        if unwritable:
            raise ApiError(422, "validation", f"glossary[{source!r}]: the target {target!r} has characters the model's "
                           f"vocabulary cannot write: {unwritable!r}")  # fmt: skip
        ids = self._target_ids(target)
        if len(ids) > self.max_tokens:
            raise ApiError(422, "validation", f"glossary[{source!r}]: the target is {len(ids)} tokens, over "
                           f"max_new_tokens={self.max_tokens}")  # fmt: skip
        return ids

    def agreed(self, unit: str, output: str) -> str:
        """The translation `output` of `unit` with the words after its terms made to agree with them (`after.mend`;
        without an agreement table for the target language, as it is)."""
        if self.agreeing is None:
            return output
        terms = [m.target for m in self._matches(unit) if not m.verbatim]
        return mend(output, terms, self.agreeing.language, self.agreeing.lexicon)

    @staticmethod
    def report(entries: list[Entry], output: str) -> list[dict]:
        """Per matched entry: its terms and whether the target stands in the output as whole words (case-sensitive,
        but for a capital first letter at the output's start, and in capitals or Title Case: a text typed so,
        app.casing)."""
        typed = (str, str.upper, Casing("title").restore)
        return [
            {"source": s, "target": t, "applied": any(whole_words(f(t), output) for f in typed)} for s, t in entries
        ]


def whole_words(term: str, text: str) -> bool:
    """Whether `term` stands in `text` as whole words, or with a capital first letter at its start (¿ and ¡ before)."""
    exact = re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text) is not None
    return exact or re.match(rf"[\s¿¡\"'(«]*{re.escape(capital(term))}(?!\w)", text) is not None


def union(first: list[tuple[int, int]], second: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Two sorted lists of spans as one, sorted and non-overlapping (a span overlapping an earlier one is left out)."""
    out: list[tuple[int, int]] = []
    for start, end in sorted([*first, *second], key=lambda s: (s[0], -s[1])):
        if not out or start >= out[-1][1]:
            out.append((start, end))
    return out
