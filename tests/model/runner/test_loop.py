"""The decode loop owns the batch and the step in flight: a failed join leaves the running requests as they were
(or, when it cannot restore them, nothing), nothing stays in flight once the batch is empty, and requests that leave
while a step is in flight get nothing more."""

import pytest
import torch

from model.generate import generate
from model.runner.batch import DecodeBatch
from model.runner.loop import DecodeLoop
from model.search import Request
from tests.model.runner import cache_oracle
from tests.model.runner.test_decoding import MIXED, _src, _tokens


def _finish(loop: DecodeLoop, results: dict) -> dict:
    """Step until the batch is empty, collecting each request's n-best."""
    while loop:
        results.update((o.id, o.hypotheses) for o in loop.step() if o.finished)
    return results


def _broken(monkeypatch, name: str, after: str | None) -> None:
    """DecodeBatch.<name> raises (once) after running `after` on the batch's cache, as a late allocation would."""
    original, armed = getattr(DecodeBatch, name), [True]

    def broken(self, *args):
        if not armed:
            return original(self, *args)
        armed.clear()
        if after == "append":
            self.cache.append_(args[0].cache)
        raise torch.OutOfMemoryError("injected")

    monkeypatch.setattr(DecodeBatch, name, broken)


@pytest.mark.parametrize("overlap", [False, True])
@torch.inference_mode()
def test_a_failed_join_restores_the_running_requests(model, monkeypatch, overlap):
    """concat fails after the cache grew: the joining rows are gone from the cache, the step in flight is kept, and
    the running requests end as alone."""
    loop = DecodeLoop(model, overlap)
    running = [Request(i, _src(i), p) for i, p in enumerate(MIXED[:3])]
    loop.join(loop.prefill(running))
    loop.step()
    in_flight = loop.pending
    _broken(monkeypatch, "concat", after="append")
    with pytest.raises(torch.OutOfMemoryError):
        loop.join(loop.prefill([Request(9, _src(9), MIXED[3])]))
    assert loop.ids == [0, 1, 2] and loop.batch.cache.rows == loop.rows == 1 + 4 + 1
    assert loop.pending is in_flight and (in_flight is not None) == overlap
    results = _finish(loop, {})
    for req in running:
        assert _tokens(results[req.id]) == _tokens(generate(model, [req])[0])


@torch.inference_mode()
def test_a_join_that_cannot_be_undone_clears_the_loop(model, monkeypatch):
    """concat fails and so does the restoring filter: the loop holds no batch and no step in flight, and serves the
    next requests as alone."""
    loop = DecodeLoop(model, overlap=True)
    loop.join(loop.prefill([Request(0, _src(0), MIXED[0])]))
    loop.step()
    _broken(monkeypatch, "concat", after=None)
    _broken(monkeypatch, "filter", after=None)
    with pytest.raises(torch.OutOfMemoryError):
        loop.join(loop.prefill([Request(1, _src(1), MIXED[1])]))
    assert not loop and loop.batch is None and loop.pending is None and loop.ids == [] and loop.cache_tokens() == 0
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
    loop.keep([i for i in loop.ids if i not in (1, 4)])
    assert loop.cache_tokens() == cache_oracle.tokens(loop.batch.cache)
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
