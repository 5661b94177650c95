"""HTML (text nodes, as /translate's format "html") and EPUB (the XHTML documents its OPF manifest lists)."""

from __future__ import annotations

import html
import io
import posixpath
import zipfile
from urllib.parse import unquote

from app.documents import Segment, one_run
from app.documents.limits import open_zip, parse_xml
from app.documents.plain import decode
from app.settings import Settings
from app.text import html_layout

CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}rootfile"
OPF_ITEM = "{http://www.idpf.org/2007/opf}item"
XHTML = "application/xhtml+xml"


class HtmlFile:
    """An .html (or XHTML) file: each sentence is a segment (inline tags inside it go back by alignment); markup,
    script, style, code, pre and elements marked translate="no" stay byte for byte."""

    def __init__(self, data: bytes, kind: str = "html"):
        self.layout = html_layout(decode(data, kind), split=True, inline=True)
        self.translations = [self._markup(i, u) for i, u in enumerate(self.layout.units)]
        self.segments: list[Segment] = [self._segment(i, u) for i, u in enumerate(self.layout.units)]

    def _markup(self, i: int, unit: str) -> str:
        """Unit i as it stands in the file: its text, with its inline tags (escaped text) when it has some."""
        tagged = self.layout.tagged.get(i)
        if tagged is None:
            return unit
        return "".join(p if kind == "tag" else html.escape(p, quote=False) for kind, p in tagged.pieces())

    def _segment(self, i: int, unit: str) -> Segment:
        """Unit i as a segment: a sentence with inline tags keeps them as markup, put back by alignment."""
        tagged = self.layout.tagged.get(i)
        if tagged is None:
            return one_run(unit, self._writer(i))
        text = "".join(p for _, p in tagged.pieces())
        return one_run(text, self._writer(i), markup=True, escape=lambda t: html.escape(t, quote=False))

    def _writer(self, i: int):
        """Keep unit i's translation."""
        return lambda text: self.translations.__setitem__(i, text)

    def save(self) -> bytes:
        """The markup with every unit's translation (HTML-escaped) in place."""
        return self.layout.join(self.translations).encode("utf-8")


class Epub:
    """An .epub: the XHTML documents of its manifest go through the HTML path; every other entry is copied."""

    def __init__(self, data: bytes, settings: Settings):
        self.archive = open_zip(data, settings, "epub")
        container = parse_xml(self.archive.read("META-INF/container.xml"), "file: META-INF/container.xml")
        opf_path = container.find(f".//{CONTAINER}").get("full-path")
        opf = parse_xml(self.archive.read(opf_path), f"file: {opf_path}")
        base = posixpath.dirname(opf_path)
        names = [
            posixpath.normpath(posixpath.join(base, unquote(item.get("href", ""))))
            for item in opf.iter(OPF_ITEM)
            if item.get("media-type") == XHTML
        ]
        self.pages = {name: HtmlFile(self.archive.read(name), "xhtml") for name in names}
        self.segments = [s for page in self.pages.values() for s in page.segments]

    def save(self) -> bytes:
        """A new archive: entries in their order (mimetype first, stored) with the translated pages."""
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as target:
            for info in self.archive.infolist():
                page = self.pages.get(info.filename)
                target.writestr(info, page.save() if page else self.archive.read(info))
        return out.getvalue()
