"""Texts cut into layouts (app.layout): sentences (sentencex, per language) and HTML text nodes, each unit translated
on its own and put back."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import sentencex

from app.inline import Tag
from app.inline_cut import add_tagged
from app.layout import Layout

SKIP_TAGS = frozenset({"script", "style", "code", "pre", "textarea"})
INLINE_TAGS = frozenset(
    "a abbr b bdi bdo big cite data del dfn em font i ins mark q s small span strong sub sup time tt u var"
    " g x ph bx ex bpt ept it mrk".split()
)  # inside a sentence: taken out of the model's text and put back by alignment (x, ph...: XLIFF-like codes)
INLINE_VOID = frozenset({"br", "wbr", "img"})
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


def sentences(text: str, language: str = "en") -> list[str]:
    """The sentences of a text without surrounding whitespace, by sentencex's rules for the language (abbreviations
    such as "Dr." and "p.m." do not end one; unknown languages get its generic rules)."""
    return [part.strip() for part in sentencex.segment(language.split("-")[0], text) if part.strip()]


def _add_text(layout: Layout, text: str, split: bool, language: str = "en") -> None:
    """Append text: surrounding whitespace stays literal; the rest is one unit or one unit per sentence."""
    core = text.strip()
    if not core:
        layout.pieces.append(text)
        return
    lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
    if lead:
        layout.pieces.append(lead)
    pos = 0
    for sentence in sentences(core, language) if split else [core]:
        start = core.find(sentence, pos)
        if start < 0:  # the segmenter changed the text: keep the rest whole
            break
        if start > pos:
            layout.pieces.append(core[pos:start])
        layout.pieces.append(len(layout.units))
        layout.units.append(sentence)
        pos = start + len(sentence)
    if pos < len(core):
        layout.pieces.append(len(layout.units))
        layout.units.append(core[pos:])
    if trail:
        layout.pieces.append(trail)


def plain_layout(text: str, split: bool, language: str = "en") -> Layout:
    """Plain text as one unit, or one unit per sentence of the language."""
    layout = Layout([], [])
    _add_text(layout, text, split, language)
    return layout


class _HtmlCutter(HTMLParser):
    """Records where each construct starts: markup, script/style/code and translate="no" elements stay verbatim,
    text becomes units."""

    def __init__(self, markup: str, skip: frozenset[str] = SKIP_TAGS, inline: bool = False):
        super().__init__(convert_charrefs=True)
        self.markup, self.skip, self.inline = markup, skip, inline
        self.kinds: dict[int, tuple[str, str]] = {}  # mark index -> (kind, name) of an inline tag
        self.skipped: list[str] = []  # open elements from the one that started a verbatim stretch
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", markup)]
        self.marks: list[tuple[int, str | None]] = []  # (offset, decoded text, or None for verbatim)

    def _mark(self, text: str | None = None) -> None:
        """Note that a construct starts here (the parser's position) and, for translatable text, its text."""
        line, col = self.getpos()
        self.marks.append((self.line_starts[line - 1] + col, text))

    def _inline(self, kind: str, tag: str) -> None:
        """Note that the construct just marked is an inline tag (when asked, outside verbatim stretches)."""
        if self.inline and not self.skipped:
            self.kinds[len(self.marks) - 1] = (kind, tag)

    def handle_starttag(self, tag, attrs):
        self._mark()
        starts = tag in self.skip or ("translate", "no") in attrs
        if not starts and (tag in INLINE_TAGS or tag in INLINE_VOID):
            self._inline("void" if tag in INLINE_VOID else "open", tag)
        if (self.skipped or starts) and tag not in VOID_TAGS:
            self.skipped.append(tag)

    def handle_startendtag(self, tag, attrs):
        self._mark()
        if tag in INLINE_TAGS or tag in INLINE_VOID:
            self._inline("void", tag)

    def handle_endtag(self, tag):
        self._mark()
        if tag in INLINE_TAGS:
            self._inline("close", tag)
        if tag in self.skipped:
            del self.skipped[len(self.skipped) - 1 - self.skipped[::-1].index(tag) :]

    def handle_data(self, data):
        self._mark(None if self.skipped else data)

    def handle_comment(self, data):
        self._mark()

    def handle_decl(self, decl):
        self._mark()

    def handle_pi(self, data):
        self._mark()

    def unknown_decl(self, data):
        self._mark()

    def layout(self, split: bool, language: str = "en") -> Layout:
        """Verbatim slices of the markup between constructs; runs of text joined and cut into units."""
        layout, text = Layout([], [], escape=True), []
        ends = [offset for offset, _ in self.marks[1:]] + [len(self.markup)] * bool(self.marks)
        for k, ((offset, data), end) in enumerate(zip(self.marks, ends, strict=True)):
            if data is not None:
                text.append(data)
                continue
            if k in self.kinds:
                text.append(Tag(self.markup[offset:end], *self.kinds[k][:1], 0, self.kinds[k][1]))
                continue
            self._flush(layout, text, split, language)
            layout.pieces.append(self.markup[offset:end])
        self._flush(layout, text, split, language)
        return layout

    @staticmethod
    def _flush(layout: Layout, text: list, split: bool, language: str) -> None:
        """Add pending text (and inline tags) as units; literal whitespace around them is re-escaped."""
        if not text:
            return
        if any(isinstance(t, Tag) for t in text):
            cut = (lambda core: sentences(core, language)) if split else (lambda core: [core])  # noqa: E731
            if not add_tagged(layout, text, cut):  # not nested: every tag literal, the text between translated apart
                layout.fallbacks += sum(isinstance(t, Tag) for t in text)
                for part in text:
                    _HtmlCutter._flush(layout, [part] if isinstance(part, str) else [], split, language)
                    if isinstance(part, Tag):
                        layout.pieces.append(part.text)
            text.clear()
            return
        start = len(layout.pieces)
        _add_text(layout, "".join(text), split, language)
        text.clear()
        for i in range(start, len(layout.pieces)):
            piece = layout.pieces[i]
            if isinstance(piece, str):
                layout.pieces[i] = html.escape(piece, quote=False)


def html_layout(
    markup: str, split: bool, language: str = "en", skip: frozenset[str] = SKIP_TAGS, inline: bool = False
) -> Layout:
    """HTML (or XML) with its text nodes as units, those inside `skip` elements kept verbatim; translations are
    escaped when joined back. With `inline`, inline tags stay inside their sentence's unit (app.inline)."""
    cutter = _HtmlCutter(markup, skip, inline)
    cutter.feed(markup)
    cutter.close()
    return cutter.layout(split, language)
