"""The words after a glossary term made to agree with it (`app.glossaries.after`), on Debian's Spanish analyser."""

import pytest

from app.glossaries.after import mend
from app.glossaries.lexicon import lexicon

pytestmark = pytest.mark.skipif(lexicon("es") is None, reason="no Spanish analyser (Debian's apertium-eng-spa)")

MENDED = [  # outputs of the built-in model with a glossary, each word after its term written for the model's own word
    ("Mi coche está aparcada delante del banco.", "coche", "Mi coche está aparcado delante del banco."),
    ("Vivimos en una colonia tranquilo.", "colonia", "Vivimos en una colonia tranquila."),
    (
        "Carpetas compartidos con que aparecen en esta lista.",
        "Carpetas",
        "Carpetas compartidas con que aparecen en esta lista.",
    ),
    ("Sombrillas no están permitidos dentro.", "Sombrillas", "Sombrillas no están permitidas dentro."),
    ("La repisa en la cocina está roto.", "repisa", "La repisa en la cocina está rota."),
    ("El cobertor es muy blanda.", "cobertor", "El cobertor es muy blando."),  # unknown to the analyser: its ending
    ("Compré la mesa y la repisa está roto.", "repisa", "Compré la mesa y la repisa está rota."),  # a clause's subject
    ("Nuestra nueva jefa está cansado.", "jefa", "Nuestra nueva jefa está cansada."),  # an adjective before it
    ("Nuestra nueva jefa es muy bueno.", "jefa", "Nuestra nueva jefa es muy buena."),  # "bueno": an interjection too
    # the term in a phrase after the subject: the word after the verb took the term's gender, and takes the subject's
    ("El coche de mi jefa está aparcada fuera.", "jefa", "El coche de mi jefa está aparcado fuera."),
    ("El libro en la repisa es vieja.", "repisa", "El libro en la repisa es viejo."),
    ("Y las llaves del coche están rotos.", "coche", "Y las llaves del coche están rotas."),
]
KEPT = [
    ("La subida ha fallado, compruebe su conexión.", "subida"),  # a perfect: the participle does not agree
    ("Introduzca la contraseña de nuevo.", "contraseña"),  # an adverbial phrase
    ("La base de datos estuvo restaurada anoche.", "base de datos"),  # the term's first word's gender
    ("La repisa sobre el estante está roto.", "repisa"),  # a noun of the word's gender between: it may be that one's
    ("El armario en la camaroom es llena de ropa.", "armario"),  # an unknown word between
    ("La cocina llena de humo.", "cocina"),  # right after the term, a word that is also a verb
    ("El coche, que está aparcada.", "coche"),  # another clause
    ("La mesa es grande.", "mesa"),  # a word of both genders
    ("El libro sobre la repisa está roto.", "repisa"),  # the term after a preposition: not the subject
    ("El coche de mi jefa está aparcado.", "jefa"),
    ("La foto del coche es bonita.", "coche"),
    ("El coche de mi jefa nuevo.", "jefa"),  # after "de": the adjective may be the noun's before
    ("La casa está solo a cinco minutos.", "casa"),  # an adverb too
    ("La silla está junto a la mesa.", "silla"),  # a phrase of its own
    ("La caja está bajo la mesa.", "caja"),  # a preposition too
    ("Pon el libro en la repisa que está rota.", "repisa"),  # the phrase after a verb's object, not a subject
    ("El libro de la repisa está roto.", "repisa"),  # the subject's gender already
    ("El marco de la foto es viejo y la foto es nueva.", "foto"),
    ("El coche de mi jefe está rota.", "jefe"),  # the word has neither's gender: not the term's, mistaken
]


@pytest.mark.parametrize(("text", "term", "want"), MENDED)
def test_a_word_after_a_term_takes_its_gender(text, term, want):
    assert mend(text, [term], "es", lexicon("es")) == want


@pytest.mark.parametrize(("text", "term"), KEPT)
def test_words_that_need_not_or_may_not_agree_stay(text, term):
    # catches: a participle after "ha" changed, a noun between ignored, a verb taken for an adjective, a term inside a
    # prepositional phrase taken for the subject ("El coche de mi jefa está aparcada")
    assert mend(text, [term], "es", lexicon("es")) == text


def test_other_languages_and_no_analyser_change_nothing():
    assert mend("Mi coche está aparcada.", ["coche"], "de", lexicon("es")) == "Mi coche está aparcada."
    assert mend("Mi coche está aparcada.", ["coche"], "es", None) == "Mi coche está aparcada."
