"""Localisation files: gettext .po (polib) and XLIFF 1.2 / 2.0 (lxml). Only untranslated entries are translated;
a machine translation whose lowest sentence confidence is below the threshold (or that has none) is marked for review
(PO `fuzzy`, which msgfmt leaves out of the compiled catalogue; XLIFF 1.2 `needs-review-translation`; 2.0 `initial`
with subState `mt-server:needs-review`), the others are translated (PO without `fuzzy`, XLIFF `translated`), each with
its confidence in a comment or note; an entry whose placeholders did not survive is left untranslated with a comment
saying why."""

from __future__ import annotations

import re
from html import escape

import polib
from lxml import etree

from app.documents import Segment, one_run
from app.documents.limits import parse_xml, xml_parser
from app.documents.plain import decode
from app.errors import ApiError

NPLURALS = re.compile(r"nplurals\s*=\s*(\d+)")
XLIFF12 = "urn:oasis:names:tc:xliff:document:1.2"
XLIFF20 = "urn:oasis:names:tc:xliff:document:2.0"
FLAGGED = "machine translation withheld: {reason}"
RATED = "machine translation confidence: {value}"
NEEDS_REVIEW = "mt-server:needs-review"  # XLIFF 2.0 subState of a low-confidence segment (an authority:value)


def rated(confidence: float | None) -> str:
    """The note or comment that says a translation's confidence."""
    return RATED.format(value="unknown" if confidence is None else f"{confidence:.2f}")


class Gettext:
    """A .po file: untranslated, non-obsolete entries; plural entries get every plural form."""

    def __init__(self, data: bytes, target: str):
        try:
            self.po = polib.pofile(decode(data, "po"))
        except (OSError, ValueError) as exc:
            raise ApiError(422, "validation", f"file: not a valid po file ({exc})") from None
        self.po.metadata["Language"] = target
        match = NPLURALS.search(self.po.metadata.get("Plural-Forms", ""))
        self.nplurals = int(match.group(1)) if match else 2
        self.segments: list[Segment] = []
        for entry in self.po.untranslated_entries():
            if not entry.obsolete:
                self._add(entry)

    def _add(self, entry: polib.POEntry) -> None:
        """One segment for msgid and, for a plural entry, one for msgid_plural."""
        done: dict[int, str] = {}
        confidences: dict[int, float | None] = {}
        sources = [entry.msgid] + ([entry.msgid_plural] if entry.msgid_plural else [])

        def writer(index: int):
            def write(text: str) -> None:
                done[index] = text
                if len(done) < len(sources):  # a flagged form never arrives: the entry stays untranslated
                    return
                if entry.msgid_plural:
                    entry.msgstr_plural = {n: done[min(n, 1)] for n in range(self.nplurals)}
                else:
                    entry.msgstr = done[0]

            return write

        def rater(index: int):
            def rate(confidence: float | None, low: bool) -> None:
                confidences[index] = confidence
                if low or confidence is None:  # fuzzy: left out of the compiled catalogue until a translator looks
                    if "fuzzy" not in entry.flags:
                        entry.flags.append("fuzzy")
                if len(confidences) == len(sources):
                    known = [c for c in confidences.values() if c is not None]
                    lowest = min(known) if len(known) == len(sources) else None
                    entry.tcomment = "\n".join(filter(None, [entry.tcomment, rated(lowest)]))

            return rate

        def flag(reason: str) -> None:
            entry.msgstr, entry.msgstr_plural = "", {n: "" for n in entry.msgstr_plural}
            entry.tcomment = "\n".join(filter(None, [FLAGGED.format(reason=reason), entry.tcomment]))

        for i, source in enumerate(sources):
            if source.strip():
                self.segments.append(one_run(source, writer(i), flag=flag, markup=True, rate=rater(i)))

    def save(self) -> bytes:
        """The catalog, written by polib."""
        return self.po.__unicode__().encode("utf-8")


class Xliff:
    """An XLIFF 1.2 or 2.0 file: each source without a target (outside translate="no") gets one; inline codes
    are kept as they are."""

    def __init__(self, data: bytes, target: str):
        self.tree = parse_xml(data)
        self.ns = etree.QName(self.tree).namespace
        if self.ns not in (XLIFF12, XLIFF20):
            raise ApiError(415, "unsupported_media_type", f"file: not XLIFF 1.2 or 2.0 (namespace {self.ns})")
        self.v2 = self.ns == XLIFF20
        for file in self.tree.iter(f"{{{self.ns}}}file"):
            file.set("trgLang" if self.v2 else "target-language", target)
        if self.v2:
            self.tree.set("trgLang", target)
        self.segments = [s for pair in self._pairs() if (s := self._segment(*pair))]

    def _pairs(self):
        """(container, source) of every translatable unit: 1.2 trans-unit, 2.0 segment."""
        unit = "unit" if self.v2 else "trans-unit"
        for element in self.tree.iter(f"{{{self.ns}}}{unit}"):
            if element.get("translate") == "no":
                continue
            for holder in element.iter(f"{{{self.ns}}}segment") if self.v2 else [element]:
                source = holder.find(f"{{{self.ns}}}source")
                if source is not None and holder.find(f"{{{self.ns}}}target") is None:
                    yield holder, source

    def _segment(self, holder, source) -> Segment | None:
        """The source's inner XML as text (tags and character references kept as they are)."""
        inner = escape(source.text or "", quote=False) + "".join(
            etree.tostring(child, encoding="unicode", with_tail=True) for child in source
        )
        if not inner.strip():
            return None

        def write(text: str) -> None:
            wrapper = etree.fromstring(f'<target xmlns="{self.ns}">{text}</target>', xml_parser())
            target = etree.Element(f"{{{self.ns}}}target")
            target.text, target[:] = wrapper.text, list(wrapper)
            source.addnext(target)
            target.tail = source.tail

        def flag(reason: str) -> None:
            self._note(holder, FLAGGED.format(reason=reason))

        def rate(confidence: float | None, low: bool) -> None:
            review = low or confidence is None
            target = holder.find(f"{{{self.ns}}}target")
            if self.v2:
                holder.set("state", "initial" if review else "translated")
                if review:
                    holder.set("subState", NEEDS_REVIEW)
                where = f" (segment {holder.get('id')})" if holder.get("id") else ""
                self._note(holder, rated(confidence) + where, category="mt-confidence", appliesTo="target")
            else:
                target.set("state", "needs-review-translation" if review else "translated")
                note = etree.Element(f"{{{self.ns}}}note", {"from": "mt-server", "annotates": "target"})
                note.text, note.tail = rated(confidence), target.tail
                target.addnext(note)  # after the target, before any alt-trans (the 1.2 schema's order)

        escaped = lambda t: escape(t, quote=False)  # noqa: E731
        return one_run(inner, write, flag=flag, markup=True, escape=escaped, rate=rate)

    def _note(self, holder, text: str, **attrs: str) -> None:
        """A note on a 1.2 trans-unit (after its target), or in a 2.0 unit's notes (its first child)."""
        if not self.v2:
            etree.SubElement(holder, f"{{{self.ns}}}note", attrs).text = text
            return
        unit = holder.getparent()
        notes = unit.find(f"{{{self.ns}}}notes")
        if notes is None:
            notes = etree.Element(f"{{{self.ns}}}notes")
            unit.insert(0, notes)
        etree.SubElement(notes, f"{{{self.ns}}}note", attrs).text = text

    def save(self) -> bytes:
        """The XML, with its declaration."""
        return etree.tostring(self.tree, xml_declaration=True, encoding="UTF-8")
