"""The pieces of a stand-in (`model.runner.unfinished`) that need no model: where a term replaces the model's word,
the article before it, and the model's word found again right after a term."""

from __future__ import annotations

import torch

from model.runner import unfinished
from model.runner.params import PARKED, Agreement, DecodeParams, Probe, Word
from model.runner.search import Hypothesis

PIECES = ("<pad>", "</s>", "▁el", "▁la", "▁and", "én", "▁plataforma", "▁en", "▁mediodía", ".", "▁de", "▁platforma",
          "▁", "t", "ío", "▁médico")
JOINS = [False] * 5 + [True] + [False] * 7 + [True, True, False]
VOCAB = unfinished.Pieces(PIECES, JOINS, torch.zeros(len(PIECES)))
EL, LA, AND, EN_, PLATAFORMA, EN, MEDIODIA, DOT, DE, PLATFORMA, BARE, T, IO, MEDICO = range(2, 16)
ANDEN = (AND, EN_)
WORDS = (Word((EL,), (0,), ((EL,), (LA,))), Word((LA,), (1,), ((EL,), (LA,))))
PROBE = Probe(((1,),), ((EL, *ANDEN), (LA, *ANDEN)), (0.0, 0.0))


def params(prefix: tuple[int, ...], stand_for: tuple[int, ...] = ()) -> DecodeParams:
    """A stand-in of "andén" after `prefix`, its constraint parked."""
    return DecodeParams(beam_size=4, max_new_tokens=32, constraints=(ANDEN,), constraint_spans=(PARKED,),
                        prefix=prefix, agreement=Agreement((PROBE,), WORDS), stand_in=ANDEN,
                        stand_for=stand_for)  # fmt: skip


def test_the_model_word_found_again_after_a_term():
    # catches: a word after the term taken for the model's own when it only starts alike in two letters, or far on
    after = [EL, *ANDEN, LA, PLATAFORMA, EN, MEDIODIA]  # "el andén la plataforma en mediodía"
    assert unfinished.again(after, 3, (PLATFORMA,), ANDEN, VOCAB) == (PLATFORMA,)  # "plat": its word again
    assert unfinished.again([EL, *ANDEN, EN, MEDIODIA], 3, (PLATFORMA,), ANDEN, VOCAB) == ()
    assert unfinished.again([EL, *ANDEN, EN, DE, EL, PLATAFORMA], 3, (PLATFORMA,), ANDEN, VOCAB) == ()  # 4 words on


def test_the_term_takes_the_model_words_place_and_its_article_the_terms_form():
    # catches: the first word replaced instead of the model's word, or the model's article ("la andén") kept
    hyp = Hypothesis([EN, LA, PLATAFORMA, EN, MEDIODIA, DOT], -1.0, "eos", logprobs=[-0.5] * 7)
    forms = lambda probe: [0.0, -3.0]  # noqa: E731 (the agreement's probe: masculine by 3 nats)
    (out,), fixed = unfinished.stand([hyp], params((EN,), (PLATFORMA,)), VOCAB, lambda outs: [0.0] * len(outs), forms)
    assert out.tokens == [EN, EL, *ANDEN, EN, MEDIODIA, DOT]  # "en el andén en mediodía."
    assert len(out.logprobs) == len(out.tokens) + 1
    assert fixed.prefix == (EN, EL, *ANDEN) and fixed.constraint_spans == ((-1, -1, -1),) and not fixed.stand_in
    assert (1, 2) in fixed.mended and (2, 4) in fixed.mended  # the article and the term: not the model's words
    close = lambda probe: [0.0, -0.5]  # noqa: E731 (within MARGIN: the model's article stays)
    (kept,), _ = unfinished.stand([hyp], params((EN,), (PLATFORMA,)), VOCAB, lambda outs: [0.0] * len(outs), close)
    assert kept.tokens == [EN, LA, *ANDEN, EN, MEDIODIA, DOT]


def test_a_term_is_the_models_word_in_another_gender_only_from_its_masculine():
    # catches: a variant missed for a plural or a consonant ending ("profesor" -> "profesora"), or found for words
    # that merely start alike or for the masculine asked in place of the model's feminine
    yes = [("jefe", "jefa"), ("profesor", "profesora"), ("jefes", "jefas"), ("abogado", "abogada")]
    no = [("jefa", "jefe"), ("jefe", "jefe"), ("profesor", "profesional"), ("mi", "ma"), ("bici", "bicicleta")]
    assert all(unfinished.variant(own, term) for own, term in yes)
    assert not any(unfinished.variant(own, term) for own, term in no)


def test_a_word_that_starts_with_a_bare_space_piece_is_a_word():
    # catches: "▁", "t", "ío" skipped (no letter in its first piece), so "tío" is never found and the next word is
    # replaced instead: "Mi tío tía sólo."
    tokens = [EL, BARE, T, IO, EN, DOT]  # "el tío en."
    assert unfinished.word_spans(tokens, 0, VOCAB) == [(0, 1), (1, 4), (4, 5)]


