"""The target language's words that agree with a term, as token ids: each word with the forms it fits and its own
word in every form, also capitalised; a probe per translated term, none for terms kept as written."""

from app.glossaries.agreement import SOURCES, TABLES, Agreeing, ending, rows
from app.glossaries.apply import GlossaryUse

IDS: dict[str, int] = {}


def encode(text: str) -> list[int]:
    """A word-level tokenizer: one id per distinct word."""
    return [IDS.setdefault(w, len(IDS) + 10) for w in text.split()]


def test_each_word_fits_its_forms_and_knows_its_variants():
    # catches: "mi" taken as masculine only (swapped to itself), "de la" split ("de el"), no capitalised words, a
    # word in capitals the model wrote ("EL vivienda", from text typed so) not known, or swapped to capitals ("LA")
    agreeing = Agreeing("es", SOURCES["en"], encode, encode)
    words = {tuple(w.ids): w for w in agreeing.words}
    el, de_la, mi, la_cap = (tuple(encode(w)) for w in ("el", "de la", "mi", "La"))
    assert words[el].fits == (0,) and words[el].variants[1] == tuple(encode("la"))
    assert words[de_la].fits == (1,) and words[de_la].variants[0] == tuple(encode("del"))
    assert words[mi].fits == (0, 1) and words[mi].variants[2] == tuple(encode("mis"))
    assert words[la_cap].variants[0] == tuple(encode("El"))
    assert words[tuple(encode("EL"))].fits == (0,) and words[tuple(encode("EL"))].variants[1] == tuple(encode("La"))
    assert not words[tuple(encode("ninguna"))].variants[3]  # no plural: never swapped to


def test_terms_kept_as_written_are_not_probed_and_other_languages_get_no_agreement():
    # catches: a brand name's article changed ("la Netflix"), a language without a table given Spanish words
    agreeing = Agreeing("es", SOURCES["en"], encode, encode)
    use = GlossaryUse((("Netflix", "Netflix"), ("window", "ventanal")), encode, 3, agreeing=agreeing)
    agreement = use.agreement("Watch Netflix by the window")
    assert agreement.probes[0] is None
    assert agreement.probes[1].forms == tuple(tuple(encode(f"{a} ventanal")) for a in ("el", "la", "los", "las"))
    assert agreement.probes[1].sources[0] == tuple(encode("the window"))
    assert GlossaryUse((("window", "fenêtre"),), encode, 3).agreement("the window") is None


def test_the_ending_of_a_terms_first_word_gives_its_gender_prior():
    # catches: "-o" taken as masculine for "foto", "-ma" as feminine ("el sistema"), plurals and multi-word terms
    # read at their last word; "-e" left to the model ("Abrir el ajustes" then "las ajustes"), a plural's "-s" taken
    # for "-es" ("ajust-es", "llav-es")
    terms = ("sombrilla", "fotos", "sistema operativo", "disco duro", "configuración", "red", "móvil", "señal", "filme",
             "canciones", "almohadones", "ventanales", "ajustes", "llaves", "clientes", "series")  # fmt: skip
    got = [ending("es", t) for t in terms]
    assert got == ["f", "f", "", "m", "f", "f", "m", "f", "m", "f", "m", "m", "m", "f", "", "f"]


def test_a_term_capitalised_to_open_a_sentence_carries_its_form_as_written():
    # catches: no lowercase term to put after an article ("Las Contraseñas"), or one for a term written capitalised
    agreeing = Agreeing("es", SOURCES["en"], encode, encode)
    use = GlossaryUse((("passwords", "contraseñas"), ("Excel", "Excel")), encode, 3, agreeing=agreeing)
    assert use.constraints("Passwords expire")[0] == (tuple(encode("Contraseñas")),)
    assert use.agreement("Passwords expire").probes[0].lower == tuple(encode("contraseñas"))
    assert use.agreement("Old passwords expire").probes[0].lower == ()
    assert agreeing.openers[3] == tuple(encode("Las"))
    assert use.agreement("The passwords expire").probes[0].upper == tuple(encode("Contraseñas"))  # might open it
    assert use.agreement("the passwords expire").probes[0].upper == ()  # a lowercase sentence: as written
    assert use.agreement("Passwords expire").probes[0].upper == ()  # capitalised already


def test_an_adjective_before_the_term_is_mended_with_its_determiner_or_alone():
    # catches: "Mi nuevo jefa" / "una nueva aviso" / "Necesito nuevo gafas" left (no adjective rows, or none alone),
    # or the adjective mended without its determiner ("una nuevo aviso": the determiner rows come first, the longest
    # row before a term is the one mended)
    table = rows("es")
    assert table[0] == TABLES["es"][0]  # the articles first: the probe's forms
    assert ("mi nuevo", "mi nueva", "mis nuevos", "mis nuevas") in table
    assert ("un nuevo", "una nueva", "unos nuevos", "unas nuevas") in table
    assert ("nuevo", "nueva", "nuevos", "nuevas") in table
