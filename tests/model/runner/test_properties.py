"""Property: after any sequence of joins, leaves (aborts) and steps of mixed requests (greedy, sampled, penalised, beam,
constrained), sequential or overlapped, every
request gets, step by step, exactly the outputs it gets alone (its tokens, or its beams' stable tokens, and its
finished hypotheses), and nothing after it finished or left."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from model.runner.loop import DecodeLoop
from model.runner.params import DecodeParams
from model.runner.search import Request
from tests.model.runner.test_decoding import _src

KINDS = [
    DecodeParams(max_new_tokens=9),
    DecodeParams(max_new_tokens=7, return_scores=False),
    DecodeParams(sampling=True, seed=5, top_k=8, temperature=0.9, max_new_tokens=8),
    DecodeParams(min_new_tokens=4, max_new_tokens=8, repetition_penalty=1.4),
    DecodeParams(no_repeat_ngram_size=2, max_new_tokens=10, forced_bos_id=7),
    DecodeParams(beam_size=2, max_new_tokens=6),
    DecodeParams(beam_size=3, num_hypotheses=2, max_new_tokens=8, length_penalty=0.6),
    DecodeParams(beam_size=4, max_new_tokens=7, early_stopping=True, no_repeat_ngram_size=2),
    DecodeParams(max_new_tokens=9).constrained(((5, 6), (9,))),  # a glossary's terms: beams, EOS after both
    DecodeParams(beam_size=3, max_new_tokens=8, length_penalty=0.6).constrained(((7, 8, 9),)),
]

# a round: requests that join (their kinds), requests that leave (indices into the running ones), then one step
ROUND = st.tuples(st.lists(st.sampled_from(range(len(KINDS))), max_size=3), st.lists(st.integers(0, 7), max_size=1))


def _output(o) -> tuple:
    """What one step gave a request, comparable."""
    hyps = None if o.hypotheses is None else [(h.tokens, h.finish_reason, h.score) for h in o.hypotheses]
    return o.token, tuple(o.stable), hyps


def _run(model, rounds: list[tuple[list[int], list[int]]], overlap: bool, kinds=KINDS, work=None
         ) -> tuple[dict, set, list[Request]]:  # fmt: skip
    """Drive a loop through `rounds` (its step's work after the logits run by `work` when given), then step until
    every request finished: each request's outputs in order, the ids that left, and the requests made."""
    loop, streams, left, made, done = DecodeLoop(model, overlap), {}, set(), [], set()
    if work is not None:
        loop.runner.work = work
    k = 0
    while k < len(rounds) or loop:
        joins, leaves = rounds[k] if k < len(rounds) else ([], [])
        running = [i for i in loop.ids if i not in done]
        gone = {running[j] for j in leaves if j < len(running)}
        if gone:
            left |= gone
            loop.retain([i for i in loop.ids if i not in gone])
        new = [Request(len(made) + n, _src(len(made) + n), kinds[kind]) for n, kind in enumerate(joins)]
        made += new
        if new:
            loop.join(loop.prefill(new))
        if loop:
            for o in loop.step():
                assert o.id not in left and o.id not in done, o.id
                streams.setdefault(o.id, []).append(_output(o))
                if o.finished:
                    done.add(o.id)
        k += 1
    return streams, left, made


def _alone(model, request: Request) -> list[tuple]:
    """A request's outputs, step by step, decoded alone."""
    loop, outputs = DecodeLoop(model), []
    loop.join(loop.prefill([request]))
    while loop:
        outputs += [_output(o) for o in loop.step()]
    return outputs


def _same(got: list[tuple], want: list[tuple]) -> bool:
    """Equal outputs, scores within float32 noise."""
    if len(got) != len(want):
        return False
    for (t, s, h), (wt, ws, wh) in zip(got, want, strict=True):
        if t != wt or s != ws or (h is None) != (wh is None):
            return False
        if h is not None and [x[:2] for x in h] != [x[:2] for x in wh]:
            return False
        if h is not None and [x[2] for x in h] != pytest.approx([x[2] for x in wh], abs=1e-4):
            return False
    return True


@pytest.mark.parametrize("overlap", [False, True])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rounds=st.lists(ROUND, min_size=1, max_size=8))
def test_every_request_gets_what_it_gets_alone(model, overlap, rounds):
    with torch.inference_mode():
        streams, left, made = _run(model, rounds, overlap)
        for request in made:
            want, got = _alone(model, request), streams.get(request.id, [])
            if request.id in left:  # it left: what it got is a prefix of its own outputs, without the result
                assert _same(got, want[: len(got)]) and len(got) < len(want), request.id
            else:
                assert _same(got, want), (request.id, got, want)
