"""Round trips for every format on the built-in model: the output opens with the same structure, every plain segment
reads as /translate of it, formatting, links, placeholders, timings and untranslatable parts are unchanged."""

from __future__ import annotations

import io
import re
import zipfile

import docx
import polib
import pptx
import pytest
import srt
from lxml import etree
from odfdo import Document

from tests.documents import build
from tests.documents.client import oracle, translate_file

PLACEHOLDERS = re.compile(r"%\(\w+\)s|%[sd]|\{\w+\}")


def test_docx(builtin):
    """Paragraphs, runs, bold, table cells, header and footer."""
    data = build.word()
    out = docx.Document(io.BytesIO(translate_file(builtin.url, "a.docx", data)))
    src = docx.Document(io.BytesIO(data))
    assert [len(p.runs) for p in out.paragraphs] == [len(p.runs) for p in src.paragraphs]
    assert len(out.tables[0]._cells) == 4
    want = oracle(builtin.url, build.PLAIN + ["The book is red.", "Thank you very much."])
    assert [p.text for p in out.paragraphs[:4]] == [want[t] for t in build.PLAIN]
    assert [c.text for c in out.tables[0]._cells] == [want[t] for t in build.PLAIN]
    assert out.sections[0].header.paragraphs[0].text == want["The book is red."]
    assert out.sections[0].footer.paragraphs[0].text == want["Thank you very much."]
    styled = out.paragraphs[4].runs
    assert [r.bold for r in styled] == [None, True, None] and all(r.text.strip() for r in styled)
    assert PLACEHOLDERS.findall(out.paragraphs[5].text) == ["%s", "%d"]
    assert "❤️" in out.paragraphs[6].text


