"""The phrasebook is clean training data: no held-out phrase in it, and Spanish punctuation and agreement right."""

import re

import pytest

from training.common import EVERYDAY, EVERYDAY2, read_tsv
from training.corpus import key
from training.phrasebook import build


@pytest.fixture(scope="module")
def pairs():
    return build()


def test_no_everyday_test_phrase_or_readme_example_is_trained_on(pairs):
    test = [en for en, _ in read_tsv(EVERYDAY)]
    assert {"Hello.", "Good morning.", "Where is the station?", "The house is big."} <= set(test)  # README examples
    keys = {key(en) for en, _ in pairs}
    assert not keys & {key(en) for en in test}
    long = [key(en) for en in test if len(en.split()) >= 3]
    assert not [k for k in keys if any(h in k for h in long)]  # nor a line that contains one


def test_no_phrase_of_either_test_set_is_trained_on_either_way(pairs):
    sides = {key(side) for path in (EVERYDAY, EVERYDAY2) for pair in read_tsv(path) for side in pair}
    assert not sides & ({key(en) for en, _ in pairs} | {key(es) for _, es in pairs})


def test_questions_and_exclamations_open_the_spanish_way(pairs):
    assert len(pairs) > 2000
    for en, es in pairs:
        for sentence in re.split(r"(?<=[.!?])\s+", es):  # "¡Feliz cumpleaños! Que pases un gran día."
            assert sentence.endswith("?") == ("¿" in sentence), (en, es)
            assert sentence.endswith("!") == ("¡" in sentence), (en, es)
        # lower case both sides: a chat line; a day's or a month's name alone: lower case in Spanish
        assert es[0].isupper() or es[0] in "¿¡" or en[0].islower() or " " not in es, (en, es)


@pytest.mark.parametrize(
    ("en", "es"),
    [
        ("Where is the museum?", "¿Dónde está el museo?"),
        ("Where is the train station?", None),  # its Spanish holds an everyday test phrase's: held out
        ("How do I get to the museum?", "¿Cómo llego al museo?"),
        ("The pharmacy is closed today.", "La farmacia está cerrada hoy."),
        ("She is tired.", "Ella está cansada."),
        ("We are lost.", "Estamos perdidos."),
        ("I like apples.", "Me gustan las manzanas."),
        ("I like water.", "Me gusta el agua."),
        ("Good evening, everyone.", "Buenas noches a todos."),
        ("Good morning, everyone.", None),  # its Spanish is the independent set's "Good morning, everybody."
        ("It is one o'clock.", "Es la una."),
        ("I am very hungry.", "Tengo mucha hambre."),
        ("It is half past seven.", None),  # an everyday test phrase: held out
    ],
)
def test_agreement_and_articles(pairs, en, es):
    assert dict(pairs).get(en) == es
