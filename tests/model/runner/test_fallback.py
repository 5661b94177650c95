"""A missing glossary term's retry: which occurrence of a term wanted twice is the missing one, and what it
forces."""

from model.runner import fallback
from model.runner.fallback import missing, redo, unplaced_twin
from model.runner.params import ANYWHERE, DecodeParams

TERM = (5, 6)


def test_the_missing_twin_is_the_one_no_occurrence_aligns_to():
    # catches: "La balda vieja era mejor que la nueva repisa." retried for the second shelf (its term is there), so
    # the first one is never placed
    params = DecodeParams(beam_size=4).constrained((TERM, TERM), spans=((0, 1, 2), (4, 5, 6)))
    tokens, aligned = [9, 8, 7, 3, *TERM, 2], [0, 1, 2, 4, 5, 5, 6]  # the term where the second source aligns
    assert missing(params, tokens) == 1 and unplaced_twin(params, tokens, aligned, 1) == 0
    first = [9, *TERM, 7, 3, 8, 2], [0, 1, 1, 2, 4, 5, 6]  # the term where the first one aligns
    assert unplaced_twin(params, *first, 1) == 1
    placed = DecodeParams(beam_size=4).constrained((TERM, TERM), spans=(ANYWHERE, (4, 5, 6)))
    assert unplaced_twin(placed, tokens, aligned, 1) == 1  # a twin the prefix placed is not searched again


def test_the_retry_forces_the_term_in_place_of_the_word_and_bans_that_word_after_it(monkeypatch):
    # catches: "Compramos un auto coche nuevo.": the model's own word, which the term replaces, written again after it
    params = DecodeParams(beam_size=4).constrained((TERM,), spans=((1, 2, 3),))
    tokens = [9, 8, 7, 2]  # the model's word 8 where the term's source (position 2) aligns
    monkeypatch.setattr(fallback, "alignments", lambda runner, pairs: [[0, 2, 4, 5]])
    again = redo(None, [True] * 10, [1, 2, 3, 4], params, tokens)
    assert again.prefix == (9, *TERM) and again.constraint_spans == (ANYWHERE,)
    assert again.bad_words_ids == ((*TERM, 8),)


def test_the_retry_puts_the_term_in_place_of_its_word_in_the_other_gender(monkeypatch):
    # catches: "Ella es un abogado muy abogada.": the term forced where the alignment fell ("lawyer" on "bueno") while
    # the model had written its own word for it in the other gender ("abogado" for "abogada")
    spelled = {9: "ella", 8: "un", 7: "abogado", 4: "muy", 3: "bueno", 5: "aboga", 6: "da"}
    spell = lambda tokens: "".join(spelled[t] for t in tokens)  # noqa: E731
    params = DecodeParams(beam_size=4).constrained((TERM,), spans=((1, 2, 3),))
    tokens = [9, 8, 7, 4, 3]  # "ella un abogado muy bueno": "bueno" aligns to the term's source (position 2)
    monkeypatch.setattr(fallback, "alignments", lambda runner, pairs: [[0, 1, 1, 3, 2]])
    starts = [True] * 10
    assert redo(None, starts, [1, 2, 3, 4], params, tokens).prefix == (9, 8, 7, 4, *TERM)  # without its letters
    again = redo(None, starts, [1, 2, 3, 4], params, tokens, spell=spell)
    assert again.prefix == (9, 8, *TERM) and again.bad_words_ids == ((*TERM, 7),)