def test_pptx(builtin):
    """Shapes, runs with bold and a link, table cells, slide notes."""
    out = pptx.Presentation(io.BytesIO(translate_file(builtin.url, "a.pptx", build.slides())))
    slide = out.slides[0]
    want = oracle(builtin.url, build.PLAIN + ["Thank you very much."])
    assert slide.shapes.title.text == want[build.PLAIN[0]]
    runs = [s for s in slide.shapes if s.has_text_frame and s != slide.shapes.title][0].text_frame.paragraphs[0].runs
    assert [r.font.bold for r in runs] == [False, True, False] and all(r.text.strip() for r in runs)
    assert runs[2].hyperlink.address == "https://example.com/"
    table = [s for s in slide.shapes if s.has_table][0].table
    assert [table.cell(i // 2, i % 2).text for i in range(4)] == [want[t] for t in build.PLAIN]
    assert slide.notes_slide.notes_text_frame.text == want["Thank you very much."]


def test_odt(builtin):
    """Heading, paragraphs, a styled span and a link, a table."""
    out = Document(io.BytesIO(translate_file(builtin.url, "a.odt", build.odt())))
    want = oracle(builtin.url, build.PLAIN + ["The book is red."])
    assert out.body.get_headers()[0].text_recursive == want["The book is red."]
    src = [p.text_recursive for p in Document(io.BytesIO(build.odt())).body.get_paragraphs()]
    paragraphs = [p.text_recursive for p in out.body.get_paragraphs()]
    assert len(paragraphs) == len(src)
    assert [p for p, s in zip(paragraphs, src, strict=True) if s in want] == [want[s] for s in src if s in want]
    styled = out.body.get_paragraphs()[src.index("The house is very[big.](https://example.com/)")]
    assert styled.get_span(0).text.strip() and styled.get_span(0).get_attribute("text:style-name") == "Strong"
    assert styled.get_link(0).get_attribute("xlink:href") == "https://example.com/"


def test_odp(builtin):
    """Two slides, their frames and paragraphs."""
    out = Document(io.BytesIO(translate_file(builtin.url, "a.odp", build.odp())))
    want = oracle(builtin.url, build.PLAIN)
    src = Document(io.BytesIO(build.odp())).body
    assert len(out.body.get_draw_pages()) == len(src.get_draw_pages())
    assert [p.text_recursive for p in out.body.get_paragraphs()] == [
        want[p.text_recursive] for p in src.get_paragraphs()
    ]


def test_epub(builtin):
    """Chapters translated, markup, code and translate="no" unchanged, every other entry copied, mimetype first."""
    data = translate_file(builtin.url, "a.epub", build.epub())
    src, out = zipfile.ZipFile(io.BytesIO(build.epub())), zipfile.ZipFile(io.BytesIO(data))
    assert out.namelist() == src.namelist() and out.infolist()[0].compress_type == zipfile.ZIP_STORED
    assert out.read("OEBPS/style.css") == src.read("OEBPS/style.css")
    want = oracle(builtin.url, build.PLAIN)
    page = etree.fromstring(out.read("OEBPS/text/one.xhtml"))
    ns = {"h": "http://www.w3.org/1999/xhtml"}
    assert page.findtext(".//h:h1", namespaces=ns) == want[build.PLAIN[0]]
    assert page.find(".//h:a", ns).text == want[build.PLAIN[2]] and page.find(".//h:a", ns).get("href")
    assert page.findtext(".//h:code", namespaces=ns) == "x = 1"
    assert page.findall(".//h:p", ns)[-1].text == "Acme Corp"
    assert [e.tag for e in page.iter()] == [e.tag for e in etree.fromstring(src.read("OEBPS/text/one.xhtml")).iter()]


def test_srt(builtin):
    """Cue count, indices and timings unchanged; italics kept."""
    out = list(srt.parse(translate_file(builtin.url, "a.srt", build.subtitles()).decode()))
    src = list(srt.parse(build.subtitles().decode()))
    assert [(c.index, c.start, c.end) for c in out] == [(c.index, c.start, c.end) for c in src]
    want = oracle(builtin.url, build.PLAIN[:3])
    assert [c.content for c in out[:3]] == [want[t] for t in build.PLAIN[:3]]
    assert out[3].content.startswith("<i>") and out[3].content.endswith("</i>")


def confident(entry: polib.POEntry) -> bool:
    """Whether a machine-translated entry's confidence comment is at or above the default threshold (0.5)."""
    value = re.search(r"machine translation confidence: ([0-9.]+)", entry.tcomment or "")
    return value is not None and float(value.group(1)) >= 0.5


def test_po(builtin):
    """Untranslated entries get translations with their placeholders, fuzzy when their confidence is low; plural
    forms, comments, existing and obsolete entries stay."""
    po = polib.pofile(translate_file(builtin.url, "a.po", build.gettext()).decode())
    entries = {e.msgid: e for e in po}
    want = oracle(builtin.url, build.PLAIN[:1])
    first = entries[build.PLAIN[0]]
    assert first.msgstr == want[build.PLAIN[0]] and ("fuzzy" in first.flags) != confident(first)
    assert first.comment == "greeting" and first.occurrences == [("app.py", "3")]
    fmt = entries["Hello %(name)s, you have {count} new messages."]
    assert sorted(PLACEHOLDERS.findall(fmt.msgstr)) == ["%(name)s", "{count}"] and "python-format" in fmt.flags
    plural = entries["%d house"]
    assert sorted(plural.msgstr_plural) == [0, 1] and all("%d" in v for v in plural.msgstr_plural.values())
    assert entries[build.PLAIN[1]].msgstr == "¿Dónde está la estación?" and "fuzzy" not in entries[build.PLAIN[1]].flags
    assert entries[build.PLAIN[2]].obsolete and not entries[build.PLAIN[2]].msgstr
    assert po.metadata["Language"] == "es"


@pytest.mark.parametrize("version", ["1.2", "2.0"])
def test_xliff(builtin, version):
    """Targets for translatable units, inline codes and placeholders kept, review state set, translate="no" skipped."""
    source = build.XLIFF12 if version == "1.2" else build.XLIFF20
    root = etree.fromstring(translate_file(builtin.url, "a.xlf", source.encode()))
    ns = {"x": root.nsmap[None]}
    units = root.findall(".//x:trans-unit" if version == "1.2" else ".//x:unit", ns)
    targets = [u.find(".//x:target", ns) for u in units]
    assert targets[3] is None
    assert targets[0].text == oracle(builtin.url, ["Good morning."])["Good morning."]
    for unit, target in zip(units[:3], targets[:3], strict=True):
        source_el = unit.find(".//x:source", ns)
        assert [(e.tag, e.attrib) for e in target] == [(e.tag, e.attrib) for e in source_el]
        state = target.get("state") if version == "1.2" else unit.find("x:segment", ns).get("state")
        note = unit.find(".//x:note", ns).text
        low = float(note.split(": ")[1].split()[0]) < 0.5
        assert state == ("needs-review-translation" if low else "translated") if version == "1.2" else (
            "initial" if low else "translated"
        )
    placeholder = "%s" if version == "1.2" else "{count}"
    assert placeholder in "".join(targets[1].itertext())


def test_html_and_txt(builtin):
    """HTML: text nodes translated, code, style and translate="no" kept, emoji kept; text: lines and indentation."""
    html = translate_file(builtin.url, "a.html", build.HTML.encode()).decode()
    want = oracle(builtin.url, build.PLAIN[:3])
    assert f"<title>{want['Good morning.']}</title>" in html
    assert '<p translate="no">Acme Corp</p>' in html and '<pre><code>print("hello")</code></pre>' in html
    assert "p { color: red }" in html and "❤️" in html
    text = translate_file(builtin.url, "a.txt", build.TEXT.encode()).decode()
    assert text == f"{want['Good morning.']}\n\n  {want['Where is the station?']}\n{want['The house is big.']}\n"


def test_docx_runs_cost_nothing(builtin):
    """Runs go back by alignment: the paragraph's text, runs ignored, is the plain translation of its text; the bold
    run holds the word aligned to "very" (issue 48)."""
    doc = docx.Document()
    para = doc.add_paragraph("The ")
    para.add_run("help page").bold = True
    para.add_run(" explains how to install the program.")
    buffer = io.BytesIO()
    doc.save(buffer)
    out = docx.Document(io.BytesIO(translate_file(builtin.url, "a.docx", buffer.getvalue()))).paragraphs[0]
    plain = "The help page explains how to install the program."
    assert " ".join(out.text.split()) == " ".join(oracle(builtin.url, [plain])[plain].split())
    assert [r.bold for r in out.runs] == [None, True, None]
    assert out.runs[1].text.strip() == "página de ayuda"
    styled = docx.Document(io.BytesIO(translate_file(builtin.url, "b.docx", build.word()))).paragraphs[4]
    assert [r.text.strip() for r in styled.runs if r.bold] == ["muy"]


def test_xliff_codes_go_back_by_alignment(builtin):
    """An XLIFF paired code goes around the word aligned to the word it enclosed (issue 48)."""
    root = etree.fromstring(translate_file(builtin.url, "a.xlf", build.XLIFF12.encode()))
    ns = {"x": root.nsmap[None]}
    target = root.findall(".//x:trans-unit", ns)[1].find("x:target", ns)
    code = target[0]
    assert code.text.strip() == "aquí", etree.tostring(target)


def test_html_file_inline_tags_cost_nothing(builtin):
    """An .html file: a sentence with a link reads as the plain translation, the link around the aligned words."""
    source = '<html><body><p>The <a href="/help">help page</a> explains how to install the program.</p></body></html>'
    out = translate_file(builtin.url, "a.html", source.encode()).decode()
    plain = "The help page explains how to install the program."
    assert '<a href="/help">página de ayuda</a>' in out
    assert re.sub(r"<[^>]+>", "", out) == oracle(builtin.url, [plain])[plain]
