"""The word before a glossary term made to agree with it: the probe scores what teacher forcing scores, and a word of
the table that fits another form than the model's is swapped, the output forced up to the term."""

import dataclasses

import pytest
import torch

from model.runner.agreement import MARGIN, probe, redo
from model.runner.eager import Eager
from model.runner.params import ANYWHERE, Agreement, DecodeParams, Probe, Word

EL, LA, DE, DEL, TERM = 10, 11, 12, 13, (20, 21)
WORDS = (  # el/la (forms 0/1), del/de la, and su (fits both forms)
    Word((EL,), (0,), ((EL,), (LA,))),
    Word((LA,), (1,), ((EL,), (LA,))),
    Word((DEL,), (0,), ((DEL,), (DE, LA))),
    Word((DE, LA), (1,), ((DEL,), (DE, LA))),
    Word((30,), (0, 1), ((30,), (30,))),
)
PROBE = Probe(((1, 2, 3),), ((EL, *TERM), (LA, *TERM)), (0.0, 0.0))


def params(*terms: tuple[int, ...], probes=None) -> DecodeParams:
    spans = tuple((0, 1, 2) for _ in terms)
    agreement = Agreement(probes or tuple(PROBE for _ in terms), WORDS)
    return DecodeParams(beam_size=4, max_new_tokens=32, constraints=terms, constraint_spans=spans, agreement=agreement)


NONE = lambda outs: [0.0] * len(outs)  # noqa: E731  likelihoods that never favour an article


def scores(masculine: float):
    """A probe's form scores: masculine by `masculine` nats."""
    return lambda _probe: [masculine, 0.0]


def test_a_disagreeing_word_is_swapped_and_the_output_forced_up_to_the_term():
    # catches: the word left as it is, the wrong variant, the prefix cut at the wrong place, the term not placed
    out = [5, LA, *TERM, 7, 8]
    again = redo(params(TERM), out, scores(3.0), NONE)
    assert again.prefix == (5, EL, *TERM) and again.constraint_spans == (ANYWHERE,)
    assert again.mended == ((1, 2),)  # the swapped word: not the model's (its confidence leaves it out)
    assert redo(params(TERM), [5, EL, *TERM, 7], scores(3.0), NONE) is None  # it agrees
    assert redo(params(TERM), out, scores(MARGIN / 2), NONE) is None  # the model is not sure enough
    assert redo(params(TERM), [5, 30, *TERM], scores(3.0), NONE) is None  # "su" fits both forms


def test_a_word_before_the_term_that_is_another_term_is_never_mended():
    # catches: "Esta permitires" mended to "Estas permitires" where "esta" is the user's term for "this" (and the
    # forced prefix then broke the term's word)
    other = (LA,)
    both = params(other, TERM, probes=(None, PROBE))
    assert redo(both, [LA, *TERM, 7], scores(3.0), NONE) is None
    assert redo(params(TERM), [LA, *TERM, 7], scores(3.0), NONE).prefix == (EL, *TERM)  # a word of the model's


def test_the_longest_word_before_the_term_is_the_one_swapped():
    # catches: "de la" read as "la" ("de el" for "del")
    shorter = redo(params(TERM), [5, DE, LA, *TERM], scores(3.0), NONE)
    assert shorter.prefix == (5, DEL, *TERM) and shorter.mended == ((1, 2),)
    assert redo(params(TERM), [5, DEL, *TERM], scores(-3.0), NONE).prefix == (5, DE, LA, *TERM)


def test_twins_are_mended_one_occurrence_at_a_time_and_unprobed_terms_never():
    # catches: the second occurrence's retry placing the first twin (it was met already), a term kept as written
    # (no probe) changed
    out = [EL, *TERM, 6, LA, *TERM]
    again = redo(params(TERM, TERM), out, scores(3.0), NONE)
    assert again.prefix == (EL, *TERM, 6, EL, *TERM) and again.constraint_spans == ((0, 1, 2), ANYWHERE)
    assert again.mended == ((4, 5),)
    assert redo(params(TERM, probes=(None,)), [5, LA, *TERM], scores(3.0), NONE) is None
    assert redo(DecodeParams(), [5, LA, *TERM], scores(3.0), NONE) is None


