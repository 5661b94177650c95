"""Protected spans: placeholders, inline markup and characters the vocabulary cannot spell, kept exactly as they are.

Two ways to keep them: `split_layout` (for /translate, streamed or not) makes each span a literal piece of the
layout, so the text between spans is translated unit by unit; `Masked` (documents) replaces each span with a number
the model copies, checks the output has each number exactly once and puts the spans back."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from app.inline import Tag
from app.layout import Layout

PRINTF = r"%(?:\(\w+\))?(?:\d+\$)?[-+#0]*(?:\d+|\*)?(?:\.\d+)?(?:hh|h|ll|l|L|z|j|t)?[diouxXeEfFgGcrsa@%]"
BRACE = r"\{\{?[\w.:-]*\}?\}"  # {0} {name} {{name}} {}
MARKUP = r"</?[A-Za-z][^<>]*>|&(?:#\d+|#x[0-9a-fA-F]+|\w+);"  # inline tags and character references
ICU = re.compile(r"\{\s*\w+\s*,\s*(?:plural|select|selectordinal)\s*,")  # kept whole, with its branches
LETTER = re.compile(r"[^\W\d_]")
TAG_SHAPE = re.compile(r"<(/?)([A-Za-z][\w:.-]*)[^<>]*>")  # one inline tag: close?, name
VOID = frozenset({"br", "wbr", "img", "hr"})

Spells = Callable[[str], bool]
Span = tuple[int, int]


def _icu_spans(text: str) -> list[Span]:
    """ICU plural/select arguments, each up to its matching closing brace."""
    out = []
    for match in ICU.finditer(text):
        depth, i = 0, match.start()
        while i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                out.append((match.start(), i))
                break
    return out


def find_spans(text: str, spells: Spells, placeholders: bool = False, markup: bool = False) -> list[Span]:
    """Sorted, non-overlapping spans to keep: runs of unspellable characters, and placeholders or markup if asked."""
    found = _icu_spans(text) if placeholders else []
    patterns = [PRINTF, BRACE] * placeholders + [MARKUP] * markup
    if patterns:
        found += [m.span() for m in re.finditer("|".join(patterns), text)]
    unspelled = {c for c in set(text) if not spells(c)}  # each distinct character asked once
    if unspelled:
        found += [(i, i + 1) for i, c in enumerate(text) if c in unspelled]
    spans: list[Span] = []
    for start, end in sorted(found, key=lambda s: (s[0], -s[1])):
        if spans and start < spans[-1][1]:
            continue  # inside an earlier span (an ICU argument's placeholders)
        if spans and start == spans[-1][1] and end - start == 1 and not spells(text[start]):
            spans[-1] = (spans[-1][0], end)  # unspellable characters in a row are one span
        else:
            spans.append((start, end))
    return spans


def split_layout(layout: Layout, find: Callable[[str], list[Span]]) -> Layout:
    """The layout with every span of its units as a literal piece; text between spans stays translated (a piece
    with no letter, such as ", " between two placeholders, stays literal too)."""
    out = Layout([], [], escape=layout.escape, fallbacks=layout.fallbacks)
    for piece in layout.pieces:
        text = layout.units[piece] if isinstance(piece, int) else None
        spans = find(text) if text is not None else []
        tagged = layout.tagged.get(piece) if text is not None else None
        if tagged is not None and spans:  # kept spans inside: its tags literal, the text between them translated
            out.fallbacks += len(tagged.tags)
            for kind, part in tagged.pieces():
                if kind == "tag":
                    out.pieces.append(part)
                else:
                    _split_text(out, part, find(part))
            continue
        if not spans:
            out.pieces.append(len(out.units) if text is not None else piece)
            if text is not None:
                if tagged is not None:
                    out.tagged[len(out.units)] = tagged
                out.units.append(text)
            continue
        _split_text(out, text, spans)
    return out


def _split_text(out: Layout, text: str, spans: list[Span]) -> None:
    """Text with its kept spans as literal pieces, the text between them as units."""
    pos = 0
    for start, end in [*spans, (len(text), len(text))]:
        _add_piece(out, text[pos:start])
        if start < end:
            out.pieces.append(out.render(text[start:end]))
        pos = end


def _add_piece(layout: Layout, text: str) -> None:
    """Text between spans: a unit when it has a letter (the whitespace and , ; : before it and the whitespace after
    it literal), else literal."""
    if not LETTER.search(text):
        if text:
            layout.pieces.append(layout.render(text))
        return
    core = text.lstrip(" \t\n,;:").rstrip()
    lead, trail = text[: len(text) - len(text.lstrip(" \t\n,;:"))], text[len(text.rstrip()) :]
    layout.pieces.extend([layout.render(lead), len(layout.units), trail])
    layout.units.append(core)


@dataclass
class Mark:
    """A number standing in the masked text for a kept span or a run boundary."""

    token: str
    kind: str  # "span", "open" or "close"
    value: str | int  # the span's text, or the run index
    before: str = ""  # whitespace the source had on each side of it
    after: str = ""


@dataclass
class Chunk:
    """Output text that belongs to one run (None: the segment's base formatting)."""

    text: str
    run: int | None


class Masked:
    """A segment of runs (text, styled?) as the model sees it: styled runs between open/close marks, spans as marks."""

    def __init__(self, runs: list[tuple[str, bool]], find: Callable[[str], list[Span]]):
        self._source = "".join(t for t, _ in runs)
        self._next = 1001
        self.parts: list[str | Mark] = []
        for index, (text, styled) in enumerate(runs):
            if styled:
                self.parts.append(self._mark("open", index))
            pos = 0
            for start, end in find(text):
                self.parts += [text[pos:start], self._mark("span", text[start:end])]
                pos = end
            self.parts.append(text[pos:])
            if styled:
                self.parts.append(self._mark("close", index))
        self.parts = [p for p in self.parts if p != ""]
        for k, part in enumerate(self.parts):
            if isinstance(part, Mark):
                prev = self.parts[k - 1] if k else None
                nxt = self.parts[k + 1] if k + 1 < len(self.parts) else None
                part.before = prev[len(prev.rstrip()) :] if isinstance(prev, str) else ""
                part.after = nxt[: len(nxt) - len(nxt.lstrip())] if isinstance(nxt, str) else ""
        self.marks = {p.token: p for p in self.parts if isinstance(p, Mark)}
        self.text = self._join([p.token if isinstance(p, Mark) else p for p in self.parts])

    def _mark(self, kind: str, value: str | int) -> Mark:
        """A new mark whose number appears nowhere in the source."""
        while str(self._next) in self._source:
            self._next += 1
        self._next += 1
        return Mark(str(self._next - 1), kind, value)

    def _join(self, texts: list[str]) -> str:
        """The masked text: a mark is parted by a space from a word it touches, so that it tokenizes alone."""
        out = ""
        for k, text in enumerate(texts):
            touches = isinstance(self.parts[k], Mark) or (k and isinstance(self.parts[k - 1], Mark))
            if touches and out and out[-1].isalnum() and text[0].isalnum():
                out += " "
            out += text
        return out

    def aligned(self) -> list[str | Tag] | None:
        """The segment as the model sees it with alignment: run marks and inline tags (XLIFF codes, srt and PO tags)
        as tags that go back around the aligned words (not in the model's text), other kept spans in the text as
        numbers; None when it has neither."""
        tags = [_as_tag(p) if isinstance(p, Mark) else None for p in self.parts]
        if not any(tags):
            return None
        run: list[str | Tag] = []
        for k, (part, tag) in enumerate(zip(self.parts, tags, strict=True)):
            if tag is not None:
                run.append(tag)
            elif isinstance(part, Mark):
                prev = self.parts[k - 1] if k else ""
                nxt = self.parts[k + 1] if k + 1 < len(self.parts) else ""
                gap = [" " * (isinstance(t, str) and t[-1:].isalnum()) for t in (prev, nxt[:1])]
                run.append(gap[0] + part.token + gap[1])
            else:
                run.append(part)
        return run

    @property
    def pieces(self) -> list[str]:
        """The texts between marks that have a letter, stripped: what the fallback translates one by one."""
        return [p.strip() for p in self.parts if isinstance(p, str) and LETTER.search(p)]

    @property
    def translatable(self) -> bool:
        """Whether any text outside the marks has a letter (else the segment is kept as it is)."""
        return bool(self.pieces)

    def piecewise(self, translations: dict[str, str]) -> str:
        """An output made of the pieces between marks, each translated on its own (the fallback)."""
        out = []
        for part in self.parts:
            if isinstance(part, Mark):
                out.append(part.token)
            else:
                out.append(translations.get(part.strip(), part.strip()) if LETTER.search(part) else part.strip())
        return " ".join(p for p in out if p)

    def restore(self, output: str, escape: Callable[[str], str] = str, spaced: bool = False) -> list[Chunk] | None:
        """Chunks of the translation with spans put back, or None unless every mark occurs once, runs nested (with
        `spaced`, the output's whitespace around marks is kept, else the source's)."""
        found = [output]
        if self.marks:
            tokens = "|".join(re.escape(t) for t in self.marks)
            found = re.split(rf"(?:\x00|(?<![\d\x00]))({tokens})(?:\x00|(?![\d\x00]))", output)  # \x00: aligned
        used = [self.marks[t] for t in found[1::2]]
        if sorted(m.token for m in used) != sorted(self.marks) or not _nested(used):
            return None
        chunks, open_runs = [Chunk("", None)], []
        for i, text in enumerate(found):
            if i % 2:
                mark = self.marks[text]
                if mark.kind == "span":
                    chunks[-1].text += mark.value
                    continue
                open_runs = [*open_runs, mark.value] if mark.kind == "open" else open_runs[:-1]
                chunks.append(Chunk("", open_runs[-1] if open_runs else None))
                continue
            left = self.marks[found[i - 1]] if i else None
            right = self.marks[found[i + 1]] if i + 1 < len(found) else None
            if spaced:  # placed by alignment at the translation's word edges: its own spacing
                chunks[-1].text += escape(text)
                continue
            text = text.lstrip() if left else text
            text = text.rstrip() if right else text
            before, after = left.after if left else "", right.before if right else ""
            chunks[-1].text += escape(text).join([before, after]) if text else before or after
        return [c for c in chunks if c.text]


def _as_tag(mark: Mark) -> Tag | None:
    """A run mark, or a span that is one inline tag, as a tag placed by alignment (its text: the mark's number)."""
    token = f"\x00{mark.token}\x00"  # apart from any digit beside it (restore with `spaced` reads it so)
    if mark.kind != "span":
        return Tag(token, mark.kind, 0, f"run {mark.value}")
    shape = TAG_SHAPE.fullmatch(mark.value)
    if shape is None:
        return None
    name = shape.group(2).lower()
    kind = "close" if shape.group(1) else "void" if mark.value.endswith("/>") or name in VOID else "open"
    return Tag(token, kind, 0, name)


def _nested(marks: list[Mark]) -> bool:
    """Open and close marks pair up like brackets."""
    stack = []
    for mark in marks:
        if mark.kind == "open":
            stack.append(mark.value)
        elif mark.kind == "close" and (not stack or stack.pop() != mark.value):
            return False
    return not stack
