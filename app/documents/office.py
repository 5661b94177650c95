"""Word (.docx, python-docx) and PowerPoint (.pptx, python-pptx): a paragraph is a segment, its runs keep their
formatting (bold, italic, links...) through open/close marks; tables, headers, footers and slide notes included."""

from __future__ import annotations

import io

import docx
import pptx
from docx.text.hyperlink import Hyperlink
from lxml import etree
from pptx.enum.shapes import MSO_SHAPE_TYPE

from app.documents import Segment, assign, styled_runs
from app.documents.limits import open_zip
from app.settings import Settings


def _format_key(run, link: str | None = None) -> tuple:
    """What a run looks like: its run properties (XML) and the link it belongs to."""
    props = run._r.rPr
    return (etree.tostring(props) if props is not None else b"", link)


def paragraph_segment(runs: list, keys: list[tuple]) -> Segment | None:
    """A segment over a paragraph's runs (None when it has no text): the translation is spread over the same runs."""
    texts = [r.text for r in runs]
    if not "".join(texts).strip():
        return None
    spans = styled_runs(texts, keys)

    def write(chunks) -> None:
        for run, text in zip(runs, assign(chunks, spans), strict=True):
            run.text = text

    return Segment(spans, write)


class Word:
    """A .docx: body paragraphs, table cells (nested too), and every section's headers and footers."""

    def __init__(self, data: bytes, settings: Settings):
        open_zip(data, settings, "docx")
        self.doc = docx.Document(io.BytesIO(data))
        seen: set[int] = set()
        paragraphs = list(self._paragraphs(self.doc, seen))
        for section in self.doc.sections:
            for part in (section.header, section.footer, section.first_page_header, section.first_page_footer,
                         section.even_page_header, section.even_page_footer):  # fmt: skip
                if not part.is_linked_to_previous:
                    paragraphs += self._paragraphs(part, seen)
        self.segments = [s for p in paragraphs if (s := self._segment(p))]

    def _paragraphs(self, container, seen: set[int]):
        """Paragraphs of a body, cell, header or footer, then those of its tables (merged cells once)."""
        yield from container.paragraphs
        for table in container.tables:
            for row in table.rows:
                for cell in row.cells:
                    if id(cell._tc) not in seen:
                        seen.add(id(cell._tc))
                        yield from self._paragraphs(cell, seen)

    @staticmethod
    def _segment(paragraph) -> Segment | None:
        """A paragraph's runs, those inside links included, in document order."""
        runs, keys = [], []
        for item in paragraph.iter_inner_content():
            inner = item.runs if isinstance(item, Hyperlink) else [item]
            link = item.address if isinstance(item, Hyperlink) else None
            runs += inner
            keys += [_format_key(r, link) for r in inner]
        return paragraph_segment(runs, keys)

    def save(self) -> bytes:
        """The document, saved by python-docx."""
        out = io.BytesIO()
        self.doc.save(out)
        return out.getvalue()


class PowerPoint:
    """A .pptx: text frames of every shape (in groups too), table cells, and slide notes."""

    def __init__(self, data: bytes, settings: Settings):
        open_zip(data, settings, "pptx")
        self.prs = pptx.Presentation(io.BytesIO(data))
        frames = []
        for slide in self.prs.slides:
            frames += self._frames(slide.shapes)
            if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
                frames.append(slide.notes_slide.notes_text_frame)
        paragraphs = [p for frame in frames for p in frame.paragraphs]
        self.segments = [s for p in paragraphs if (s := paragraph_segment(p.runs, [_format_key(r) for r in p.runs]))]

    def _frames(self, shapes) -> list:
        """Text frames of shapes, group members and table cells."""
        frames = []
        for shape in shapes:
            if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
                frames += self._frames(shape.shapes)
            elif getattr(shape, "has_table", False) and shape.has_table:
                frames += [cell.text_frame for row in shape.table.rows for cell in row.cells]
            elif shape.has_text_frame:
                frames.append(shape.text_frame)
        return frames

    def save(self) -> bytes:
        """The presentation, saved by python-pptx."""
        out = io.BytesIO()
        self.prs.save(out)
        return out.getvalue()
