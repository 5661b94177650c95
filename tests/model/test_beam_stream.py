"""Beam search that streams: the stable-prefix rule on hand-built hypotheses, and on real decoding that every stable
token handed out starts the final best output (nothing emitted is ever taken back)."""

import itertools

import pytest
import torch

from model.batch import DecodeBatch
from model.checkpoint import load
from model.choice import Choice
from model.params import DecodeParams
from model.search import Group, Hypothesis, Request

EOS = 1


def group(beam_size: int = 2, **params) -> Group:
    """A beam group of one request, before its first step (EOS is token 1)."""
    return Group(Request(0, [5, EOS], DecodeParams(beam_size=beam_size, max_new_tokens=10, **params)), EOS, 0)


def step(g: Group, *pool: tuple[float, int, int]) -> list[int]:
    """Advance the group with hand-made candidates (cumulative score, parent, token), best first; the stable tokens
    it then hands out."""
    g.advance(Choice([], None, {0: list(pool)}), 0)
    return g.stable_tokens()


def test_live_beams_alone_fix_their_shared_prefix_once():
    g = group(beam_size=3)
    g.beams, g.scores = [[5, 6, 7], [5, 6, 8], [5, 6, 7, 9]], [-1.0, -1.1, -1.2]
    assert g.stable_tokens() == [5, 6]
    assert g.stable_tokens() == []  # handed out once
    g.beams = [[5, 6, 7, 2], [5, 6, 7, 3], [5, 6, 7, 9]]
    assert g.stable_tokens() == [7]


def test_only_the_best_finished_hypotheses_hold_the_prefix_back():
    """A finished hypothesis that diverges at the first token blocks the stream while it is the best one (or tied
    with it); one that is not the best can never come first again and does not."""
    g = group(beam_size=4)
    g.beams = [[5, 6, 7], [5, 6, 8]]
    g.finished = [Hypothesis([4], -0.5, "eos")]
    assert g.stable_tokens() == []
    g.finished = [Hypothesis([4], -0.5, "eos"), Hypothesis([5, 6, 3], -0.5, "eos")]  # tied: both may come first
    assert g.stable_tokens() == []
    g.finished = [Hypothesis([5, 6, 3], -0.4, "eos"), Hypothesis([4], -0.5, "eos"), Hypothesis([3], -2.0, "eos")]
    assert g.stable_tokens() == [5, 6]
    g.finished = [Hypothesis([5], -0.1, "eos"), *g.finished]  # a finished prefix of the live beams: already out
    assert g.stable_tokens() == []


def test_a_finished_hypothesis_that_diverged_early_stops_blocking_once_beaten():
    """Through the real bookkeeping: [6] finishes at step 2 and is the best, so the beams' shared [5] waits; at step
    3 [5, 7] finishes with a better length-normalised score and [6] can no longer come first: [5] goes out."""
    g = group(beam_size=2, length_penalty=1.0)
    assert step(g, (-0.1, 0, 5), (-0.2, 0, 6), (-0.3, 0, 7)) == []  # beams [5], [6]
    assert step(g, (-0.3, 0, 7), (-0.35, 1, EOS), (-0.5, 0, 8)) == []  # [6] finished (-0.175); beams [5, 7], [5, 8]
    assert g.finished[0].tokens == [6]
    assert step(g, (-0.4, 0, EOS), (-0.45, 0, 9), (-0.5, 1, 9)) == [5]  # [5, 7] finished (-0.133) beats [6]
    assert [h.tokens for h in g.finished] == [[5, 7], [6]] and g.beams == [[5, 7, 9], [5, 8, 9]]
    assert step(g, (-0.5, 0, 2), (-0.55, 0, 3), (-0.6, 1, 3)) == [7]  # beams [5, 7, 9, *]; [5, 7] may still win
    assert step(g, (-0.6, 0, EOS), (-0.7, 1, EOS), (-5.0, 0, 4)) == []  # finished: the result carries the rest
    assert g.result()[0].tokens == [5, 7, 9, 2] and g.emitted == 2


CASES = [
    {"length_penalty": lp, "early_stopping": early, "beam_size": beams}
    for lp, early, beams in itertools.product((-1.0, 0.0, 0.6, 1.0, 2.0), (False, True), (2, 4))
]
TEXTS = ["the cat sleeps", "a big red dog runs in the city", "hello world", "the small green tree eats", "good night"]


@pytest.fixture(scope="module")
def flat_marian(tmp_path_factory):
    """A tiny Marian whose small embeddings flatten its next-token distributions: beams overtake each other."""
    from bench.harness.fixtures import make_marian

    return make_marian(tmp_path_factory.mktemp("flat") / "opus-mt-en-es", embed_std=0.3)


@pytest.mark.parametrize("family", ["native_dir", "flat_marian"])
def test_every_stable_token_starts_the_final_best_output(family, request):
    """Beam requests of many settings decoded together, step by step: what each has handed out so far is always a
    prefix of its final best output, and some hand out tokens before they finish."""
    ck = load(request.getfixturevalue(family))
    requests = [
        Request(i, ck.tokenizer.encode(TEXTS[i % 5]), DecodeParams(max_new_tokens=8 + i % 40, **case))
        for i, case in enumerate(CASES * 2)
    ]
    streamed, results, early = {r.id: [] for r in requests}, {}, 0
    with torch.inference_mode():
        batch = DecodeBatch.prefill(ck.model, requests)
        while len(batch):
            batch, outputs = batch.step(ck.model)
            for out in outputs:
                streamed[out.id] += out.stable
                if out.finished:
                    results[out.id] = out.hypotheses[0].tokens
                    early += bool(streamed[out.id])
                else:
                    assert out.token is None
    for r in requests:
        assert results[r.id][: len(streamed[r.id])] == streamed[r.id], r.params
    assert early >= len(requests) // 4
