"""A request as the engine core sees it: token ids, parameters, which front asked, status and timings."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

from model.runner.params import DecodeParams


class Status(enum.Enum):
    """Life cycle of an engine request."""

    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class EngineRequest:
    """One text to translate for one front; `key` (front, id) names it in the decode batch."""

    src: list[int]
    params: DecodeParams
    id: int = 0  # the front's id for it
    front: bytes = b""  # the front's routing id
    stream: bool = False  # the front wants every token, not only the result
    arrival: float = field(default_factory=time.monotonic)
    admitted: float | None = None
    last_token: float | None = None
    status: Status = Status.WAITING
    aborted: bool = False
    retries: int = 0  # times decoded again to mend its glossary terms (at most MAX_RETRIES)

    @property
    def key(self) -> tuple[bytes, int]:
        """Unique among the core's requests (ids are unique per front)."""
        return self.front, self.id

    @property
    def reserved_tokens(self) -> int:
        """Worst-case cache tokens: the source once (its slot, shared by the beams) and up to max_new_tokens target
        positions per beam."""
        return len(self.src) + self.params.beam_size * self.params.max_new_tokens
