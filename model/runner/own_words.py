"""An output with glossary terms as the confidence's beam head reads it (`model.confidence`): the terms are the user's
words, however unlikely the model finds them, so only the model's own tokens count."""

from __future__ import annotations

from dataclasses import replace

from model.runner.fallback import places
from model.runner.params import DecodeParams
from model.runner.search import Hypothesis


def own_words(hyp: Hypothesis, params: DecodeParams) -> Hypothesis:
    """A beam output with glossary terms as its beam head reads it: its score the mean log-probability of the model's
    own tokens (as the beam kept them, EOS included), the terms' left out. They are the user's words, however unlikely
    the model finds them: "La vivienda es grande." (house -> vivienda) is no worse a sentence (its beam score rated
    0.0). So are the words the agreement mended before a term (`params.mended`: "un ventanal", where the model wrote
    "la ventana")."""
    logprobs = hyp.logprobs
    covered = {i for a, b in params.mended for i in range(a, b)}
    for term in params.constraints:
        for i in places(hyp.tokens, term):
            covered.update(range(i, i + len(term)))
    kept = [x for i, x in enumerate(logprobs) if i not in covered] or logprobs
    n = max(len(logprobs), 1)  # `features` reads score * n ** length_penalty / n back as the mean
    return replace(hyp, score=sum(kept) / max(len(kept), 1) * n / n**params.length_penalty)
