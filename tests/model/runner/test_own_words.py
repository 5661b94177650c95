"""A constrained output's rating from the beam's own log-probabilities equals teacher forcing's."""

import dataclasses

import pytest
import torch

from model.runner.generate import generate
from model.runner.own_words import own_words
from model.runner.params import DecodeParams
from model.runner.search import Hypothesis, Request

SRC = [5, 9, 14, 22, 31, 1]
TERM = (7, 8)


def teacher_forced(model, src: list[int], hyp, params: DecodeParams) -> float:
    """What `own_words` rates, by a full pass: the mean log-probability of the tokens outside the terms, EOS included,
    as `features` reads a beam score back (times n / n ** length_penalty)."""
    cfg = model.cfg
    out = [*hyp.tokens, cfg.eos_id] if hyp.finish_reason == "eos" else list(hyp.tokens)
    s, t = torch.tensor([src]), torch.tensor([[cfg.decoder_start_id, *out]])
    with torch.inference_mode():
        logp = model(s, torch.ones_like(s, dtype=torch.bool), t[:, :-1]).log_softmax(-1)[0]
    lps = [logp[i, tok].item() for i, tok in enumerate(out)]
    at = next(i for i in range(len(out)) if tuple(out[i : i + len(TERM)]) == TERM)
    kept = lps[:at] + lps[at + len(TERM) :]
    return sum(kept) / len(kept) * len(lps) / len(lps) ** params.length_penalty


@pytest.mark.parametrize("forced", ["none", "prefix", "bos"])
def test_a_constrained_output_is_rated_as_teacher_forcing_rates_it(model, forced):
    # catches: the beam's per-token log-probabilities off by a step or missing EOS's; a forced token (a retry's prefix,
    # NLLB's language token), which the beam scores 0, kept as 0 instead of the model's log-probability
    base = dict(max_new_tokens=12, beam_size=4, length_penalty=0.6)
    if forced == "prefix":
        (first,) = generate(model, [Request(0, SRC, DecodeParams(**base).constrained((TERM,)))])[0][:1]
        base["prefix"] = tuple(first.tokens[:2])
    elif forced == "bos":
        base["forced_bos_id"] = 10
    params = DecodeParams(**base).constrained((TERM,))
    (hyp,) = generate(model, [Request(0, SRC, params)])[0][:1]
    assert hyp.logprobs is not None and len(hyp.logprobs) == len(hyp.tokens) + (hyp.finish_reason == "eos")
    got = own_words(hyp, params).score
    assert got == pytest.approx(teacher_forced(model, SRC, hyp, params), abs=1e-4)


def test_a_word_mended_to_agree_with_a_term_is_left_out_like_the_term():
    # catches: the article the agreement forced ("un ventanal", which the model, wanting "la ventana", rates low)
    # counted as the model's own word: "La cocina tiene un ventanal grande." flagged at 0.41
    hyp = Hypothesis([3, 4, *TERM, 5], None, "eos", logprobs=[-1.0, -6.0, -9.0, -9.0, -0.5, -0.3])
    params = DecodeParams(beam_size=4).constrained((TERM,))
    assert own_words(hyp, params).score == pytest.approx((-1.0 - 6.0 - 0.5 - 0.3) / 4)
    mended = dataclasses.replace(params, mended=((1, 2),))
    assert own_words(hyp, mended).score == pytest.approx((-1.0 - 0.5 - 0.3) / 3)