def test_a_term_opening_the_output_gets_its_article_where_the_model_likes_it_better():
    # catches: the article never tried (headline Spanish: "Contraseñas deben"), always added ("La Excel"), added in
    # the wrong form, or with the term left capitalised (or the constraint still asking for the capitalised term)
    upper, lower, cap_el, cap_la = (40, 41), (20, 21), (50,), (51,)
    p = Probe(((1, 2, 3),), ((EL, *lower), (LA, *lower)), (0.0, 0.0), lower)
    agreement = Agreement((p,), WORDS, (cap_el, cap_la))
    base = DecodeParams(beam_size=4, max_new_tokens=32, constraints=(upper,), constraint_spans=((0, 1, 2),))
    base = dataclasses.replace(base, agreement=agreement)
    likes_article = lambda outs: [-5.0 if out == upper else -1.0 for out in outs]  # noqa: E731
    again = redo(base, [*upper, 7, 8], scores(-3.0), likes_article)
    assert again.prefix == (*cap_la, *lower) and again.constraints == (lower,) and again.mended == ((0, 1),)
    assert again.constraint_spans == (ANYWHERE,)
    assert redo(base, [*upper, 7, 8], scores(-3.0), NONE) is None  # the model writes it without
    assert (
        redo(
            dataclasses.replace(
                base, agreement=Agreement((dataclasses.replace(p, lower=()),), WORDS, (cap_el, cap_la))
            ),
            [*upper, 7],
            scores(-3.0),
            likes_article,
        )
        is None
    )  # not capitalised by the glossary: as it is


def test_a_term_capitalised_to_open_the_output_is_lowered_where_words_came_first():
    # catches: "Las Contraseñas deben" left capitalised mid-sentence, or lowered again and again (a retry loop)
    upper, lower = (40, 41), (20, 21)
    p = Probe(((1, 2, 3),), ((EL, *lower), (LA, *lower)), (0.0, 0.0), lower)
    base = DecodeParams(beam_size=4, max_new_tokens=32, constraints=(upper,), constraint_spans=((0, 1, 2),))
    base = dataclasses.replace(base, agreement=Agreement((p,), WORDS, ((50,), (51,))))
    again = redo(base, [51, *upper, 7, 8], scores(-3.0), NONE)
    assert again.prefix == (51, *lower) and again.constraints == (lower,) and again.constraint_spans == (ANYWHERE,)
    assert redo(again, [51, *lower, 7, 8], scores(-3.0), NONE) is None  # lowered and agreeing: done
    with_bos = dataclasses.replace(base, forced_bos_id=9)
    assert redo(with_bos, [9, *upper, 7], scores(-3.0), NONE) is None  # a forced language token is no word


def test_a_lowercase_term_opening_the_output_of_a_capitalised_sentence_gets_its_article_or_a_capital():
    # catches: "comercio en la esquina cierra" left without its article and capital, the article preferred when the
    # model does not like it better, or the capitalised term raised again and again
    lower, upper = (20, 21), (40, 41)
    p = Probe(((1, 2, 3),), ((EL, *lower), (LA, *lower)), (0.0, 0.0), (), upper)
    base = DecodeParams(beam_size=4, max_new_tokens=32, constraints=(lower,), constraint_spans=((0, 1, 2),))
    base = dataclasses.replace(base, agreement=Agreement((p,), WORDS, ((50,), (51,))))
    likes_article = lambda outs: [-5.0 if out == upper else -1.0 for out in outs]  # noqa: E731
    with_article = redo(base, [*lower, 7, 8], scores(3.0), likes_article)
    assert with_article.prefix == (50, *lower) and with_article.constraints == (lower,)
    capitalised = redo(base, [*lower, 7, 8], scores(3.0), NONE)
    assert capitalised.prefix == upper and capitalised.constraints == (upper,)
    assert redo(capitalised, [*upper, 7, 8], scores(3.0), NONE) is None  # raised: done
    assert redo(base, [5, EL, *lower], scores(3.0), NONE) is None  # not opening the output: as it is


def test_the_probe_scores_what_teacher_forcing_scores(model):
    # catches: padding counted in a shorter form's score, the forms' or sources' order mixed up, the prior left out
    p = Probe(((3, 4, 5, 1), (6, 1)), ((7, 8), (9, 8, 10), (11,)), (0.0, 2.0, 0.0))
    got = probe(Eager(model), p)
    cfg, want = model.cfg, list(p.prior)
    with torch.inference_mode():
        for s in p.sources:
            for i, f in enumerate(p.forms):
                src = torch.tensor([s])
                tgt = torch.tensor([[cfg.decoder_start_id, *f]])
                logp = model(src, torch.ones_like(src, dtype=torch.bool), tgt[:, :-1]).log_softmax(-1)[0]
                want[i] += sum(logp[t, tok].item() for t, tok in enumerate(f))
    assert got == pytest.approx(want, abs=1e-4)
