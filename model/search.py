"""What decoding takes and gives: a request, its finished hypotheses, and what one step gave it."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from model.params import DecodeParams


@dataclass(frozen=True)
class Request:
    """What the model needs for one translation: source token ids and parameters."""

    id: Hashable
    src: list[int]
    params: DecodeParams = DecodeParams()


@dataclass(frozen=True)
class Hypothesis:
    """One finished output: generated ids (EOS excluded) and its length-normalised log-probability (None when a
    greedy or sampled request did not ask for scores)."""

    tokens: list[int]
    score: float | None
    finish_reason: str  # "eos" | "length"


@dataclass
class StepOutput:
    """What one decode step produced for one request."""

    id: Hashable
    token: int | None = None  # the new token (greedy/sampling only, EOS included)
    hypotheses: list[Hypothesis] | None = None  # set once the request is finished
    stable: list[int] = field(default_factory=list)  # beam search: tokens the best output now surely continues with

    @property
    def finished(self) -> bool:
        """True when this is the request's last step."""
        return self.hypotheses is not None

    def streamed(self, eos_id: int) -> list[int]:
        """The tokens this step adds to the request's output: a one-row request's new token (EOS is no text), or the
        beams' newly stable ones (the result carries the rest of a finished request's output)."""
        if self.token is None:
            return self.stable
        return [] if self.token == eos_id else [self.token]
