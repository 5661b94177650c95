"""Glossary entries in the plural: the plural rules of English source terms and Spanish target terms, the analyser's
veto on a Spanish plural it knows better, and the matcher finding an entry's plural with its target's plural."""

import pytest

from app.errors import ApiError
from app.glossaries.apply import GlossaryUse
from app.glossaries.lexicon import lexicon
from app.glossaries.matching import Matcher
from app.glossaries.plurals import Plurals, english, spanish, spanish_word
from tests.app.glossaries.test_lexicon import ES, needs_analyser


@pytest.mark.parametrize(
    ("term", "plural"),
    [("password", "passwords"), ("box", "boxes"), ("policy", "policies"), ("day", "days"),
     ("hard drive", "hard drives"), ("child", "children"), ("Shelf", "Shelves"), ("bus", "buses"),
     ("data", None), ("C++", None)],
)  # fmt: skip
def test_english_plurals(term, plural):
    # catches: a compound inflected on its first word, -y/-es/-ves rules, irregulars, uncountables given a plural
    assert english(term) == plural


@pytest.mark.parametrize(
    ("word", "plural"),
    [("contraseña", "contraseñas"), ("café", "cafés"), ("luz", "luces"), ("papel", "papeles"), ("red", "redes"),
     ("canción", "canciones"), ("autobús", "autobuses"), ("examen", "exámenes"), ("imagen", "imágenes"),
     ("origen", "orígenes"), ("tren", "trenes"), ("mes", "meses"), ("lunes", None), ("web", "webs"), ("ley", "leyes")],
)  # fmt: skip
def test_spanish_word_plurals(word, plural):
    # catches: the written accent kept where the plural moves the stress ("canciónes") or not added ("examenes"), -z,
    # words whose plural is the word itself pluralised again
    assert spanish_word(word) == plural


def test_a_spanish_term_inflects_its_noun_and_the_adjectives_that_agree():
    # catches: a noun adjunct or the words after a preposition inflected ("sitios webs", "bases de datoss"), an adverb
    # between agreeing words taken for an adjective ("correos nos deseados")
    assert spanish("disco duro") == "discos duros"
    assert spanish("base de datos") == "bases de datos"
    assert spanish("correo no deseado") == "correos no deseados"
    assert spanish("tarjeta de crédito") == "tarjetas de crédito"


@needs_analyser
def test_the_analyser_vetoes_a_plural_of_a_word_it_knows_and_picks_the_agreeing_words():
    # catches: a wrong plural by rule used ("carácteres"), an unknown word (most glossary terms) refused its rule's
    # plural, a noun adjunct inflected because it ends in a vowel
    assert spanish("carácter", ES) is None and spanish("ventanal", ES) == "ventanales"
    assert spanish("sitio web", ES) == "sitios web" and spanish("disco duro", ES) == "discos duros"


def test_the_matcher_finds_an_entrys_plural_with_its_targets_plural_and_an_entry_of_its_own_wins():
    # catches: plurals unmatched ("Passwords" left to the model), a name given a plural, a derived plural overriding
    # an entry the user wrote for the plural
    entries = (("password", "contraseña"), ("user", "usuario"), ("users", "usuarias"), ("Firefox", "Firefox"))
    plurals = Plurals.of("en", "es")
    derived = tuple((p[0], s, p[1]) for s, t in entries if (p := plurals.entry((s, t))))
    found = Matcher(entries, derived).find("Passwords of users. The password. Firefoxes.")
    assert [(m.target, m.plural) for m in found] == [("contraseñas", True), ("usuarias", False), ("contraseña", False)]
    assert Plurals.of("en", "fr") is None and plurals.entry(("Firefox", "Firefox")) is None


def test_plurals_give_way_when_a_sentence_matches_more_terms_than_its_beam_carries():
    # catches: a glossary that served a sentence before plurals matched answering 422 since (a large glossary's
    # plurals pushing a sentence over max_beam_size - 1 terms)
    entries = (("cat", "gato"), ("dog", "perro"), ("bird", "pájaro"))
    use = GlossaryUse(entries, lambda t: [ord(c) for c in t], 2, plurals=Plurals.of("en", "es"))
    cons, _ = use.constraints("the cat, the dogs and the bird")
    assert cons == (tuple(map(ord, "gato")), tuple(map(ord, "pájaro")))  # the plural left out, the order kept
    assert use.constraints("the cats and the dogs")[0] == (tuple(map(ord, "gatos")), tuple(map(ord, "perros")))
    with pytest.raises(ApiError):
        use.constraints("the cat, the dog and the bird")  # the entries as written: as before


def test_a_verb_is_no_plural():
    # catches: "This allows ..." with allow -> permitir given "permitires" (an internal error once the agreement
    # mended the term before it), "It updates the system" given "actualizaciones"
    assert spanish("permitir") is None and spanish("lugar") is None  # without an analyser: infinitive-like endings
    use = GlossaryUse((("update", "actualización"),), lambda t: [ord(c) for c in t], 7, plurals=Plurals.of("en", "es"))
    assert use.matched("It updates the system. The updates are ready.") == [("update", "actualizaciones")]
    assert use.constraints("It updates the system.")[0] == ()


@needs_analyser
def test_the_analysers_know_a_verb_from_a_noun():
    # catches: a Spanish verb's plural by rule, an English verb-only form ("allows") taken for a plural noun
    assert spanish("permitir", ES) is None and spanish("lugar", ES) == "lugares"
    english_analyser = lexicon("en")
    plurals = Plurals.of("en", "es", ES, english_analyser)
    assert plurals.entry(("allow", "autorización")) is None and plurals.entry(("update", "actualización"))