def test_a_term_whose_model_word_is_not_written_replaces_the_first_word_not_of_the_table():
    # catches: the article replaced when the model wrote another word of its own than the one looked for ("El médico
    # es", its "doctor" looked for): "doctora médico es"
    hyp = Hypothesis([EL, MEDICO, EN, MEDIODIA, DOT], -1.0, "eos", logprobs=[-0.5] * 6)
    out, at, own = unfinished.replaced(hyp, params((), (PLATFORMA,)), VOCAB)
    assert (at, own) == (1, (MEDICO,)) and out.tokens == [EL, *ANDEN, EN, MEDIODIA, DOT]


def test_words_after_a_term_that_align_to_its_source_are_its_source_said_again(monkeypatch):
    # catches: a run cut that does not align whole to the term's source, a lone "de" cut, a run that goes on over
    # another occurrence of a term, words after a term cut when they translate other source words, or a run cut whose
    # word the model would not write in the term's place (`stands`, the model's part)
    stands = []
    monkeypatch.setattr(unfinished, "stands", lambda runner, src, before, word: stands.append(word) or True)
    src = [20, 21, 22, 23, 24, 25, 1]  # the term's source is position 2 (its span (1, 2, 3)); 6 is EOS
    span = (1, 2, 3)
    tokens = [EL, *ANDEN, DE, PLATAFORMA, EN, MEDIODIA, DOT]  # "el andén de plataforma en mediodía."
    said = lambda aligned, terms=frozenset({1}): unfinished.said(  # noqa: E731 (no runner: no word aligns to EOS)
        None, src, tokens, 1, 3, aligned, span, set(terms), (PLATFORMA,), VOCAB
    )
    assert said([1, 2, 2, 2, 2, 3, 4, 5]) == 5  # "de plataforma" cut: "el andén en mediodía."
    assert said([1, 2, 2, 2, 3, 3, 4, 5]) is None  # "plataforma" translates another word
    assert said([1, 2, 2, 2, 4, 4, 4, 5]) is None  # only "de": no word of its own
    assert said([1, 2, 2, 2, 2, 3, 4, 5], {1, 4}) is None  # "plataforma" is another term's occurrence
    assert said([1, 2, 2, 3, 2, 3, 4, 5]) is None  # the word right after it translates something else
    assert stands[0] == (PLATAFORMA,)  # the run's word of its own asked
    monkeypatch.setattr(unfinished, "stands", lambda *args: False)
    assert said([1, 2, 2, 2, 2, 3, 4, 5]) is None  # the model would not write it in the term's place


def test_words_after_a_term_aligned_to_another_word_of_its_source_are_its_source_said_again(monkeypatch):
    # catches: a run kept that translates a word of the term's source the term does not align to ("Espera en el
    # semáforo ligero.": "semáforo" at "traffic", "ligero" at "light"), or one cut that shares the term's source tokens
    # though the model would not write it in the term's place, a lone "de", or a run cut that may translate the next
    # source word ("el estacionamiento detrás del hotel": "detrás" at "lot", "behind" without a word of its own)
    monkeypatch.setattr(unfinished, "stands", lambda *args: False)
    src = [20, 21, 22, 23, 24, 25, 1]  # the term's source is positions 2 and 3 (its span (1, 2, 4)); 6 is EOS
    tokens = [EL, *ANDEN, DE, PLATAFORMA, EN, MEDIODIA, DOT]  # "el andén de plataforma en mediodía."
    said = lambda aligned: unfinished.said(  # noqa: E731 (no runner: no word aligns to EOS)
        None, src, tokens, 1, 3, aligned, (1, 2, 4), {1}, (PLATAFORMA,), VOCAB
    )
    assert said([1, 2, 2, 3, 3, 4, 4, 5]) == 5  # "de plataforma" at 3, the term at 2: "el andén en mediodía."
    assert said([1, 2, 3, 3, 3, 4, 4, 5]) is None  # the term at 3 too
    assert said([1, 2, 2, 3, 4, 4, 4, 5]) is None  # only "de" inside the source
    assert said([1, 2, 2, 3, 3, 5, 5, 5]) is None  # no output token at 4: the run may be its, read a token early


def test_a_term_said_again_is_decoded_again_with_those_words_cut(monkeypatch):
    # catches: the words cut kept, the rest lost, or the term left to be placed again by its span
    monkeypatch.setattr(unfinished, "stands", lambda *args: True)
    monkeypatch.setattr(unfinished, "alignments", lambda runner, pairs: [[1, 2, 2, 2, 2, 3, 4, 5]])
    tokens = [EL, *ANDEN, DE, PLATAFORMA, EN, MEDIODIA, DOT]
    p = DecodeParams(beam_size=4, max_new_tokens=32, constraints=(ANDEN,), constraint_spans=((1, 2, 3),))
    again = unfinished.said_again(None, [20, 21, 22, 23, 24, 25, 1], p, tokens, [(1, 3, 0)], lambda k: (), VOCAB)
    assert again.prefix == (EL, *ANDEN, EN, MEDIODIA, DOT) and again.constraint_spans == ((-1, -1, -1),)
