"""Inline markup that costs nothing: a sentence's tags are taken out of the text the model sees and put back, after
the translation, around the target words aligned to the source words they enclosed (the decoder's alignment)."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from app.inline_words import Words, majority, source_words, target_words


@dataclass
class Tag:
    """A tag kept byte for byte, at a character offset of its sentence's plain text."""

    text: str
    kind: str  # "open", "close" or "void"
    at: int
    name: str = ""
    pair: int | None = None  # the index (in its sentence) of the matching open or close tag


@dataclass
class Tagged:
    """A sentence as the model sees it (`text`, no tags) and the tags that go back into its translation."""

    text: str
    tags: list[Tag] = field(default_factory=list)

    def pieces(self) -> list[tuple[str, str]]:
        """The sentence cut at its tags, as ("tag", markup) and ("text", plain text) pieces (today's way)."""
        out, pos = [], 0
        for tag in self.tags:
            if tag.at > pos:
                out.append(("text", self.text[pos : tag.at]))
            out.append(("tag", tag.text))
            pos = max(pos, tag.at)
        if pos < len(self.text):
            out.append(("text", self.text[pos:]))
        return out


@dataclass
class Placed:
    """A translation with its tags back in: the output markup and how many tags alignment could not place."""

    text: str
    fallbacks: int = 0


@dataclass
class _Element:
    """A paired element (or a standalone tag) and the target words it goes around (or after)."""

    open: int | None  # tag indexes; None: the element opened or closes outside the sentence
    close: int | None
    children: list[_Element] = field(default_factory=list)
    span: tuple[int, int] | None = None  # target words [first, last]


def pair_tags(tags: list[Tag]) -> bool:
    """Set each open and close tag's `pair` to its partner's index in the list, when both are in it; False when a
    close tag does not match the innermost open one (markup not nested)."""
    stack: list[int] = []
    for tag in tags:
        tag.pair = None
    for i, tag in enumerate(tags):
        if tag.kind == "open":
            stack.append(i)
        elif tag.kind == "close" and stack:
            j = stack.pop()
            if tags[j].name != tag.name:
                return False
            tags[i].pair, tags[j].pair = j, i
    return True


def _tree(tags: list[Tag]) -> list[_Element] | None:
    """The elements as a tree (root's children), unpaired tags spanning to the sentence's edge; None if not nested."""
    root = _Element(None, None)
    unclosed_before = [i for i, t in enumerate(tags) if t.kind == "close" and t.pair is None]
    stack = [root]
    for i in reversed(unclosed_before):  # elements opened before the sentence: outermost first
        stack[-1].children.append(_Element(None, i))
        stack.append(stack[-1].children[-1])
    for i, tag in enumerate(tags):
        if tag.kind == "void":
            stack[-1].children.append(_Element(i, i))
        elif tag.kind == "open":
            stack[-1].children.append(_Element(i, tag.pair))
            stack.append(stack[-1].children[-1])
        elif tag.pair is None:
            if len(stack) < 2 or stack[-1].close != i:
                return None
            stack.pop()
        else:
            if len(stack) < 2 or stack[-1].open != tag.pair:
                return None
            stack.pop()
    return root.children


