"""Per-request search state: one row for greedy/sampling, a group of beams for beam search."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

import torch

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


@dataclass
class Group:
    """A request's rows in the decode batch and what it has produced so far: a one-row request's tokens and score
    on the host; a beam group's state lives on the device (model.runner.beams), only its width and step count here."""

    request: Request
    eos_id: int
    start_id: int
    generator: torch.Generator | None = None
    width: int = 1  # live rows (0 once finished)
    tokens: list[int] = field(default_factory=list)  # one-row requests: generated ids
    score: float = 0.0  # one-row requests: cumulative log-prob
    finished: list[Hypothesis] = field(default_factory=list)
    steps: int = 0

    @property
    def params(self) -> DecodeParams:
        """The request's decoding parameters."""
        return self.request.params

    @property
    def beam(self) -> bool:
        """Whether this is a beam-search request."""
        return self.params.beam_size > 1

    def advance(self, token: int, logprob: float | None) -> bool:
        """The greedy or sampled next token of a one-row request; whether it goes on."""
        if self.params.return_scores:
            self.score += logprob
        self.steps += 1
        if token == self.eos_id or self.steps >= self.params.max_new_tokens:
            self.finished = [self._hypothesis(token)]
            self.width = 0
            return False
        self.tokens.append(token)
        return True

    def _hypothesis(self, token: int) -> Hypothesis:
        """The finished output ending in `token` (EOS is not kept), scored as transformers scores it:
        score / length ** length_penalty."""
        p, length = self.params, self.steps
        at_limit = p.forced_eos and length >= p.max_new_tokens  # EOS forced by the limit
        reason = "eos" if token == self.eos_id and not at_limit else "length"
        tokens = self.tokens if token == self.eos_id else [*self.tokens, token]
        normalised = self.score / (length**p.length_penalty) if p.scored else None
        return Hypothesis(tokens, normalised, reason)
