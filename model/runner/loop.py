"""The decode loop: one running batch and, with overlap, the one decode step in flight. The engine core, offline
`generate` and the benchmarks all decode through it; requests join and leave between its steps."""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from torch import nn

from model.runner import Runner
from model.runner.batch import DecodeBatch, Pending
from model.runner.eager import Eager
from model.search import Request, StepOutput


class DecodeLoop:
    """Owns the running batch and the step in flight (depth 1 with `overlap`: step t+1 is launched before step t is
    read back; 0 without). Every change to the batch goes through it, between steps; a method that raises leaves
    the batch as it was or, where it cannot tell, to `clear`."""

    def __init__(self, runner: Runner | nn.Module, overlap: bool = False):
        self.runner = Eager(runner) if isinstance(runner, nn.Module) else runner  # a bare network runs eagerly
        self.overlap = overlap
        self.batch: DecodeBatch | None = None
        self.pending: Pending | None = None  # the step in flight, read back at the next step

    def __len__(self) -> int:
        return len(self.batch) if self.batch is not None else 0

    @property
    def rows(self) -> int:
        """Rows the next step runs (a beam request has one per live beam)."""
        return self.batch.rows if self else 0

    @property
    def ids(self) -> list[Hashable]:
        """Running request ids, in row order."""
        return self.batch.ids if self.batch is not None else []

    def cache_tokens(self) -> int:
        """Tokens the batch's cache holds, from python counts (no device sync)."""
        return self.batch.cache_tokens() if self else 0

    def prefill(self, requests: list[Request]) -> DecodeBatch:
        """Encode new requests (their cross-attention K/V projected once) into a batch that has not joined yet."""
        return DecodeBatch.prefill(self.runner, requests)

    def join(self, new: DecodeBatch) -> None:
        """New rows join before the next step. When that fails, the batch is restored without them (the cache may
        have grown half-way) and the error raised; when restoring fails too, the batch is cleared and that raised."""
        old = self.batch
        if not self:
            self.batch = new
            return
        try:
            self.batch = old.concat(new)
        except Exception:
            try:
                self.batch = old.filter(old.ids)  # its cache may hold part of the new rows
            except Exception:
                self.clear()
                raise
            raise

    def keep(self, ids: Iterable[Hashable]) -> None:
        """Only the requests in `ids` stay (the others leave before the next step)."""
        if self.batch is not None:
            self.batch = self.batch.filter(ids)

    def step(self) -> list[StepOutput]:
        """One decode step for every row and what each request got from it (with overlap: the step launched now
        runs while the previous one is read back, and its outputs are that one's)."""
        if self.overlap:
            self.batch, outputs, self.pending = self.batch.step_ahead(self.runner, self.pending)
        else:
            self.batch, outputs = self.batch.step(self.runner)
        if not self:
            self.pending = None  # every request finished: a step launched for their rows is never read
        return outputs

    def clear(self) -> None:
        """No batch any more; a step still in flight ran only rows that left, and nothing of it is read."""
        self.batch, self.pending = None, None