def place(tagged: Tagged, src: Words, out: Words, alignment: list[int], escape: bool = True) -> Placed:
    """The translation (words `out` of the text, aligned to `src` by `alignment`) with every tag put back (the text
    HTML-escaped when `escape`)."""
    tags, n = tagged.tags, len(out.spans)
    elements = _tree(tags)
    if elements is None or n == 0:
        return Placed(_fallback(tagged, out, escape), len(tags))
    points = majority(out, src, alignment)  # each target word's source word (or None)
    fallbacks = [0]

    def words_in(a: int, b: int) -> list[int]:
        """Target words aligned to source words overlapping the characters [a, b)."""
        inside = {k for k, (s, e) in enumerate(src.spans) if s < b and e > a}
        return [j for j, k in enumerate(points) if k in inside]

    def proportional(at: int) -> int:
        """The target word at the same relative place as source character `at` (when alignment has nothing)."""
        fallbacks[0] += 1
        return min(n - 1, int(at / max(1, len(tagged.text)) * n))

    def assign(element: _Element, lo: int, hi: int, taken: list[tuple[int, int]]) -> None:
        """Give the element a span of target words within [lo, hi], clear of its earlier siblings' spans."""
        if element.open is not None and element.open == element.close:  # standalone: after a word
            element.span = _after(tags[element.open].at, src, points, lo, hi, proportional)
            return
        a = tags[element.open].at if element.open is not None else 0
        b = tags[element.close].at if element.close is not None else len(tagged.text)
        hit = [j for j in words_in(a, b) if lo <= j <= hi]
        for s, e in taken:
            hit = [j for j in hit if not s <= j <= e]
        first, last = (min(hit), max(hit)) if hit else _nowhere(proportional((a + b) // 2), lo, hi, taken)
        for s, e in taken:  # an earlier sibling inside: keep the side with more of the element's words
            if hit and first <= s and e <= last:
                left, right = [j for j in hit if j < s], [j for j in hit if j > e]
                hit = left if len(left) >= len(right) else right
                first, last = min(hit), max(hit)
        if element.open is None:
            first = lo
        if element.close is None:  # it closes after the sentence: from its first word to the end, after siblings
            first, last = max([first] + [e + 1 for _, e in taken if e >= first]), hi
        element.span = (first, last)
        inner: list[tuple[int, int]] = []
        for child in element.children:
            assign(child, first, last, inner)
            if child.span[1] >= child.span[0] and child.open != child.close:
                inner.append(child.span)

    taken: list[tuple[int, int]] = []
    for element in elements:
        assign(element, 0, n - 1, taken)
        if element.span[1] >= element.span[0] and element.open != element.close:
            taken.append(element.span)
    return Placed(_render(tags, elements, out, escape), fallbacks[0])


def _nowhere(j: int, lo: int, hi: int, taken: list[tuple[int, int]]) -> tuple[int, int]:
    """Where an element none of whose words is aligned goes: the free word nearest to word j within [lo, hi], else
    an empty span at the nearest place outside every sibling's span."""
    free = [p for p in range(lo, hi + 1) if not any(s <= p <= e for s, e in taken)]
    if free:
        p = min(free, key=lambda p: abs(p - j))
        return p, p
    places = [p for p in range(lo, hi + 2) if all(p <= s or p > e for s, e in taken)]
    p = min(places, key=lambda p: abs(p - j))
    return p, p - 1


def _after(at: int, src: Words, points: list[int | None], lo: int, hi: int, proportional) -> tuple[int, int]:
    """A standalone tag's place: after the last target word aligned to the source word before it (within [lo, hi];
    span (j + 1, j): an empty span after word j)."""
    before = [k for k, (_, e) in enumerate(src.spans) if e <= at]
    for k in reversed(before):
        hits = [j for j, p in enumerate(points) if p == k and lo <= j <= hi]
        if hits:
            return (max(hits) + 1, max(hits))
    if not before:
        return (lo, lo - 1)
    j = min(hi, max(lo - 1, proportional(at)))
    return (j + 1, j)


def _render(tags: list[Tag], elements: list[_Element], out: Words, escape: bool) -> str:
    """The output text, escaped, with each element's tags at its target words' edges (nested as the tree)."""
    n = len(out.spans)
    before: list[list[str]] = [[] for _ in range(n + 1)]  # opens before word j; closes and voids after word j - 1
    after: list[list[str]] = [[] for _ in range(n + 1)]

    def emit(element: _Element) -> None:
        first, last = element.span
        if element.open is not None and element.open == element.close:
            after[last + 1].append(tags[element.open].text)
            return
        if element.open is not None:
            (before[first] if first <= last else after[first]).append(tags[element.open].text)
        for child in element.children:
            emit(child)
        if element.close is not None:
            after[max(last, first - 1) + 1].append(tags[element.close].text)

    for element in elements:
        emit(element)
    text, pieces, pos = out.text, [], 0
    esc = (lambda t: html.escape(t, quote=False)) if escape else str  # noqa: E731
    for j in range(n + 1):
        cut = out.spans[j][0] if j < n else len(text)
        edge = out.spans[j - 1][1] if j else 0
        pieces += [esc(text[pos:edge]), *after[j], esc(text[edge:cut]), *before[j]]
        pos = cut
    return "".join(pieces)


def _fallback(tagged: Tagged, out: Words, escape: bool) -> str:
    """Tags that cannot be nested again: all of them before the translation, in their order (counted as fallbacks)."""
    return "".join(t.text for t in tagged.tags) + (html.escape(out.text, quote=False) if escape else out.text)


__all__ = ["Placed", "Tag", "Tagged", "pair_tags", "place", "source_words", "target_words"]
