"""The scheduler plans admissions in arrival order under row, cache-token and prefill budgets (no model, no HTTP)."""

from __future__ import annotations

import random

from app.engine.request import EngineRequest
from app.engine.scheduler import Limits, Plan, Scheduler
from model.runner.params import DecodeParams


def req(src_len: int = 5, beams: int = 1, max_new: int = 10) -> EngineRequest:
    """A request with `src_len` source tokens."""
    return EngineRequest(list(range(src_len)), DecodeParams(beam_size=beams, max_new_tokens=max_new))


def scheduler(
    *requests: EngineRequest, rows: int = 8, tokens: int = 1000, prefill: int = 100, size: int | None = None
) -> Scheduler:
    """A scheduler with these requests waiting (at most `size` requests together, default `rows`)."""
    s = Scheduler(Limits(size or rows, rows, tokens, prefill))
    for r in requests:
        s.add(r)
    return s


def test_admits_everything_that_fits_in_order():
    """With room for all, every waiting request is admitted, oldest first, and the queue empties."""
    rs = [req() for _ in range(4)]
    s = scheduler(*rs)
    assert s.plan(0, 0, 0) == Plan(rs, [])
    assert not s.waiting
    assert s.plan(4, 4, 60) == Plan([], [])


def test_rows_budget_counts_beams_and_running_rows():
    """A beam request takes beam_size rows; rows already running count against max_batch_rows."""
    a, b, c = req(beams=4), req(beams=3), req(beams=1)
    s = scheduler(a, b, c, rows=8)
    assert s.plan(0, 0, 0).admit == [a, b, c]  # 4 + 3 + 1 = 8
    s = scheduler(a, b, c, rows=8)
    assert s.plan(1, 2, 0).admit == [a]  # 2 + 4 = 6; + 3 would be 9
    assert list(s.waiting) == [b, c]


def test_never_skips_ahead_of_a_request_that_does_not_fit():
    """FIFO: a small request behind a big one waits, even if it alone would fit (no starvation of big ones)."""
    big, small = req(beams=6), req(beams=1)
    s = scheduler(big, small, rows=8)
    assert s.plan(4, 4, 0).admit == []
    assert list(s.waiting) == [big, small]


def test_cache_token_budget():
    """Reserved tokens (the source once + beams x max_new_tokens) stay within max_batch_tokens."""
    a, b = req(src_len=10, max_new=40), req(src_len=10, max_new=40)  # 50 each
    assert a.reserved_tokens == 50
    assert scheduler(a, b, tokens=100).plan(0, 0, 0).admit == [a, b]
    assert scheduler(a, b, tokens=99).plan(0, 0, 0).admit == [a]
    assert scheduler(a, b, tokens=100).plan(1, 1, 60).admit == []
    wide = req(src_len=10, beams=3, max_new=40)
    assert wide.reserved_tokens == 130


def test_prefill_budget_spreads_admission_over_steps():
    """At most max_prefill_tokens source tokens are encoded per step; the rest join at the next plan."""
    rs = [req(src_len=40) for _ in range(5)]
    s = scheduler(*rs, prefill=100)
    assert s.plan(0, 0, 0).admit == rs[:2]
    assert s.plan(2, 2, 0).admit == rs[2:4]
    assert s.plan(4, 4, 0).admit == rs[4:]


def test_a_lone_request_always_runs():
    """Nothing running: the oldest request is admitted whatever its size (else it would wait forever)."""
    huge = req(src_len=300, beams=16, max_new=500)
    s = scheduler(huge, req(), rows=8, tokens=100, prefill=100)
    assert s.plan(0, 0, 0).admit == [huge]
    assert len(s.waiting) == 1
    assert scheduler(huge, rows=8, tokens=100).plan(1, 1, 10).admit == []  # but not next to running rows


def test_aborted_waiting_requests_are_dropped():
    """Requests aborted while waiting leave the queue in the plan's drop list and are never admitted."""
    a, b, c = req(), req(), req()
    b.aborted = True
    s = scheduler(a, b, c)
    plan = s.plan(0, 0, 0)
    assert plan.admit == [a, c] and plan.drop == [b]
    assert s.plan(2, 2, 0) == Plan([], [])


