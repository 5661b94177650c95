"""Documents: each format family reads a file into segments and writes their translations back into it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from app.protect import Chunk

Runs = list[tuple[str, bool]]  # a segment's runs: (text, styled differently from the segment's base)


@dataclass
class Segment:
    """One unit of a document that is translated as a whole, its inline formatting as runs."""

    runs: Runs
    write: Callable[[list[Chunk]], None]  # the translation, as chunks of text that each belong to a run
    flag: Callable[[str], None] = lambda reason: None  # the translation broke a placeholder: keep the source
    markup: bool = False  # inline tags and character references in the text are kept as they are
    escape: Callable[[str], str] = str  # how translated text is written (XML-escaped in XLIFF)
    rate: Callable[[float | None, bool], None] = lambda confidence, low: None  # after write: its lowest sentence's
    # confidence (None: none) and whether that is below the threshold (a localisation file marks it for review)
    text: str = field(init=False)

    def __post_init__(self):
        self.text = "".join(t for t, _ in self.runs)


class Document(Protocol):
    """An opened file: its segments, and its bytes once they are written."""

    segments: list[Segment]

    def save(self) -> bytes:
        """The file with every written segment in place."""
        ...


def styled_runs(texts: list[str], keys: list[object]) -> Runs:
    """Runs whose formatting key differs from the key that covers the most characters are `styled`."""
    weight: dict[object, int] = {}
    for text, key in zip(texts, keys, strict=True):
        weight[key] = weight.get(key, 0) + len(text.strip())
    base = max(weight, key=weight.get) if weight else None
    return [(text, key != base and bool(text.strip())) for text, key in zip(texts, keys, strict=True)]


def assign(chunks: list[Chunk], runs: Runs) -> list[str]:
    """The text of every run: styled chunks go to their own run, base chunks to the next base run in order; when
    that would reorder the text (the translation moved a run before another), chunks fill the runs in order."""
    texts = [""] * len(runs)
    base = [i for i, (_, styled) in enumerate(runs) if not styled] or [0]
    last, order = -1, []
    for chunk in chunks:
        if chunk.run is not None and runs[chunk.run][1]:
            index = chunk.run
        else:
            later = [i for i in base if i > last]
            index = later[0] if later else max((i for i in base if i <= last), default=base[0])
        order.append(index)
        last = index
    if order != sorted(order):  # the translation moved a run: its words stay in order, runs filled one by one
        order = [min(k, len(runs) - 1) for k in range(len(chunks))]
    for chunk, index in zip(chunks, order, strict=True):
        texts[index] += chunk.text
    return texts


def one_run(text: str, write: Callable[[str], None], **kw) -> Segment:
    """A segment of one run whose translation is written as one string."""
    return Segment([(text, False)], lambda chunks: write("".join(c.text for c in chunks)), **kw)
