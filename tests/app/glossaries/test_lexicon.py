"""The genders of target-language nouns from the machine's morphological analyser, and the prior they give a term's
probe: decisive where the analyser (or, for a word it does not know, the word's ending) says a gender."""

import shutil

import pytest

from app.glossaries.agreement import DECISIVE, ENDING_NATS, SOURCES, SUBJECT_NATS, Agreeing, features
from app.glossaries.lexicon import ANALYSERS, Lexicon, lexicon

ES = lexicon("es")
needs_analyser = pytest.mark.skipif(ES is None, reason="no Spanish morphological analyser (apertium-eng-spa)")


def encode(text: str) -> list[int]:
    """One id per character: enough for priors."""
    return [ord(c) for c in text]


@needs_analyser
def test_the_analyser_gives_one_gender_or_none():
    # catches: a verb's or adjective's gender taken ("sanitario" adj), "el/la gerente" forced to one, plurals unread,
    # the stream format's markup characters sent to the analyser
    words = ("sartén", "Sartenes", "laguna", "filme", "gerente", "ventanal", "sanitario", "a<b>", "")
    assert [ES.gender(w) for w in words] == ["f", "f", "f", "m", "", "", "", "", ""]


def test_a_failing_analyser_answers_nothing_and_keeps_serving(tmp_path):
    # catches: an exception (a 500 on the glossary request) when the analyser exits or was never there
    dead = Lexicon(tmp_path / "none.bin", program=shutil.which("true") or "true")
    assert dead.gender("laguna") == "" and dead.broken
    assert dead.gender("sartén") == ""
    assert lexicon("xx") is None and "xx" not in ANALYSERS


@needs_analyser
def test_with_an_analyser_its_gender_or_the_endings_decides_and_without_one_the_ending_weighs_little():
    # catches: the analyser's gender given the ending's 2 nats (the model's word's gender wins: "la ventanal"), or a
    # word the analyser does not know left without the ending's gender
    with_it = Agreeing("es", SOURCES["en"], encode, encode, lexicon=ES)
    without = Agreeing("es", SOURCES["en"], encode, encode)
    prior = lambda agreeing, term: agreeing([("x", term, False)]).probes[0].prior  # noqa: E731
    assert prior(with_it, "sartén") == (DECISIVE, 2 * DECISIVE, 0, DECISIVE)  # no ending rule: the analyser's
    assert prior(with_it, "ventanal grande") == (DECISIVE, 0, DECISIVE, 0)  # unknown to it: "-al", no number
    assert prior(with_it, "gerente") == (DECISIVE, DECISIVE, 0, 0)  # either gender: the model decides
    assert prior(without, "ventanal") == (ENDING_NATS, 0, ENDING_NATS, 0)
    assert prior(without, "sartén") == (0, 0, 0, 0)
    assert prior(without, "ajustes") == (ENDING_NATS, 0, 2 * ENDING_NATS, ENDING_NATS)  # its ending's number too
    assert prior(without, "Windows") == (0, 0, 0, 0)  # a name's ending says nothing


@needs_analyser
def test_the_analysers_number_or_a_plural_entry_decides_the_articles_number():
    # catches: "la imágenes" (the plural's number left to the model), "el ventanales" (a plural the analyser does not
    # know, made from a singular entry: `plurals`)
    agreeing = Agreeing("es", SOURCES["en"], encode, encode, lexicon=ES)
    assert ES.number("imágenes") == "pl" and ES.number("lunes") == "sp" and ES.number("imagenes") == ""
    assert ES.number("descargas") == "pl" and ES.number("ajustes") == ""  # nouns only: beside a verb's, or none
    assert agreeing([("x", "imágenes", False)]).probes[0].prior == (0, DECISIVE, DECISIVE, 2 * DECISIVE)
    assert agreeing([("x", "ventanales", False, True)]).probes[0].prior == (DECISIVE, 0, 2 * DECISIVE, DECISIVE)
    # a plural that opens a sentence leans to its article; a singular, or a unit that is no sentence, does not
    article = lambda term, sentence: agreeing([("x", term, True)], sentence=sentence).probes[0].article  # noqa: E731
    assert article("ajustes", True) == SUBJECT_NATS and article("ajustes", False) == article("sartén", True) == 0
    # catches: "El ajustes están en el menú." (the analyser knows "ajustes" only as a verb's form, singular, which
    # decided the article's number); its ending says plural (and masculine: "-e")
    assert agreeing([("x", "ajustes", False)]).probes[0].prior == (DECISIVE, 0, 2 * DECISIVE, DECISIVE)


@needs_analyser
def test_one_rule_gives_a_nouns_gender_and_number_the_analysers_else_its_endings():
    # catches: the words after a term (after.mend) reading a number other than the probe's: "ajustes", which the
    # analyser knows only as a verb's form, had no number there and was plural here
    assert features("es", "ajustes", ES) == features("es", "ajustes", None) == ("m", "pl")
    assert features("es", "lunes", ES) == ("m", "sp") and features("es", "imágenes", ES) == ("f", "pl")
    assert features("es", "Windows", None) == ("", "")
