"""Beam search that streams: the stable-prefix rule on hand-built hypotheses, and on real decoding that every stable
token handed out starts the final best output (nothing emitted is ever taken back)."""

import itertools

import pytest
import torch

from model.loading.checkpoint import load
from model.runner.beams import BeamState, HostMoves, step
from model.runner.choice import pack
from model.runner.loop import DecodeLoop
from model.runner.params import DecodeParams
from model.runner.search import Request
from tests.model.runner.test_beams import Beam, knobs_of, take

EOS = 1


class OneGroup:
    """One beam request's device state driven with hand-made candidates, as a batch drives it (EOS is token 1)."""

    def __init__(self, beam_size: int = 2, **params):
        params = DecodeParams(beam_size=beam_size, max_new_tokens=10, **params)
        self.group = Beam(params, beam_size)
        self.state = BeamState.start([beam_size], 16, torch.device("cpu"))

    def step(self, *pool: tuple[float, int, int]) -> list[int]:
        """Advance with candidates (cumulative score, parent, token), best first; the stable tokens handed out."""
        p, g = self.group.params, self.group
        score, parent, token = (torch.tensor([list(c)]) for c in zip(*pool, strict=True))
        knobs = [p.beam_size, p.max_new_tokens, g.steps, 0, len(pool), p.length_penalty, p.early_stopping, p.forced_eos]
        self.state, moves = step(self.state, (score.float(), parent, token), knobs_of([knobs], score.device), EOS)
        host = HostMoves.read(pack(moves.packed()), 1, self.state.score.shape[1])
        rows = take(host, g, 0, 0)
        parents, source, tokens, at = torch.tensor(list(zip(*rows, strict=True)) or [[]] * 4, dtype=torch.long)
        self.state = self.state.extend(parents, moves, source, tokens, at)
        return host.stable(0)

    def beams(self) -> list[list[int]]:
        """The live beams' tokens, in row order."""
        return [row[: self.group.steps] for row in self.state.history.tolist()[: self.group.width]]

    def finished(self) -> list[list[int]]:
        """The finished hypotheses' tokens, best first."""
        return [h.tokens for h in self.state.hypotheses([0], [self.group.params.beam_size])[0]]


def test_live_beams_alone_fix_their_shared_prefix_once():
    g = OneGroup(beam_size=3)
    assert g.step((-0.1, 0, 5), (-0.2, 0, 9), (-0.3, 0, 8)) == []  # beams [5], [9], [8]
    assert g.step((-0.2, 0, 6), (-0.3, 0, 7), (-0.4, 0, 8)) == [5]  # all continue [5]
    assert g.step((-0.3, 0, 2), (-0.4, 0, 3), (-0.5, 0, 4)) == [6]  # all continue [5, 6]
    assert g.step((-0.4, 0, 2), (-0.5, 1, 3), (-0.6, 2, 4)) == []  # handed out once
    assert g.beams() == [[5, 6, 2, 2], [5, 6, 3, 3], [5, 6, 4, 4]]


def test_a_finished_hypothesis_that_diverged_early_stops_blocking_once_beaten():
    """[6] finishes at step 2 and is the best, so the beams' shared [5] waits; at step 3 [5, 7] finishes with a
    better length-normalised score and [6] can no longer come first: [5] goes out."""
    g = OneGroup(beam_size=2, length_penalty=1.0)
    assert g.step((-0.1, 0, 5), (-0.2, 0, 6), (-0.3, 0, 7)) == []  # beams [5], [6]
    assert g.step((-0.3, 0, 7), (-0.35, 1, EOS), (-0.5, 0, 8)) == []  # [6] finished (-0.175); beams [5, 7], [5, 8]
    assert g.finished() == [[6]]
    assert g.step((-0.4, 0, EOS), (-0.45, 0, 9), (-0.5, 1, 9)) == [5]  # [5, 7] finished (-0.133) beats [6]
    assert g.finished() == [[5, 7], [6]] and g.beams() == [[5, 7, 9], [5, 8, 9]]
    assert g.step((-0.5, 0, 2), (-0.55, 0, 3), (-0.6, 1, 3)) == [7]  # beams [5, 7, 9, *]; [5, 7] may still win
    assert g.step((-0.6, 0, EOS), (-0.7, 1, EOS), (-5.0, 0, 4)) == []  # finished: the result carries the rest
    assert g.finished()[0] == [5, 7, 9, 2] and g.group.width == 0


def test_a_tied_finished_hypothesis_holds_the_prefix_back():
    """Without length penalty, [4] and a later hypothesis finish with equal scores: both may come first, so the live
    beams' shared prefix waits until a better one finishes."""
    g = OneGroup(beam_size=3, length_penalty=0.0)
    assert g.step((-0.1, 0, 5), (-0.2, 0, 4), (-0.3, 0, 8)) == []  # beams [5], [4], [8]
    assert g.step((-0.25, 0, 6), (-0.3, 1, EOS), (-0.35, 0, 7), (-0.4, 0, 3)) == []  # [4] finished at -0.3
    assert g.step((-0.3, 0, EOS), (-0.31, 0, 2), (-0.32, 1, 2), (-0.33, 2, 2)) == []  # [5, 6] ties with [4]
    assert g.step((-0.2, 0, EOS), (-0.21, 0, 3), (-0.22, 1, 3), (-0.23, 2, 3)) == [5]  # [5, 6, 2] beats both
    assert g.finished() == [[5, 6, 2], [4], [5, 6]]


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
        loop = DecodeLoop(ck.model)
        loop.join(loop.prefill(requests))
        while loop:
            for out in loop.step():
                streamed[out.id] += out.stable
                if out.finished:
                    results[out.id] = out.hypotheses[0].tokens
                    early += bool(streamed[out.id])
                else:
                    assert out.token is None
    for r in requests:
        assert results[r.id][: len(streamed[r.id])] == streamed[r.id], r.params
    assert early >= len(requests) // 4
