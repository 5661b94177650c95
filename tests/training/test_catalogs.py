"""Gettext catalogs become clean human pairs: accelerators gone, format strings and markup out, majority wins."""

import polib
import pytest

from training.catalogs import normalise, vote


@pytest.mark.parametrize(
    ("message", "text"),
    [
        ("_Save As…", "Save As…"),
        ("&Open File", "Open File"),
        ("Archivo (_F)", "Archivo"),
        ("Copy &amp; Paste", "Copy & Paste"),
        ("Could not open %s", None),
        ("Deleted %1 items", None),
        ("%(count)d files", None),
        ("Set $HOME first", None),
        ("<b>Name</b>", None),
        ("See https://example.org", None),
        ("my_variable", None),
        ("12:30:00", None),
    ],
)
def test_normalise(message, text):
    assert normalise(message) == text


def write_mo(path, entries):
    """A compiled catalog with the given (msgid, msgstr) entries."""
    po = polib.POFile()
    po.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    for msgid, msgstr in entries:
        po.append(polib.POEntry(msgid=msgid, msgstr=msgstr))
    po.save_as_mofile(str(path))
    return path


def test_vote_keeps_the_majority_and_only_agreed_single_words(tmp_path):
    common = [("_Open the file.", "_Abrir el archivo."), ("Cancel", "Cancelar")]
    files = [
        write_mo(tmp_path / "a.mo", common + [("Open", "Abierto"), ("Untranslated text", "")]),
        write_mo(tmp_path / "b.mo", common + [("Open", "Abrir")]),
        write_mo(tmp_path / "c.mo", [("Open the file.", "Abre el fichero."), ("Cancel", "Cancelar")]),
        write_mo(tmp_path / "d.mo", [("Close it. Then quit.", "Ciérralo. Luego sal."), ("Same", "Same")]),
    ]
    assert vote(files) == [
        ("Cancel", "Cancelar"),  # one word, three catalogs agree
        ("Close it.", "Ciérralo."),  # split into sentences where both sides have as many
        ("Open the file.", "Abrir el archivo."),  # two catalogs against one
        ("Then quit.", "Luego sal."),
    ]  # "Open" (two translations, no agreement), the empty and the copied message are gone
