"""A missing glossary term's retry: which occurrence of a term wanted twice is the missing one."""

from model.runner.fallback import missing, unplaced_twin
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
