"""OpenDocument text and presentations (.odt, .odp, odfdo): every paragraph and heading is a segment, its spans
and links keep their styles; headers and footers (styles.xml), tables, frames and slide notes included."""

from __future__ import annotations

import io

from odfdo import Document as OdfDocument
from odfdo import Element

from app.documents import Segment, assign, styled_runs
from app.documents.limits import open_zip
from app.settings import Settings

INLINE = {"text:span", "text:a"}  # elements whose text is part of the paragraph, styled
SPACES = "text:s"

Slot = tuple[Element, str, tuple]  # an element, "text" or "tail", and the styles around that text


def _spaces_to_text(paragraph: Element) -> None:
    """Turn text:s elements into the spaces they stand for (so that text around them is one string)."""
    for spacer in paragraph.get_elements(f"descendant::{SPACES}"):
        count = int(spacer.get_attribute("text:c") or 1)
        spacer.tail = " " * count + (spacer.tail or "")
        spacer.delete(keep_tail=True)


def _slots(element: Element, key: tuple, out: list[Slot]) -> list[Slot]:
    """The text nodes of a paragraph in order; frames, notes and other own-content elements are not entered."""
    out.append((element, "text", key))
    for child in element.children:
        if child.tag in INLINE:
            style = child.get_attribute("text:style-name") or child.get_attribute("xlink:href")
            _slots(child, (*key, (child.tag, style)), out)
        out.append((child, "tail", key))
    return out


def paragraph_segment(paragraph: Element) -> Segment | None:
    """A segment over a paragraph's text nodes, each styled by the spans and links around it."""
    if not paragraph.text_recursive.strip():
        return None
    _spaces_to_text(paragraph)
    slots = _slots(paragraph, (), [])
    runs = styled_runs([getattr(el, attr) or "" for el, attr, _ in slots], [key for _, _, key in slots])

    def write(chunks) -> None:
        for (el, attr, _), text in zip(slots, assign(chunks, runs), strict=True):
            setattr(el, attr, text or None)

    return Segment(runs, write)


class OpenDocument:
    """An .odt or .odp file."""

    def __init__(self, data: bytes, settings: Settings, kind: str):
        open_zip(data, settings, kind)
        self.doc = OdfDocument(io.BytesIO(data))
        paragraphs = []
        for root in (self.doc.body, self.doc.styles.root):
            paragraphs += root.get_paragraphs() + root.get_headers()
        self.segments = [s for p in paragraphs if (s := paragraph_segment(p))]

    def save(self) -> bytes:
        """The document, saved by odfdo."""
        out = io.BytesIO()
        self.doc.save(out)
        return out.getvalue()
