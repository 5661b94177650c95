"""The decode loop owns the decode state and the step in flight: a failed join leaves the running requests exactly as
they were, nothing stays in flight once every request left, and requests that leave while a step is in flight get
nothing more."""

import pytest
import torch

import model.runner.state as state_module
from model.runner.generate import generate
from model.runner.loop import DecodeLoop
from model.runner.search import Request
from tests.model.runner import cache_oracle
from tests.model.runner.test_decoding import MIXED, _src, _tokens


def _finish(loop: DecodeLoop, results: dict) -> dict:
    """Step until every request finished, collecting each request's n-best."""
    while loop:
        results.update((o.id, o.hypotheses) for o in loop.step() if o.finished)
    return results


def _snapshot(loop: DecodeLoop) -> tuple:
    """Everything the state holds for its rows, copied: host records, row columns and the pool's live part."""
    st = loop.state
    host = [(s.id, s.first, s.width, s.steps, list(s.tokens)) for s in st.seqs]
    rows, t, slots, s = st.rows, st.max_length, len(st.seqs), st.src_len
    pool = [x.clone() for x in (st.pool.k[:, :rows, :, :t], st.pool.v[:, :rows, :, :t], st.pool.positions[:rows],
                                st.pool.ck[:, :slots, :, :s], st.pool.mask[:slots, :s])]  # fmt: skip
    search = [x.clone() for x in st.search.fields()]
    return host, st.tokens.clone(), pool, search


def _equal(a: tuple, b: tuple) -> bool:
    """Two snapshots hold the same."""
    same = lambda x, y: all(torch.equal(p, q) for p, q in zip(x, y, strict=True))  # noqa: E731
    return a[0] == b[0] and torch.equal(a[1], b[1]) and same(a[2], b[2]) and same(a[3], b[3])


@pytest.mark.parametrize("overlap", [False, True])
@torch.inference_mode()
def test_a_failed_join_leaves_the_running_requests_as_they_were(model, monkeypatch, overlap):
    """A join runs out of memory after the pool grew and the new sources were written: the running requests' state
    is exactly as before, the step in flight is kept, and they end as alone; a later join works."""
    loop = DecodeLoop(model, overlap)
    running = [Request(i, _src(i), p) for i, p in enumerate(MIXED[:3])]
    loop.join(loop.prefill(running))
    loop.step()
    in_flight, before = loop.pending, _snapshot(loop)
    original = state_module.BeamState.concat

    def broken(self, other):
        raise torch.OutOfMemoryError("injected")

    monkeypatch.setattr(state_module.BeamState, "concat", broken)
    with pytest.raises(torch.OutOfMemoryError):
        loop.join(loop.prefill([Request(9, _src(9) * 3, MIXED[3])]))  # a longer source: the pool grows first
    assert _equal(_snapshot(loop), before) and loop.ids == [0, 1, 2] and loop.rows == 1 + 4 + 1
    assert loop.pending is in_flight and (in_flight is not None) == overlap
    monkeypatch.setattr(state_module.BeamState, "concat", original)
    late = Request(7, _src(7), MIXED[5])
    loop.join(loop.prefill([late]))
    results = _finish(loop, {})
    for req in [*running, late]:
        assert _tokens(results[req.id]) == _tokens(generate(model, [req])[0])


@torch.inference_mode()
def test_a_failed_first_join_leaves_an_empty_loop(model, monkeypatch):
    """The first join fails: no state, nothing in flight, and the next requests are served as alone."""
    loop = DecodeLoop(model, overlap=True)
    monkeypatch.setattr(state_module.BeamState, "concat", lambda self, other: (_ for _ in ()).throw(MemoryError()))
    with pytest.raises(MemoryError):
        loop.join(loop.prefill([Request(1, _src(1), MIXED[1])]))
    monkeypatch.undo()
    assert not loop and loop.state is None and loop.pending is None and loop.ids == [] and loop.cache_tokens() == 0
    later = Request(2, _src(2), MIXED[2])
    loop.join(loop.prefill([later]))
    assert _tokens(_finish(loop, {})[2]) == _tokens(generate(model, [later])[0])


@pytest.mark.parametrize("overlap", [False, True])
@torch.inference_mode()
def test_leaving_with_a_step_in_flight_and_ending_empty(model, overlap):
    """Requests that leave while a step is in flight get nothing more; the others end as alone; once every request
    finished, nothing is in flight and the cache's count is the device's."""
    loop = DecodeLoop(model, overlap)
    requests = [Request(i, _src(i), p) for i, p in enumerate(MIXED)]
    loop.join(loop.prefill(requests))
    for _ in range(2):
        loop.step()
    assert (loop.pending is not None) == overlap
    loop.retain([i for i in loop.ids if i not in (1, 4)])
    assert loop.cache_tokens() == cache_oracle.tokens(loop.state)
    results: dict = {}
    while loop:
        for out in loop.step():
            assert out.id not in (1, 4)
            if out.finished:
                results[out.id] = out.hypotheses
    assert loop.pending is None and loop.rows == 0 and loop.cache_tokens() == 0
    for req in requests:
        if req.id not in (1, 4):
            assert _tokens(results[req.id]) == _tokens(generate(model, [req])[0])
    loop.join(loop.prefill([Request(7, _src(7), MIXED[1])]))  # a beam group runs one more step after it is done
    assert _tokens(_finish(loop, {})[7]) == _tokens(generate(model, [Request(7, _src(7), MIXED[1])])[0])
    assert loop.pending is None
