"""A segment whose placeholders did not survive is flagged, not written: PO keeps it untranslated with a comment,
XLIFF gives it no target and a note, while every other segment is written (no server: the pipeline over a fake
engine, and the formats' writers directly)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import polib
import pytest
from lxml import etree

from app.documents.l10n import Gettext, Xliff, rated
from app.documents.pipeline import translate_document
from app.protect import Chunk
from tests.documents import build


class Engine:
    """Rounds over a fake model: every text comes back as it was sent (marks kept), except that a text naming
    `files` loses its marks in round 1 and gains a placeholder in round 2, so its segment can only be flagged."""

    def __init__(self):
        checkpoint = SimpleNamespace(tokenizer=SimpleNamespace(spells=lambda c: True))
        route = SimpleNamespace(entry=SimpleNamespace(checkpoint=checkpoint))
        self.plan = SimpleNamespace(route=route, keep=lambda text: [])  # no glossary

    async def translate(self, texts: list[str]) -> dict[str, str]:
        return {t: ("%d archivos perdidos" if "files" in t else t) for t in texts}

    async def run(self, layouts: list, sources: list[str]) -> list[str]:
        """Segments whose tags go back by alignment: as `translate` answers their masked source."""
        return [(await self.translate([s]))[s] for s in sources]

    def rate(self, seg, sources: list[str]) -> None:
        """Every written segment is confident."""
        seg.rate(0.9, False)


def units(root) -> dict[str, etree._Element]:
    """The XLIFF units by id (1.2 trans-unit, 2.0 unit)."""
    ns = root.nsmap[None]
    return {u.get("id"): u for u in root.iter(f"{{{ns}}}trans-unit", f"{{{ns}}}unit")}


@pytest.mark.parametrize("source", [build.XLIFF12, build.XLIFF20], ids=["xliff-1.2", "xliff-2.0"])
def test_xliff_unit_that_lost_its_placeholder_gets_a_note_and_no_target(source):
    """Units 1 and 3 are written as the engine answered; unit 2 (`%s`/`{count}` lost) has no target and the note;
    unit 4 (translate="no") is left alone."""
    doc = Xliff(source.encode(), "es")
    assert asyncio.run(translate_document(doc, Engine())) == 1
    root = etree.fromstring(doc.save())
    ns = {"x": root.nsmap[None]}
    by_id = units(root)
    assert [by_id[i].findtext(".//x:target", namespaces=ns) for i in "13"] == ["Good morning.", "The house is big."]
    assert by_id["2"].find(".//x:target", ns) is None
    assert [n.text for n in by_id["2"].iterfind(".//x:note", ns)] == [
        "machine translation withheld: placeholders or formatting marks were lost in translation"
    ]
    assert [n.text for i in "13" for n in by_id[i].iterfind(".//x:note", ns)] == [rated(0.9)] * 2  # confidence only
    assert [n for n in by_id["4"].iterfind(".//x:note", ns)] == []
    assert by_id["4"].find(".//x:target", ns) is None


def test_po_flagged_entry_stays_untranslated():
    """Flagging one plural form leaves the whole entry untranslated, with the reason; a low-confidence one is fuzzy."""
    po = Gettext(build.gettext(), "es")
    by_text = {s.text: s for s in po.segments}
    by_text["%d house"].write([Chunk("%d casa", None)])
    by_text["%d houses"].flag("placeholders lost")
    by_text[build.PLAIN[0]].write([Chunk("Buenos días.", None)])
    by_text[build.PLAIN[0]].rate(0.2, True)
    out = {e.msgid: e for e in polib.pofile(po.save().decode())}
    plural = out["%d house"]
    assert plural.msgstr_plural == {0: "", 1: ""} and "fuzzy" not in plural.flags
    assert plural.tcomment.startswith("machine translation withheld: placeholders lost")
    assert out[build.PLAIN[0]].msgstr == "Buenos días." and "fuzzy" in out[build.PLAIN[0]].flags
