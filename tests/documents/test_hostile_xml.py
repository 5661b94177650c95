"""Hostile and malformed XML through /translate_file, in UTF-8, UTF-16 and UTF-32: entity declarations (billion
laughs, external and parameter entities), references to entities a DTD outside the file would define, and broken
markup are answered 422, in XLIFF and in the XML parts of docx, odt and epub; the same files unharmed translate."""

from __future__ import annotations

import io
import zipfile

import pytest

from tests.documents import build
from tests.documents.client import upload

LAUGHS = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10 if i else "lol"}">' for i in range(10))
ATTACKS = {  # name: (DOCTYPE, what the anchor text becomes)
    "billion_laughs": (f"<!DOCTYPE r [{LAUGHS}]>", "{anchor}&l9;"),
    "external_entity": ('<!DOCTYPE r [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>', "{anchor}&xxe;"),
    "parameter_entity": ('<!DOCTYPE r [<!ENTITY % p SYSTEM "http://127.0.0.1:9/p.dtd">%p;]>', "{anchor}"),
    "external_dtd": ('<!DOCTYPE r SYSTEM "file:///etc/passwd">', "{anchor}&nbsp;"),
    "malformed": ("", "<unclosed>{anchor}"),
}
ENCODINGS = {"UTF-8": "utf-8", "UTF-16": "utf-16", "UTF-16BE": "utf-16-be", "UTF-32": "utf-32"}
FORMATS = {  # extension: (the file, its XML part attacked (None: the file itself), a text in that part)
    "xlf": (lambda: build.XLIFF12.encode(), None, "Good morning."),
    "docx": (build.word, "word/document.xml", "Good morning."),
    "odt": (build.odt, "content.xml", "Good morning."),
    "epub": (build.epub, "OEBPS/content.opf", "<dc:title>Book"),
}


def rewrite(xml: bytes, encoding: str, attack: str | None, anchor: str) -> bytes:
    """An XML document declared and encoded in `encoding` (with the codec's byte-order mark), the attack put in."""
    text = xml.decode("utf-8")
    if text.startswith("<?xml"):
        text = text[text.index("?>") + 2 :].lstrip()
    if attack is not None:
        doctype, replacement = ATTACKS[attack]
        assert anchor in text
        text = doctype + text.replace(anchor, replacement.format(anchor=anchor), 1)
    return f'<?xml version="1.0" encoding="{encoding}"?>\n{text}'.encode(ENCODINGS[encoding])


def attacked(ext: str, encoding: str, attack: str | None) -> bytes:
    """The format's test file with its XML part in `encoding`, attacked (None: unharmed)."""
    make, part, anchor = FORMATS[ext]
    data = make()
    if part is None:
        return rewrite(data, encoding, attack, anchor)
    src, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for info in src.infolist():
            body = src.read(info)
            z.writestr(info, rewrite(body, encoding, attack, anchor) if info.filename == part else body)
    return out.getvalue()


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("ext", FORMATS)
def test_hostile_xml_is_refused(builtin, ext, encoding):
    """Every attack, in every encoding, is a 422 naming entities (or invalid XML), never a 500 or a leak; the same
    file without the attack translates (so the 422 is the attack's)."""
    for attack in ATTACKS:
        r = upload(builtin.url, f"a.{ext}", attacked(ext, encoding, attack), direct="true")
        assert r.status_code == 422, (attack, r.status_code, r.text[:300])
        error = r.json()["error"]
        assert ("not valid XML" if attack == "malformed" else "entit") in error, (attack, error)
        assert "root:" not in r.text
    r = upload(builtin.url, f"a.{ext}", attacked(ext, encoding, None), direct="true")
    assert r.status_code == 200, r.text[:300]


def test_html_entities_are_never_expanded(builtin):
    """HTML is read by an HTML tokenizer, never an XML parser: a declared entity stays literal text."""
    page = '<!DOCTYPE html [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><p>Good morning. &xxe;</p>'
    r = upload(builtin.url, "a.html", page.encode(), direct="true")
    assert r.status_code == 200, r.text
    assert '<!ENTITY xxe SYSTEM "file:///etc/passwd">' in r.text and "root:" not in r.text
