"""Admission planning: which waiting requests join the running batch before the next step. No HTTP, no torch."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from app.engine.request import EngineRequest


@dataclass(frozen=True)
class Limits:
    """Bounds the scheduler plans within."""

    max_batch_size: int  # rows
    max_batch_tokens: int  # reserved cache tokens
    max_prefill_tokens: int  # source tokens encoded per step


@dataclass(frozen=True)
class Plan:
    """What to do before the next decode step."""

    admit: list[EngineRequest] = field(default_factory=list)
    drop: list[EngineRequest] = field(default_factory=list)  # aborted while waiting


class Scheduler:
    """FIFO admission under row, cache-token and per-step prefill budgets."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.waiting: deque[EngineRequest] = deque()

    def add(self, request: EngineRequest) -> None:
        """Queue a request."""
        self.waiting.append(request)

    def plan(self, running_rows: int, reserved_tokens: int) -> Plan:
        """Admit in arrival order while budgets allow; never skip ahead of a request that does not fit."""
        lim = self.limits
        drop = [r for r in self.waiting if r.aborted]
        self.waiting = deque(r for r in self.waiting if not r.aborted)
        admit, prefill = [], 0
        while self.waiting:
            req = self.waiting[0]
            rows = running_rows + req.params.beam_size
            tokens = reserved_tokens + req.reserved_tokens
            first = running_rows == 0 and not admit  # a lone request always runs, whatever its size
            if not first and (rows > lim.max_batch_size or tokens > lim.max_batch_tokens):
                break
            if admit and prefill + len(req.src) > lim.max_prefill_tokens:
                break
            admit.append(self.waiting.popleft())
            running_rows, reserved_tokens, prefill = rows, tokens, prefill + len(req.src)
        return Plan(admit, drop)
