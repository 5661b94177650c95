"""Matching a glossary's terms in a text: word boundaries, leftmost-longest, Unicode normalisation, case."""

from __future__ import annotations

import pytest

from app.glossaries.matching import Matcher, fold, term_key


def found(entries: dict[str, str], text: str) -> list[tuple[str, str]]:
    """(matched text as written in `text`, glossary target) for each match."""
    return [(text[m.start : m.end], m.target) for m in Matcher(tuple(entries.items())).find(text)]


def test_a_term_inside_a_longer_word_does_not_match():
    # catches: a pattern without its (?<!\w) / (?!\w) boundaries
    assert found({"file": "fichero"}, "profile files filed") == []
    assert found({"file": "fichero"}, "a file, the file.") == [("file", "fichero"), ("file", "fichero")]
    assert found({"C++": "C++"}, "C++11 and C++") == [("C++", "C++")]


def test_the_longest_term_wins_at_the_leftmost_place():
    # catches: terms tried shortest first (or in the glossary's order)
    entries = {"file": "fichero", "file manager": "gestor de archivos", "manager": "gerente"}
    assert found(entries, "the file manager") == [("file manager", "gestor de archivos")]
    # leftmost first: "new file" starts before "file manager" and takes "file"
    assert found({"new file": "nuevo", "file manager": "gestor"}, "new file manager") == [("new file", "nuevo")]


def test_a_longer_term_that_fails_its_boundary_falls_back_to_a_shorter_one():
    # catches: an automaton that finds the longest term and drops the place when its boundary fails
    assert found({"file": "fichero", "file man": "x"}, "file manager") == [("file", "fichero")]


def test_case_and_unicode_normalisation():
    # catches: no casefold (STRASSE/Straße), no NFKC (ﬁ ligature, full-width letters), decomposed accents
    assert found({"Straße": "street"}, "die STRASSE") == [("STRASSE", "street")]
    assert found({"file": "fichero"}, "a ﬁle") == [("ﬁle", "fichero")]
    assert found({"file": "fichero"}, "ｆｉｌｅ") == [("ｆｉｌｅ", "fichero")]
    assert found({"café": "cafetería"}, "cafe\u0301 Café") == [("cafe\u0301", "cafetería"), ("Café", "cafetería")]


def test_multi_word_terms_match_across_any_whitespace():
    # catches: literal spaces only
    assert found({"file  manager": "gestor"}, "File\n Manager") == [("File\n Manager", "gestor")]


def test_the_folded_text_points_back_into_the_original():
    # catches: offsets into the folded text used as offsets into the original
    text, spans = fold("ﬁx é")
    assert text == "fix é" and spans[:3] == [(0, 1), (0, 1), (1, 2)]
    assert term_key("  Die   STRASSE ") == "die strasse"


def test_no_terms_match_nothing():
    assert Matcher(()).find("anything") == []


def test_a_target_the_model_cannot_write_is_refused_by_name():
    # catches: an unwritable target sent as a constraint (<unk> tokens the decoder can never produce: a 500 or junk)
    from app.errors import ApiError
    from app.glossaries.apply import GlossaryUse

    use = GlossaryUse((("cat", "gato \u2603"), ("dog", "perro")), lambda t: [len(t)], 3, spells=lambda c: c != "\u2603")
    assert use.constraints("a dog") == (((5,),), [(2, 5)])
    with pytest.raises(ApiError) as err:
        use.constraints("a cat")
    assert err.value.status == 422 and "glossary['cat']" in err.value.message and "\u2603" in err.value.message


def test_a_do_not_translate_term_the_model_cannot_write_stays_out_of_its_input():
    # catches: an unwritable verbatim term sent to the model (it would come back as something else)
    from app.glossaries.apply import GlossaryUse

    entries = (("Fire\u2603", "Fire\u2603"), ("Zed", "Zed"))
    use = GlossaryUse(entries, lambda t: [len(t)], 3, spells=lambda c: c != "\u2603")
    text = "Open Fire\u2603 and Zed"
    assert use.verbatim(text) == [(5, 10)]  # kept out of the model's text; Zed is a constraint of the sentence
    assert use.constraints("Open Zed now") == (((3,),), [(5, 8)])
