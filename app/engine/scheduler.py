"""Admission planning: which waiting requests join the running batch before the next step, and when. No HTTP, no
torch."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from app.engine.request import EngineRequest


@dataclass(frozen=True)
class Limits:
    """Bounds the scheduler plans within."""

    max_batch_size: int  # requests
    max_batch_rows: int  # rows: a beam request takes beam_size
    max_batch_tokens: int  # reserved cache tokens
    max_prefill_tokens: int  # source tokens encoded per step
    join_overhead: float = 1.0  # joins wait until decoding since the last one took >= its time / this share
    max_join_wait: float = 0.0  # seconds: ... or until this long has passed since the last join


@dataclass(frozen=True)
class Plan:
    """What to do before the next decode step."""

    admit: list[EngineRequest] = field(default_factory=list)
    drop: list[EngineRequest] = field(default_factory=list)  # aborted while waiting


class Scheduler:
    """FIFO admission under request, row, cache-token and per-step prefill budgets. While rows run, joins are paced: a
    join (encode, then concat) costs about as much as a decode step on a GPU, so joining one request per step would
    halve the throughput; waiting requests join together once the decoding done since the last join outweighs its cost
    (by 1 / join_overhead), or once max_join_wait has passed."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.waiting: deque[EngineRequest] = deque()
        self.decoded = 0.0  # decode seconds since the last join
        self.join_cost = 0.0  # seconds the last join took
        self.last_join = float("-inf")  # time.monotonic() of the last join

    def stepped(self, seconds: float) -> None:
        """A decode step took `seconds`."""
        self.decoded += seconds

    def joined(self, seconds: float) -> None:
        """Admitted requests were encoded and joined in `seconds`."""
        self.decoded, self.join_cost, self.last_join = 0.0, seconds, time.monotonic()

    def join_due(self, running_rows: int) -> bool:
        """Whether waiting requests may join now (always when nothing runs)."""
        lim = self.limits
        return (
            running_rows == 0
            or self.decoded * lim.join_overhead >= self.join_cost
            or time.monotonic() - self.last_join >= lim.max_join_wait
        )

    def add(self, request: EngineRequest) -> None:
        """Queue a request."""
        self.waiting.append(request)

    def plan(self, running: int, running_rows: int, reserved_tokens: int) -> Plan:
        """Admit in arrival order while budgets allow; never skip ahead of a request that does not fit."""
        if not self.waiting:
            return Plan()
        lim = self.limits
        drop = [r for r in self.waiting if r.aborted]
        self.waiting = deque(r for r in self.waiting if not r.aborted)
        if not self.join_due(running_rows):
            return Plan([], drop)
        admit, prefill = [], 0
        while self.waiting:
            req = self.waiting[0]
            rows = running_rows + req.params.beam_size
            tokens = reserved_tokens + req.reserved_tokens
            first = running_rows == 0 and not admit  # a lone request always runs, whatever its size
            over = running + len(admit) >= lim.max_batch_size or rows > lim.max_batch_rows
            if not first and (over or tokens > lim.max_batch_tokens):
                break
            if admit and prefill + len(req.src) > lim.max_prefill_tokens:
                break
            admit.append(self.waiting.popleft())
            running_rows, reserved_tokens, prefill = rows, tokens, prefill + len(req.src)
        return Plan(admit, drop)
