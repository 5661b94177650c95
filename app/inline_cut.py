"""A run of text and inline tags (between block constructs) cut into sentences whose tags go back by alignment."""

from __future__ import annotations

from collections.abc import Callable

from app.inline import Tag, Tagged, pair_tags
from app.layout import Layout

SPACED = frozenset({"br", "x", "ph"})  # a line break (or a code) between two words parts them in the model's text


def plain(run: list[str | Tag]) -> tuple[str, list[Tag]]:
    """The run's text without its tags, and its tags at their offsets in that text."""
    text, tags = "", []
    for part in run:
        if isinstance(part, str):
            if tags and tags[-1].name in SPACED and text and not text[-1].isspace() and part[:1].strip():
                text += " "
            text += part
        else:
            part.at = len(text)
            tags.append(part)
    return text, tags


def _edges(tags: list[Tag], size: int) -> tuple[int, int]:
    """How many tags at the sentence's start and end stay outside it: standalone tags, closes of elements opened
    before and opens of elements closed after it, and elements around all of it."""
    pair_tags(tags)
    i, j = 0, len(tags)
    while i < j:
        first, last = tags[i], tags[j - 1]
        if first.at == 0 and (first.kind != "open" or first.pair is None) and (first.kind != "close" or i == 0):
            i += 1
        elif last.at == size and (last.kind != "close" or last.pair is None):
            j -= 1
        elif first.at == 0 and last.at == size and first.kind == "open" and first.pair == j - 1:
            i, j = i + 1, j - 1
        else:
            break
    return i, j


def _literal(layout: Layout, text: str, tags: list[Tag], start: int) -> None:
    """Text outside the sentences (escaped in HTML) with the tags at its offsets (from `start`)."""
    pos = 0
    for tag in tags:
        layout.pieces += [layout.render(text[pos : tag.at - start]), tag.text]
        pos = tag.at - start
    layout.pieces.append(layout.render(text[pos:]))


def add_tagged(layout: Layout, run: list[str | Tag], cut: Callable[[str], list[str]]) -> bool:
    """Add the run as units with their tags (False, adding nothing, when its tags do not nest)."""
    text, tags = plain(run)
    if not pair_tags(tags):
        return False
    spans, pos = [], 0
    core = text.strip()
    base = len(text) - len(text.lstrip())
    for sentence in cut(core) if core else []:
        start = core.find(sentence, pos)
        if start < 0:
            break
        spans.append((base + start, base + start + len(sentence)))
        pos = start + len(sentence)
    if core and pos < len(core):
        spans.append((base + pos, base + len(core)) if not spans else (spans.pop()[0], base + len(core)))
    pos, k = 0, 0
    for s, e in spans:
        gap = []
        while k < len(tags) and (tags[k].at < s or (tags[k].at == s and tags[k].kind == "close" and s > 0)):
            gap.append(tags[k])
            k += 1
        _literal(layout, text[pos:s], gap, pos)
        mine = []
        while k < len(tags) and tags[k].at <= e and not (tags[k].at == e and tags[k].kind == "open" and e < len(text)):
            mine.append(Tag(tags[k].text, tags[k].kind, tags[k].at - s, tags[k].name))
            k += 1
        i, j = _edges(mine, e - s)
        layout.pieces += [t.text for t in mine[:i]]
        layout.pieces.append(len(layout.units))
        if i < j:
            inside = mine[i:j]
            pair_tags(inside)
            layout.tagged[len(layout.units)] = Tagged(text[s:e], inside)
        layout.units.append(text[s:e])
        layout.pieces += [t.text for t in mine[j:]]
        pos = e
    _literal(layout, text[pos:], tags[k:], pos)
    layout.pieces = [p for p in layout.pieces if p != ""]
    return True
