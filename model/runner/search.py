"""What decoding takes and gives: a request, its host record while it runs, its finished hypotheses, and what one step
gave it."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from enum import Enum

from model.runner.params import DecodeParams


@dataclass(frozen=True)
class Request:
    """What the model needs for one translation: source token ids and parameters."""

    id: Hashable
    src: list[int]
    params: DecodeParams = DecodeParams()


@dataclass
class Signals:
    """A one-row output's confidence signals over its tokens (EOS included): their count, the sum and least of their
    log-probabilities, the sum and most of their distributions' entropies."""

    count: int = 0
    logprob: float = 0.0
    least: float = 0.0
    entropy: float = 0.0
    most: float = 0.0

    def add(self, logprob: float, entropy: float) -> None:
        """Count one more token's signals."""
        if logprob < self.least or not self.count:
            self.least = logprob
        if entropy > self.most:
            self.most = entropy
        self.count += 1
        self.logprob += logprob
        self.entropy += entropy


@dataclass(frozen=True)
class Hypothesis:
    """One finished output: generated ids (EOS excluded), its length-normalised log-probability (None when a
    greedy or sampled request did not ask for scores), its confidence signals (a one-row request that asked) and each
    token's log-probability as the beam scored it, EOS's included where it ended with one (beam outputs)."""

    tokens: list[int]
    score: float | None
    finish_reason: str  # "eos" | "length"
    signals: Signals | None = None
    logprobs: list[float] | None = None


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


class RowStatus(Enum):
    """Where a running request's rows stand: running, finished (its result is out), or left (aborted). A step still in
    flight for a request that is not running is not booked."""

    RUNNING = "running"
    FINISHED = "finished"
    LEFT = "left"


@dataclass
class Seq:
    """A running request on the host: its rows [first, first + width) (0 once finished), its source length, steps
    launched, and a one-row request's booked tokens and score."""

    request: Request
    first: int
    width: int
    src_len: int
    steps: int = 0
    tokens: list[int] = field(default_factory=list)
    score: float = 0.0
    status: RowStatus = RowStatus.RUNNING
    signals: Signals = field(default_factory=Signals)

    @property
    def id(self) -> Hashable:
        """The request's id."""
        return self.request.id

    @property
    def params(self) -> DecodeParams:
        """The request's decoding parameters."""
        return self.request.params

    @property
    def beam(self) -> bool:
        """Whether this is a beam-search request."""
        return self.params.beam_size > 1

    def book(self, token: int, logprob: float | None, signals: tuple | None, step: int, eos_id: int
             ) -> Hypothesis | None:  # fmt: skip
        """A one-row request books the token of its step `step` (0-based) with its log-probability and its confidence
        signals (log-probability and entropy; None unless asked for); its result when that was its last."""
        p = self.params
        if p.return_scores:
            self.score += logprob
        if signals is not None:
            self.signals.add(*signals)
        if token != eos_id and step + 1 < p.max_new_tokens:
            self.tokens.append(token)
            return None
        at_limit = p.forced_eos and step + 1 >= p.max_new_tokens  # EOS forced by the limit
        reason = "eos" if token == eos_id and not at_limit else "length"
        tokens = self.tokens if token == eos_id else [*self.tokens, token]
        score = self.score / ((step + 1) ** p.length_penalty) if p.scored else None
        return Hypothesis(tokens, score, reason, self.signals if p.confidence else None)
