"""Words of a source sentence and of its translation, and which source word each target word is aligned to."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from model.loading.tokenizer import Tokenizer

WORD = re.compile(r"\w+(?:['’-]\w+)*|[^\w\s]")


@dataclass
class Words:
    """A text's words as character spans, and the word each token falls in (None: none, e.g. EOS or a space)."""

    text: str
    spans: list[tuple[int, int]]
    tokens: list[int | None]


def _word_at(spans: list[tuple[int, int]], start: int, end: int) -> int | None:
    """The first word overlapping the characters [start, end)."""
    return next((k for k, (a, b) in enumerate(spans) if a < end and b > start), None)


def source_words(tokenizer: Tokenizer, text: str, prefix: int = 0) -> Words:
    """The words of a source sentence; `tokens` indexes its full ids (`prefix` language tokens, the text's, EOS)."""
    spans = [m.span() for m in WORD.finditer(text)]
    pieces = tokenizer.source.encode(text, return_type="proto").pieces
    shift = prefix + len(tokenizer.encode(text)) - 1 - len(pieces)  # a leading target-language code (Marian)
    chars = [0] * (len(text.encode("utf-8")) + 1)  # byte offset -> character offset
    pos = 0
    for c, ch in enumerate(text):
        for _ in range(len(ch.encode("utf-8"))):
            chars[pos] = c
            pos += 1
    chars[pos] = len(text)
    tokens: list[int | None] = [None] * (shift + len(pieces) + 1)
    for k, piece in enumerate(pieces):
        tokens[shift + k] = _word_at(spans, chars[min(piece.begin, pos)], chars[min(piece.end, pos)])
    return Words(text, spans, tokens)


def target_words(tokenizer: Tokenizer, ids: list[int]) -> Words:
    """The words of a translation (its text exactly as `tokenizer.decode(ids)`), each token in the word it writes."""
    text = tokenizer.decode(ids)
    spans = [m.span() for m in WORD.finditer(text)]
    tokens: list[int | None] = []
    start = 0
    for t in range(len(ids)):
        end = len(tokenizer.decode(ids[: t + 1]))
        tokens.append(_word_at(spans, start, end) if end > start else None)
        start = max(start, end)
    return Words(text, spans, tokens)


def majority(out: Words, src: Words, alignment: list[int]) -> list[int | None]:
    """Each target word's source word: the one most of its tokens are aligned to (ties: the first token's)."""
    votes: list[Counter] = [Counter() for _ in out.spans]
    for t, word in enumerate(out.tokens):
        if word is None or t >= len(alignment):
            continue
        p = alignment[t]
        k = src.tokens[p] if 0 <= p < len(src.tokens) else None
        if k is not None:
            votes[word][k] += 1
    return smooth([v.most_common(1)[0][0] if v else None for v in votes], out, len(src.spans))


def smooth(points: list[int | None], out: Words, size: int) -> list[int | None]:
    """Undo the alignment's usual slips: of two target words in a row on one source word, the first moves to the
    nearest source word no target word has (within 2 words: the decoder often writes a noun while still looking at
    the adjective that follows it in Spanish); a word aligned to nothing (EOS) takes its left neighbour's."""
    points, claimed = list(points), set(points)
    for j in range(len(points) - 1):
        k = points[j]
        if k is None or points[j + 1] != k:
            continue
        free = [c for d in (1, 2) for c in (k + d, k - d) if 0 <= c < size and c not in claimed]
        if free:
            points[j] = free[0]
            claimed.add(free[0])
    for j in range(1, len(points)):
        a, b = out.spans[j]
        if points[j] is None and out.text[a:b][0].isalnum():
            points[j] = points[j - 1]
    return points
