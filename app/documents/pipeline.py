"""A document's segments through the engine core: one job per round (duplicates once), progress counted; a
glossary's constraints go with every unit (Plan.job) and its do-not-translate terms are kept as placeholders are.

Round 1 sends every segment with its runs and protected spans masked as numbers; a segment whose output lost,
repeated or unbalanced a mark goes to round 2, where the text between its marks is translated piece by piece;
a segment that still fails is flagged and keeps its source."""

from __future__ import annotations

import asyncio
from collections import Counter

from app.documents import Document, Segment
from app.errors import ApiError
from app.glossaries.apply import union
from app.inline_cut import add_tagged
from app.job import TooLong
from app.layout import Layout
from app.planner import Plan
from app.protect import Masked, find_spans
from app.settings import Settings
from app.text import plain_layout, sentences


class Rounds:
    """Runs lists of texts as engine jobs for one document and counts finished units for progress."""

    def __init__(self, plan: Plan, settings: Settings, threshold: float | None = None):
        self.plan, self.settings = plan, settings
        self.threshold = settings.confidence_threshold if threshold is None else threshold
        self.lowest: dict[str, float | None] = {}  # source text -> its lowest sentence confidence (None: none)
        self.low = self.rated = 0  # sentences below the threshold, of those with a confidence
        self.done = self.total = 0
        self.changed = asyncio.Event()
        self.terms: dict[tuple[str, str], list[int]] = {}  # glossary entry -> [texts it matched, of them applied]

    async def translate(self, texts: list[str]) -> dict[str, str]:
        """Each distinct text's translation (long texts cut into sentences), from one job."""
        unique = list(dict.fromkeys(texts))
        if not unique:
            return {}
        return dict(zip(unique, await self.run([plain_layout(t, True) for t in unique], unique), strict=True))

    async def run(self, layouts: list[Layout], sources: list[str]) -> list[str]:
        """Each layout's translation (of its source text), from one job (units with tags: placed by alignment)."""
        if not layouts:
            return []
        try:
            job = self.plan.job(layouts, self.settings)
        except TooLong as exc:
            msg = f"file: a sentence of {exc.tokens} tokens exceeds max_input_tokens={exc.limit}"
            raise ApiError(exc.status, exc.error_type, msg) from None
        self.total += sum(len(item.units) for item in job.items)
        try:
            await job.submit()
        except BaseException:
            job.abort()
            raise
        await job.wait_all(progress=self._count)
        out = [job.texts(item) for item in job.items]
        for source, item in zip(sources, job.items, strict=True):
            values = [u.result.hypotheses[0].confidence for u in item.units if u.result.hypotheses]
            if values:  # a text with no unit (all markup) has no confidence to give
                self.lowest[source] = None if None in values else min(values)
            self.rated += sum(v is not None for v in values)
            self.low += sum(v is not None and v < self.threshold for v in values)
        if self.plan.glossary is not None:
            for text, translation in zip(sources, out, strict=True):
                for e in self.plan.glossary.report(self.plan.glossary.matched(text), translation):
                    tally = self.terms.setdefault((e["source"], e["target"]), [0, 0])
                    tally[0], tally[1] = tally[0] + 1, tally[1] + e["applied"]
        return out

    def glossary_report(self) -> list[dict]:
        """details.glossary of a document: each matched entry, the texts it matched and in how many its target
        appears (a text translated again to repair its placeholders counts again)."""
        return [{"source": s, "target": t, "matched": n, "applied": a} for (s, t), (n, a) in self.terms.items()]

    def rate(self, seg: Segment, sources: list[str]) -> None:
        """Tell a written segment its lowest sentence confidence over the texts it was translated from."""
        values = [self.lowest[t] for t in sources if t in self.lowest]
        lowest = None if not values or None in values else min(values)
        seg.rate(lowest, lowest is not None and lowest < self.threshold)

    def _count(self) -> None:
        """One more unit finished."""
        self.done += 1
        self.changed.set()


def check_limits(doc: Document, settings: Settings) -> None:
    """413 when the file has more segments or characters to translate than the settings allow."""
    count, chars = len(doc.segments), sum(len(s.text) for s in doc.segments)
    if count > settings.max_segments:
        raise ApiError(413, "payload_too_large", f"file: {count} segments exceeds max_segments={settings.max_segments}")
    if chars > settings.max_file_chars:
        msg = f"file: {chars} characters exceeds max_file_chars={settings.max_file_chars}"
        raise ApiError(413, "payload_too_large", msg)


async def translate_document(doc: Document, rounds: Rounds) -> int:
    """Translate and write every segment; the number of flagged segments."""
    spells, plan = rounds.plan.route.entry.checkpoint.tokenizer.spells, rounds.plan
    masked = {}
    for seg in doc.segments:  # a glossary's do-not-translate terms are kept as placeholders are
        m = Masked(seg.runs, lambda t, s=seg: union(find_spans(t, spells, True, markup=s.markup), plan.keep(t)))
        if m.translatable:
            masked[id(seg)] = (seg, m)
    runs = {key: m.aligned() for key, (_, m) in masked.items()}  # runs, XLIFF codes, srt/PO tags: by alignment
    aligned = {key: _aligned_layout(run) for key, run in runs.items() if run is not None}
    aligned = {key: layout for key, layout in aligned.items() if layout is not None}
    texts = list(dict.fromkeys(m.text for key, (_, m) in masked.items() if key not in aligned))
    first, placed_by = {}, {}  # run marks and inline tags put back by alignment: placed_by
    if aligned:  # one job for both
        layouts = [plain_layout(t, True) for t in texts] + list(aligned.values())
        outs = await rounds.run(layouts, texts + [masked[key][1].text for key in aligned])
        first, placed_by = dict(zip(texts, outs, strict=False)), dict(zip(aligned, outs[len(texts) :], strict=True))
    else:
        first = await rounds.translate(texts)
    retry = []
    for key, (seg, m) in masked.items():
        if _write(seg, m, placed_by[key] if key in aligned else first[m.text], key in aligned):
            rounds.rate(seg, [m.text])
        else:
            retry.append((seg, m))
    pieces = await rounds.translate([p for _, m in retry for p in m.pieces])
    flagged = 0
    for seg, m in retry:
        if _write(seg, m, m.piecewise(pieces)):
            rounds.rate(seg, m.pieces)
        else:
            seg.flag("placeholders or formatting marks were lost in translation")
            flagged += 1
    return flagged


def _aligned_layout(run: list) -> Layout | None:
    """A segment's runs as units whose run marks go back by alignment (None when they do not nest)."""
    layout = Layout([], [])
    return layout if add_tagged(layout, run, sentences) else None


def _write(seg: Segment, masked: Masked, output: str, aligned: bool = False) -> bool:
    """Write a segment's translation if every mark came back once and no placeholder was added by the model (marks
    placed by alignment keep the translation's spacing)."""
    chunks = masked.restore(output, seg.escape, spaced=aligned)
    if chunks is None:
        return False
    if _placeholders("".join(c.text for c in chunks), seg.markup) != _placeholders(seg.text, seg.markup):
        return False
    seg.write(chunks)
    return True


def _placeholders(text: str, markup: bool) -> Counter:
    """The placeholders (and markup) of a text, counted."""
    return Counter(text[a:b] for a, b in find_spans(text, lambda c: True, placeholders=True, markup=markup))
