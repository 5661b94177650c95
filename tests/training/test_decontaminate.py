"""Phrasebook files written for the project lose the pairs that copy a held-out phrase, exactly or nearly."""

from training.common import first_phrases
from training.decontaminate import clean


def test_a_copy_of_a_held_out_phrase_is_dropped_and_other_pairs_kept():
    # catches: only exact copies dropped (a held-out phrase with one word changed trains the model on it), either side
    # unchecked, or the filter dropping pairs that share no phrase with the held-out sets
    english = next(alts[0] for alts in first_phrases()[0] if len(alts[0].split()) >= 4)
    spanish = next(alts[0] for alts in first_phrases()[1] if len(alts[0].split()) >= 4)
    unrelated = ("The blue kettle whistles in the garage", "La tetera azul silba en el garaje")
    pairs = [(english.upper() + "!", "x"), (english + " too", "y"), ("z", spanish + " también"), unrelated]
    kept, exact, near = clean(pairs)
    assert kept == [unrelated] and (exact, near) == (1, 2)
