"""The held-out phrase sets' scoring: every alternative a translator accepts counts."""

from training.common import first_phrases
from training.twoway import score


def test_an_output_that_matches_any_alternative_scores_as_right():
    # catches: scoring against the first reference only ("Hola, mundo" would read as wrong), or a phrase below 40
    # left out of the list the model card prints
    got = score(["Hola, mundo", "Gracias"], [["Hola mundo", "Hola, mundo"], ["Adiós"]])
    assert got["below40"] == 50.0 and [(i, h) for i, h, _ in got["low"]] == [(1, "Gracias")]
    assert score(["Hola, mundo"], [["Hola mundo", "Hola, mundo"]])["chrf"] == 100.0


def test_the_first_phrases_have_both_sides_and_their_alternatives():
    en, es = first_phrases()
    assert len(en) == len(es) >= 150 and all(en) and all(es)
    assert ["Hello world"] in en and ["Hola mundo", "Hola, mundo"] == es[en.index(["Hello world"])]