def test_random_plans_keep_the_invariants():
    """Random queues: admitted = a prefix of the live queue, budgets hold unless a lone request runs."""
    rng = random.Random(0)
    for _ in range(300):
        lim = Limits(rng.randint(1, 8), rng.randint(1, 16), rng.randint(10, 400), rng.randint(5, 120))
        s = Scheduler(lim)
        queue = [req(rng.randint(1, 60), rng.randint(1, 4), rng.randint(1, 60)) for _ in range(rng.randint(0, 12))]
        for r in queue:
            r.aborted = rng.random() < 0.2
            s.add(r)
        rows, tokens = rng.choice([0, rng.randint(0, lim.max_batch_rows)]), rng.randint(0, lim.max_batch_tokens)
        running = min(rows, rng.randint(0, lim.max_batch_size))
        plan = s.plan(running, rows, tokens)
        live = [r for r in queue if not r.aborted]
        assert plan.drop == [r for r in queue if r.aborted]
        assert plan.admit == live[: len(plan.admit)]
        assert list(s.waiting) == live[len(plan.admit) :]
        if plan.admit and not (rows == 0 and len(plan.admit) == 1):  # a lone request may exceed budgets
            assert rows + sum(r.params.beam_size for r in plan.admit) <= lim.max_batch_rows
            assert running + len(plan.admit) <= lim.max_batch_size
            assert tokens + sum(r.reserved_tokens for r in plan.admit) <= lim.max_batch_tokens
        if len(plan.admit) > 1:
            assert sum(len(r.src) for r in plan.admit) <= lim.max_prefill_tokens
        if rows == 0 and live:
            assert plan.admit, "an idle engine must admit something"
        if s.waiting and plan.admit:  # the next request really did not fit
            nxt = s.waiting[0]
            over_rows = rows + sum(r.params.beam_size for r in plan.admit) + nxt.params.beam_size > lim.max_batch_rows
            over_requests = running + len(plan.admit) + 1 > lim.max_batch_size
            over_tokens = (
                tokens + sum(r.reserved_tokens for r in plan.admit) + nxt.reserved_tokens > lim.max_batch_tokens
            )
            over_prefill = sum(len(r.src) for r in plan.admit) + len(nxt.src) > lim.max_prefill_tokens
            assert over_rows or over_requests or over_tokens or over_prefill


def test_joins_are_paced_by_their_cost():
    """While rows run, waiting requests join once the decoding since the last join took >= its time / join_overhead,
    or once max_join_wait has passed; an idle engine admits at once; aborted requests are dropped meanwhile."""
    a, b, c = req(), req(), req()
    s = Scheduler(Limits(8, 8, 1000, 100, join_overhead=0.1, max_join_wait=3600.0))
    for r in (a, b, c):
        s.add(r)
    s.joined(0.01)  # a join took 10 ms: the next one waits for 100 ms of decoding
    s.stepped(0.05)
    b.aborted = True
    assert s.plan(2, 2, 0) == Plan([], [b])
    s.stepped(0.05)
    assert s.plan(2, 2, 0).admit == [a, c]
    for overhead, wait, running in ((0.1, 3600.0, 0), (0.1, 0.0, 2)):  # nothing runs; the wait cap has passed
        s = Scheduler(Limits(8, 8, 1000, 100, join_overhead=overhead, max_join_wait=wait))
        s.add(a)
        s.joined(10.0)
        assert s.plan(running, running, 0).admit == [a]


def test_requests_budget_counts_requests_not_rows():
    """At most max_batch_size requests run together, running ones included, whatever rows they take."""
    rs = [req(beams=2) for _ in range(4)]
    s = scheduler(*rs, rows=100, size=3)
    assert s.plan(0, 0, 0).admit == rs[:3]
    assert s.plan(3, 6, 0).admit == []
    assert s.plan(2, 4, 0).admit == rs[3:]  # 2 running + 1 = 3
