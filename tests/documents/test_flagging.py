"""A segment whose placeholders did not survive is flagged, not written: PO keeps it untranslated with a comment,
XLIFF gives it no target and a note (no server: the formats' writers directly)."""

from __future__ import annotations

import polib
from lxml import etree

from app.documents.l10n import Gettext, Xliff
from app.protect import Chunk
from tests.documents import build


def test_po_flagged_entry_stays_untranslated():
    """Flagging one plural form leaves the whole entry untranslated, with the reason; the others are fuzzy."""
    po = Gettext(build.gettext(), "es")
    by_text = {s.text: s for s in po.segments}
    by_text["%d house"].write([Chunk("%d casa", None)])
    by_text["%d houses"].flag("placeholders lost")
    by_text[build.PLAIN[0]].write([Chunk("Buenos días.", None)])
    out = {e.msgid: e for e in polib.pofile(po.save().decode())}
    plural = out["%d house"]
    assert plural.msgstr_plural == {0: "", 1: ""} and "fuzzy" not in plural.flags
    assert plural.tcomment.startswith("machine translation withheld: placeholders lost")
    assert out[build.PLAIN[0]].msgstr == "Buenos días." and "fuzzy" in out[build.PLAIN[0]].flags


def test_xliff_flagged_unit_gets_a_note():
    """XLIFF 1.2 and 2.0: no target, a note with the reason."""
    for source in (build.XLIFF12, build.XLIFF20):
        doc = Xliff(source.encode(), "es")
        doc.segments[1].flag("placeholders lost")
        root = etree.fromstring(doc.save())
        ns = {"x": root.nsmap[None]}
        assert len(root.findall(".//x:target", ns)) == 0
        assert "placeholders lost" in root.findtext(".//x:note", namespaces=ns)
