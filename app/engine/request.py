"""A request as the engine sees it: token ids, parameters, status, timings and where its events go."""

from __future__ import annotations

import enum
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from model.params import DecodeParams
from model.search import Hypothesis

_ids = itertools.count()


class Status(enum.Enum):
    """Life cycle of an engine request."""

    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(frozen=True)
class Token:
    """A new token of a one-row request."""

    token_id: int


@dataclass(frozen=True)
class Finished:
    """The request's final hypotheses (best first) and why it stopped."""

    hypotheses: list[Hypothesis]
    finish_reason: str  # eos | length | aborted
    queue_s: float
    total_s: float


@dataclass(frozen=True)
class Failed:
    """The model failed on this request."""

    message: str
    error_type: str = "generation"


Event = Token | Finished | Failed


@dataclass(eq=False)
class EngineRequest:
    """One text to translate; `emit` is called from the engine thread for every event."""

    src: list[int]
    params: DecodeParams
    emit: Callable[[Event], None]
    id: int = field(default_factory=lambda: next(_ids))
    arrival: float = field(default_factory=time.perf_counter)
    admitted: float | None = None
    last_token: float | None = None
    status: Status = Status.WAITING
    aborted: bool = False

    @property
    def reserved_tokens(self) -> int:
        """Worst-case cache tokens: every beam holds the source and up to max_new_tokens."""
        return self.params.beam_size * (len(self.src) + self.params.max_new_tokens)
