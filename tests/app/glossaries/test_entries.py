"""Parsing a glossary's entries and refusing bad ones, each error naming the entry or the limit."""

from __future__ import annotations

import pytest

from app.glossaries.entries import GlossaryError, Limits, checked, merged, parse_inline, parse_text, to_tsv

LIMITS = Limits(max_entries=3, max_entry_bytes=20, max_bytes=40)


def parse(value, limits=LIMITS):
    return checked(parse_inline(value), limits, "glossary")


def refusal(value, limits=LIMITS) -> GlossaryError:
    with pytest.raises(GlossaryError) as info:
        parse(value, limits)
    return info.value


def test_the_inline_shapes_give_the_same_entries():
    # catches: a shape dropped or read as another (a pair list read as an object, a JSON text read as TSV)
    want = (("file", "fichero"), ("Firefox", "Firefox"))
    assert parse({"file": "fichero", "Firefox": "Firefox"}) == want
    assert parse([["file", "fichero"], ["Firefox", "Firefox"]]) == want
    assert parse("file\tfichero\n\n Firefox \tFirefox\n") == want
    assert parse('{"file": "fichero", "Firefox": "Firefox"}') == want
    assert parse('[["file", "fichero"], ["Firefox", "Firefox"]]') == want


def test_csv_and_tsv_text():
    assert parse_text('"a, b",c\nd,"e ""f"""\n', "csv", "entries")[1][1:] == ("d", 'e "f"')
    assert parse_text("a\tb\r\nc\td", "tsv", "entries")[1] == ("entries line 2", "c", "d")
    assert to_tsv((("a", "b"), ("c", "d"))) == "a\tb\nc\td\n"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("a\tb\nc d\n", "glossary line 2: expected 2 tab-separated fields"),
        ("a\tb\tc", "glossary line 1: expected 2 tab-separated fields (source, target), found 3"),
        ({"": "x"}, "glossary['']: empty source term"),
        ([["a", " "]], "glossary[0]: empty target term"),
        ([["a"]], "glossary[0]: expected a [source, target] pair"),
        ({"a": 1}, "glossary['a']: terms must be strings"),
        (42, "glossary: expected an object of terms"),
        ([["File", "fichero"], ["file", "archivo"]], "glossary[1]: source term 'file' given twice"),
    ],
)
def test_bad_entries_are_named(value, message):
    # catches: a malformed line, empty term or conflicting duplicate let through, or an error not naming its entry
    error = refusal(value)
    assert error.status == 422 and message in error.message


def test_malformed_csv():
    with pytest.raises(GlossaryError, match="entries: malformed CSV"):
        parse_text('a,"b\nc', "csv", "entries")
    with pytest.raises(GlossaryError, match="entries_format: must be one of tsv, csv"):
        parse_text("a,b", "xlsx", "entries")


def test_the_same_entry_twice_is_kept_once():
    assert parse([["file", "fichero"], ["File", "fichero"]]) == (("file", "fichero"),)


def test_limits_are_named():
    # catches: a limit not enforced, or enforced off by one
    assert len(parse({"a": "1", "b": "2", "c": "3"})) == 3
    assert "4 entries exceeds glossary_max_entries=3" in refusal({"a": "1", "b": "2", "c": "3", "d": "4"}).message
    long = refusal({"a" * 10: "b" * 11})
    assert long.status == 413 and "glossary['aaaaaaaaaa']: 21 bytes exceeds glossary_max_entry_bytes=20" in long.message
    assert len(parse({"a" * 10: "b" * 10})) == 1
    total = refusal({"a" * 10: "b" * 10, "c" * 10: "d" * 10, "e": "f"})
    assert total.status == 413 and "42 bytes of terms exceeds glossary_max_bytes=40" in total.message


def test_inline_entries_win_over_stored_ones():
    # catches: the stored glossary's target kept for a term given inline, or the merge left unchecked
    stored = (("file", "fichero"), ("folder", "carpeta"))
    assert merged(stored, (("File", "archivo"),), LIMITS) == (("File", "archivo"), ("folder", "carpeta"))
    with pytest.raises(GlossaryError, match="glossary_max_entries=3"):
        merged(stored, (("a", "b"), ("c", "d")), LIMITS)
