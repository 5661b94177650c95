"""Small files of every format, built with the libraries that read them, for the document tests and the benchmark."""

from __future__ import annotations

import io
import zipfile

import docx
import polib
import pptx
import srt
from odfdo import Document, DrawPage, Frame, Header, Link, Paragraph, Span, Table
from pptx.util import Inches

PLAIN = ["Good morning.", "Where is the station?", "The house is big.", "I would like a cup of coffee."]
EMOJI = "I ❤️ Paris"
PRINTF = "Hello %s, you have %d new messages."


def word(paragraphs: list[str] = PLAIN) -> bytes:
    """A .docx: plain paragraphs, one with a bold run, one with placeholders, a 2x2 table, a header and a footer."""
    doc = docx.Document()
    for text in paragraphs:
        doc.add_paragraph(text)
    styled = doc.add_paragraph("The house is ")
    styled.add_run("very").bold = True
    styled.add_run(" big.")
    doc.add_paragraph(PRINTF)
    doc.add_paragraph(EMOJI)
    table = doc.add_table(rows=2, cols=2)
    for cell, text in zip(table._cells, PLAIN, strict=True):
        cell.text = text
    doc.sections[0].header.paragraphs[0].text = "The book is red."
    doc.sections[0].footer.paragraphs[0].text = "Thank you very much."
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def slides() -> bytes:
    """A .pptx: a title, a text box with a bold run and a link, a table, and slide notes."""
    prs = pptx.Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[5])
    slide.shapes.title.text = PLAIN[0]
    box = slide.shapes.add_textbox(Inches(1), Inches(2), Inches(6), Inches(1)).text_frame
    para = box.paragraphs[0]
    for text, bold, link in (
        ("The house is ", False, None),
        ("very", True, None),
        (" big.", False, "https://example.com/"),
    ):
        run = para.add_run()
        run.text, run.font.bold = text, bold
        if link:
            run.hyperlink.address = link
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(3), Inches(6), Inches(1)).table
    for i, text in enumerate(PLAIN):
        table.cell(i // 2, i % 2).text = text
    slide.notes_slide.notes_text_frame.text = "Thank you very much."
    out = io.BytesIO()
    prs.save(out)
    return out.getvalue()


def odt() -> bytes:
    """An .odt: a heading, plain paragraphs, one with a styled span and a link, a table."""
    doc = Document("text")
    doc.body.append(Header(1, "The book is red."))
    for text in PLAIN:
        doc.body.append(Paragraph(text))
    styled = Paragraph("The house is ")
    styled.append(Span("very", style="Strong"))
    styled.append(Link("https://example.com/", text=" big."))
    doc.body.append(styled)
    table = Table("T", width=2, height=2)
    for i, text in enumerate(PLAIN):
        table.set_value((i % 2, i // 2), text)
    doc.body.append(table)
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def odp() -> bytes:
    """An .odp: two slides with text frames."""
    doc = Document("presentation")
    for i in range(2):
        page = DrawPage(f"page{i}", name=f"Slide {i}")
        page.append(Frame.text_frame(PLAIN[2 * i : 2 * i + 2], size=("10cm", "5cm"), position=("1cm", "1cm")))
        doc.body.append(page)
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


CHAPTER = (
    '<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><head><title>{0}</title>'
    '</head><body><h1>{0}</h1><p>{1} <a href="https://example.com/">{2}</a></p><pre><code>x = 1</code></pre>'
    '<p translate="no">Acme Corp</p></body></html>'
)
OPF = (
    '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
    '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">x</dc:identifier>'
    "<dc:title>Book</dc:title><dc:language>en</dc:language></metadata><manifest>"
    '<item id="c1" href="text/one.xhtml" media-type="application/xhtml+xml"/>'
    '<item id="c2" href="text/two.xhtml" media-type="application/xhtml+xml"/>'
    '<item id="css" href="style.css" media-type="text/css"/></manifest>'
    '<spine><itemref idref="c1"/><itemref idref="c2"/></spine></package>'
)
CONTAINER = (
    '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
    '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
    "</rootfiles></container>"
)


def epub() -> bytes:
    """An .epub: mimetype (stored, first), container, OPF, two XHTML chapters and a stylesheet."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        z.writestr("META-INF/container.xml", CONTAINER)
        z.writestr("OEBPS/content.opf", OPF)
        z.writestr("OEBPS/text/one.xhtml", CHAPTER.format(PLAIN[0], PLAIN[1], PLAIN[2]))
        z.writestr("OEBPS/text/two.xhtml", CHAPTER.format(PLAIN[3], PLAIN[2], PLAIN[1]))
        z.writestr("OEBPS/style.css", "p { margin: 0 }")
    return out.getvalue()


def subtitles() -> bytes:
    """An .srt of four cues, one in italics."""
    cues = [
        srt.Subtitle(i + 1, srt.timedelta(seconds=2 * i), srt.timedelta(seconds=2 * i + 1.5), text)
        for i, text in enumerate([*PLAIN[:3], "<i>Thank you very much.</i>"])
    ]
    return srt.compose(cues).encode()


def gettext() -> bytes:
    """A .po: plain, python-format, plural, already translated and obsolete entries, with comments and flags."""
    po = polib.POFile()
    po.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Plural-Forms": "nplurals=2; plural=(n != 1);"}
    po.append(polib.POEntry(msgid=PLAIN[0], comment="greeting", occurrences=[("app.py", "3")]))
    po.append(polib.POEntry(msgid="Hello %(name)s, you have {count} new messages.", flags=["python-format"]))
    po.append(polib.POEntry(msgid="%d house", msgid_plural="%d houses", msgstr_plural={0: "", 1: ""}))
    po.append(polib.POEntry(msgid=PLAIN[1], msgstr="¿Dónde está la estación?"))
    po.append(polib.POEntry(msgid=PLAIN[2], obsolete=True))
    return po.__unicode__().encode()


XLIFF12 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file source-language="en" datatype="plaintext" original="app">
    <body>
      <trans-unit id="1"><source>Good morning.</source></trans-unit>
      <trans-unit id="2"><source>Click <g id="1">here</g> to see %s files.</source></trans-unit>
      <trans-unit id="3"><source>The house is big.<x id="2"/></source></trans-unit>
      <trans-unit id="4" translate="no"><source>Acme Corp</source></trans-unit>
    </body>
  </file>
</xliff>
"""
XLIFF20 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="en">
  <file id="f1">
    <unit id="1"><segment><source>Good morning.</source></segment></unit>
    <unit id="2"><segment><source>Click <pc id="1">here</pc> to see {count} files.</source></segment></unit>
    <unit id="3"><segment><source>The house is big.<ph id="2"/></source></segment></unit>
    <unit id="4" translate="no"><segment><source>Acme Corp</source></segment></unit>
  </file>
</xliff>
"""
HTML = (
    "<!DOCTYPE html><html><head><title>Good morning.</title><style>p { color: red }</style></head><body>"
    '<p>Where is the station? <a href="https://example.com/">The house is big.</a></p>'
    f'<p translate="no">Acme Corp</p><pre><code>print("hello")</code></pre><p>{EMOJI}</p></body></html>'
)
TEXT = "Good morning.\n\n  Where is the station?\nThe house is big.\n"
