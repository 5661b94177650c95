"""The engine core with overlap (a decode step kept in flight, read back after the next one is launched) answers
what it answers step by step: the same results and scores, the same tokens streamed to each request in the same
order, nothing after a request's result or its abort, requests joining while a step is in flight, beam search
keeping a step in flight too; a failed step with one in flight fails its batch only; the setting reaches the
core (off by default on CPU)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from app.__main__ import parse_args
from app.engine.build import make_core as engine_core
from app.engine.core import EngineCore
from app.engine.messages import Update
from app.settings import Settings
from tests.app.inprocess import FRONT, TEXTS, make_core, submit

WORDS = "the cat sleeps a big red dog runs in city hello world small green tree eats house is".split()


def _texts(n: int, seed: int = 0) -> list[str]:
    """n short random sentences of the tiny vocabulary (their translations end at many different steps)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for _ in range(n)]


def play(core: EngineCore, script: dict[int, Callable[[EngineCore], object]]) -> tuple[list[Update], list[bool]]:
    """Rounds until the core is idle and the script is done; before round k, script[k](core). FRONT's Update of
    each round, and whether a decode step was left in flight after it."""
    updates, in_flight, k = [], [], 0
    while k <= max(script) or core.wait_s() is not None:
        if k in script:
            script[k](core)
        if core.wait_s() == 0:
            core.run_round()
        updates.append(core.flush().get(FRONT, Update()))
        in_flight.append(core.loop.pending is not None)
        k += 1
    return updates, in_flight


def _streams(updates: list[Update]) -> dict[int, list[int]]:
    """Tokens streamed per unit, in order; checks that none comes after the unit's result."""
    streams, done = {}, set()
    for u in updates:
        for i, t in zip(u.ids, u.tokens, strict=True):
            assert i not in done, f"unit {i} got a token after its result"
            streams.setdefault(i, []).append(t)
        done |= {r.id for r in u.results}
    return streams


def _script(checkpoint, aborted: int) -> dict:
    """Streams (greedy, seeded sampling, short limits), JSON requests and beams arriving over the rounds, more than
    the 8 rows hold (they join as rows free up); unit `aborted` is aborted at round 4 while it runs."""
    texts = _texts(24)
    greedy, sampled = {"max_new_tokens": 40}, {"sampling": True, "temperature": 1.3, "seed": 4, "max_new_tokens": 40}

    def at(first: int, stream: bool, **params) -> Callable[[EngineCore], object]:
        three = texts[first // 10 * 3 - 3 :][:3]
        return lambda core: submit(core, checkpoint, three, first, stream, **params)

    return {
        0: at(10, True, **greedy),
        1: at(20, True, **sampled),
        2: at(30, False, **greedy),
        4: lambda core: core.abort(FRONT, [aborted]),
        5: at(40, True, min_new_tokens=12, max_new_tokens=12),
        7: at(50, False, beam_size=3, num_hypotheses=2, max_new_tokens=6),
        9: at(60, True, max_new_tokens=5),
        12: at(70, True, forced_eos=True, min_new_tokens=7, max_new_tokens=9),
        30: at(80, True, **greedy),
    }


def test_overlapped_core_equals_the_sequential_core(checkpoint):
    """Everything a front receives is the same with a step in flight, except that an aborted request's stream may
    stop one token earlier; the step is in flight in most rounds, also while a beam request runs."""
    runs = {}
    for overlap in (False, True):
        core = make_core(checkpoint.model, overlap=overlap)
        runs[overlap] = play(core, _script(checkpoint, aborted=11))
        assert core.load == (0, 0) and core.reserved == 0 and core.loop.pending is None
    (seq, seq_flight), (ahead, flight) = runs[False], runs[True]
    results = [{r.id: r for u in updates for r in u.results} for updates in (seq, ahead)]
    assert set(results[0]) == set(results[1]) and 11 not in results[1] and len(results[1]) == 23
    for i, want in results[0].items():
        got = results[1][i]
        assert [h.tokens for h in got.hypotheses] == [h.tokens for h in want.hypotheses], i
        assert [h.finish_reason for h in got.hypotheses] == [h.finish_reason for h in want.hypotheses], i
        assert [h.score for h in got.hypotheses] == pytest.approx([h.score for h in want.hypotheses], abs=1e-5), i
    streams = [_streams(seq), _streams(ahead)]
    cut = streams[1].pop(11)
    assert cut == streams[0].pop(11)[: len(cut)]
    assert streams[1] == streams[0]
    assert set(streams[1]) == {i for i in results[1] if i // 10 in (1, 2, 4, 6, 7, 8)}  # streams only
    finishes = {h.finish_reason for r in results[1].values() for h in r.hypotheses}
    assert finishes == {"eos", "length"} and len({len(r.hypotheses[0].tokens) for r in results[1].values()}) >= 5
    assert not any(seq_flight) and sum(flight) >= len(flight) // 2
    end = next(k for k, u in enumerate(ahead) if any(r.id == 50 for r in u.results))  # the beam request's 6 steps
    assert all(flight[end - 6 : end])  # overlapped as well


def test_a_failed_step_with_one_in_flight_fails_its_batch_only(faulty, checkpoint):
    """The decode step raises while another is in flight: its requests fail, nothing stays in flight, and the core
    serves the next requests as before."""
    core = make_core(faulty, overlap=True)
    ids = submit(core, checkpoint, TEXTS[:2], first=1, stream=True, min_new_tokens=30, max_new_tokens=30)
    first, flight = play(core, {3: lambda core: setattr(faulty, "step_error", RuntimeError("device fell over"))})
    assert flight[:3] == [True] * 3
    got = {r.id: r for u in first for r in u.results}
    assert all("decoding failed: device fell over" in got[i].error for i in ids)
    assert core.loop.pending is None and core.loop.state is None and core.reserved == 0
    again = submit(core, checkpoint, TEXTS[2:], first=10, stream=True, max_new_tokens=30)
    updates, _ = play(core, {0: lambda core: None})
    reference = make_core(checkpoint.model)
    submit(reference, checkpoint, TEXTS[2:], first=10, stream=True, max_new_tokens=30)
    expected, _ = play(reference, {0: lambda core: None})
    assert _streams(updates) == _streams(expected) and set(_streams(updates)) == set(again)


def test_overlap_is_a_setting_off_by_default_on_cpu(checkpoint):
    """On CPU nothing runs asynchronously, so the core steps sequentially unless told; the flag and the setting reach
    the core."""
    assert engine_core("en-es", checkpoint.model, Settings()).loop.overlap is False
    assert engine_core("en-es", checkpoint.model, Settings(overlap=True)).loop.overlap is True
    assert parse_args(["--overlap"])["overlap"] is True and parse_args(["--no-overlap"])["overlap"] is False
    assert "overlap" not in parse_args([])
