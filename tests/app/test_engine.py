"""The engine in-process over the tiny model: results equal the offline oracle, aborts, the queue limit and
fault isolation (a poisoned input fails alone; a failed decode step fails the batch but not the engine)."""

from __future__ import annotations

import time

import pytest

from app.engine.engine import Engine, Overloaded
from app.engine.request import Failed, Finished
from app.engine.scheduler import Limits
from app.metrics import Metrics
from tests.app.inprocess import POISON, TEXTS, make_request, oracle


def test_results_equal_offline_generate(engine, checkpoint):
    """Mixed requests decoded together give the oracle's hypotheses; greedy/sampling tokens stream one by one."""
    cases = [
        {"max_new_tokens": 40},
        {"beam_size": 3, "num_hypotheses": 2, "max_new_tokens": 40},
        {"sampling": True, "temperature": 1.3, "seed": 4, "max_new_tokens": 40},
        {"min_new_tokens": 10, "max_new_tokens": 12},
    ]
    pairs = [make_request(checkpoint, t, **p) for t, p in zip(TEXTS, cases, strict=True)]
    engine.submit(*(r for r, _ in pairs))
    for (_, listener), text, params in zip(pairs, TEXTS, cases, strict=True):
        final = listener.last()
        assert isinstance(final, Finished)
        expected = oracle(checkpoint, text, **params)
        assert [h.tokens for h in final.hypotheses] == [h.tokens for h in expected]
        assert final.finish_reason == expected[0].finish_reason
        assert final.hypotheses[0].score == pytest.approx(expected[0].score, abs=1e-4)
        if params.get("beam_size", 1) == 1:
            assert listener.tokens == expected[0].tokens
        else:
            assert listener.tokens == []  # beams stream nothing
        assert 0 <= final.queue_s <= final.total_s
    m = engine.metrics
    assert m.requests.labels("en-es", "eos")._value.get() + m.requests.labels("en-es", "length")._value.get() == 4


def test_abort_frees_the_rows(engine, checkpoint):
    """An aborted running request finishes as 'aborted' at the next step; the others are untouched."""
    long_req, long_l = make_request(checkpoint, TEXTS[0], max_new_tokens=255, min_new_tokens=255)
    short_req, short_l = make_request(checkpoint, TEXTS[1], max_new_tokens=40)
    engine.submit(long_req, short_req)
    deadline = time.monotonic() + 10
    while len(long_l.tokens) < 3 and time.monotonic() < deadline:
        time.sleep(0.001)
    engine.abort(long_req)
    final = long_l.last()
    assert isinstance(final, Finished) and final.finish_reason == "aborted" and final.hypotheses == []
    assert len(long_l.tokens) < 255
    assert [h.tokens for h in short_l.last().hypotheses] == [oracle(checkpoint, TEXTS[1], max_new_tokens=40)[0].tokens]
    assert engine.load == (0, 0)
    assert engine.metrics.running._value.get() == 0 and engine.metrics.cache_tokens._value.get() == 0


def test_queue_limit(checkpoint, faulty):
    """A full queue refuses at once; a job's requests enter together or not at all."""
    e = Engine("en-es", faulty, Limits(8, 65536, 4096), Metrics(), max_queue=2, max_wait_ms=0)  # not started
    three = [make_request(checkpoint, t)[0] for t in TEXTS[:3]]
    e.submit(*three)  # room when it arrives: the whole job is queued
    with pytest.raises(Overloaded):
        e.submit(make_request(checkpoint, TEXTS[3])[0])
    assert len(e.scheduler.waiting) == 3 and e.metrics.waiting._value.get() == 3


def test_encode_failure_fails_only_that_request(engine, faulty, checkpoint):
    """A source that makes encode raise: that request gets Failed(generation), its batch-mates succeed."""
    pairs = [make_request(checkpoint, t, max_new_tokens=30) for t in (TEXTS[0], POISON, TEXTS[1])]
    engine.submit(*(r for r, _ in pairs))
    (_, good1), (_, bad), (_, good2) = pairs
    failed = bad.last()
    assert isinstance(failed, Failed)
    assert failed.error_type == "generation" and "poisoned input" in failed.message
    for listener, text in ((good1, TEXTS[0]), (good2, TEXTS[1])):
        assert listener.last().hypotheses[0].tokens == oracle(checkpoint, text, max_new_tokens=30)[0].tokens
    assert faulty.encoded[0] == 3  # they were encoded as one batch first, then one by one
    assert engine.alive and engine.load == (0, 0)
    assert engine.metrics.running._value.get() == 0


def test_decode_failure_fails_the_batch_but_not_the_engine(engine, faulty, checkpoint):
    """A decode step that raises fails the running requests; the engine serves the next ones correctly."""
    pairs = [make_request(checkpoint, t, max_new_tokens=30) for t in TEXTS[:2]]
    faulty.step_error = RuntimeError("device fell over")
    engine.submit(*(r for r, _ in pairs))
    for _, listener in pairs:
        final = listener.last()
        assert isinstance(final, Failed) and "device fell over" in final.message
    assert engine.alive
    assert engine.metrics.running._value.get() == 0 and engine.metrics.cache_tokens._value.get() == 0
    assert engine.reserved == 0
    again, listener = make_request(checkpoint, TEXTS[2], max_new_tokens=30)
    engine.submit(again)
    assert listener.last().hypotheses[0].tokens == oracle(checkpoint, TEXTS[2], max_new_tokens=30)[0].tokens
