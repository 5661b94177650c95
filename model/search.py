"""Per-request search state: one row for greedy/sampling, a group of beams for beam search."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import torch

from model.choice import Choice
from model.params import DecodeParams

DEAD = -1.0e9


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
    """A request's live rows in the decode batch and what it has produced so far."""

    request: Request
    eos_id: int
    start_id: int
    generator: torch.Generator | None = None
    beams: list[list[int]] = field(default_factory=lambda: [[]])  # generated ids per live row
    scores: list[float] = field(default_factory=lambda: [0.0])  # cumulative log-prob per live row
    ranks: list[int] = field(default_factory=lambda: [0])  # each row's rank by score (rows keep their parent's row)
    finished: list[Hypothesis] = field(default_factory=list)
    steps: int = 0
    can_improve: bool = True
    emitted: int = 0  # beam search: length of the best output's prefix already handed out as stable

    @property
    def params(self) -> DecodeParams:
        """The request's decoding parameters."""
        return self.request.params

    @property
    def width(self) -> int:
        """Live rows."""
        return len(self.beams)

    def histories(self) -> list[list[int]]:
        """Decoder inputs per row (start token included), as penalties see them."""
        return [[self.start_id, *b] for b in self.beams]

    def advance(self, choice: Choice, first_row: int) -> list[int]:
        """Take this step's choice for the group's rows; return the parent rows (global) of the rows that go on."""
        if self.request.params.beam_size == 1:
            picked = None if choice.logprobs is None else choice.logprobs[first_row]
            return self._advance_single(choice.tokens[first_row], picked, first_row)
        return self._advance_beams(choice.candidates[first_row], first_row)

    def _advance_single(self, token: int, logprob: float | None, row: int) -> list[int]:
        """The greedy or sampled next token of a one-row request."""
        if self.params.return_scores:
            self.scores[0] += logprob
        self.steps += 1
        if token == self.eos_id or self.steps >= self.params.max_new_tokens:
            self.finished = [self._hypothesis(self.beams[0], token, self.scores[0], self.steps)]
            self.beams = []
            return []
        self.beams[0] = self.beams[0] + [token]
        return [row]

    def _hypothesis(self, prefix: list[int], token: int, score: float, length: int) -> Hypothesis:
        """A finished output ending in `token` (EOS is not kept), scored as transformers scores it:
        score / length ** length_penalty."""
        at_limit = self.params.forced_eos and length >= self.params.max_new_tokens  # EOS forced by the limit
        reason = "eos" if token == self.eos_id and not at_limit else "length"
        tokens = prefix if token == self.eos_id else prefix + [token]
        normalised = score / (length**self.params.length_penalty) if self.params.scored else None
        return Hypothesis(tokens, normalised, reason)

    def _advance_beams(self, pool: list[tuple[float, int, int]], first_row: int) -> list[int]:
        """One beam-search step with transformers' semantics (2·B candidates, top-B finish, heuristic stop) over the
        group's best candidates (cumulative score, parent, token), best first."""
        p, length = self.params, self.steps + 1
        chosen = []  # (score, parent, token) of the beams that go on, best first
        for rank, (score, parent, token) in enumerate(pool):
            if token == self.eos_id or length >= p.max_new_tokens:
                if rank < p.beam_size and self.can_improve and score > DEAD / 2:
                    self.finished.append(self._hypothesis(self.beams[parent], token, score, length))
            elif len(chosen) < p.beam_size:
                chosen.append((score, parent, token))
        self.finished = sorted(self.finished, key=lambda h: -h.score)[: p.beam_size]
        slots = _slots([parent for _, parent, _ in chosen])
        order = sorted(range(len(chosen)), key=slots.__getitem__)  # beams in row order
        self.steps = length
        self.beams = [self.beams[chosen[i][1]] + [chosen[i][2]] for i in order]
        self.scores = [chosen[i][0] for i in order]
        self.ranks = [0] * len(chosen)
        for rank, slot in enumerate(slots):
            self.ranks[slot] = rank
        if len(self.finished) == p.beam_size and chosen:
            best_possible = chosen[0][0] / (self.steps**p.length_penalty)
            self.can_improve = not p.early_stopping and best_possible > self.finished[-1].score
        if not chosen or not self.can_improve:
            self.beams, self.scores, self.ranks = [], [], []
            return []
        return [first_row + chosen[i][1] for i in order]

    def stable_tokens(self) -> list[int]:
        """Beam search: the tokens, new since the last call, that every live beam and every finished hypothesis that
        can still come first share, so that the best output surely starts with them (none once the group is done).
        Only the best finished hypotheses (ties included) can still come first: a finished score never changes and
        the kept list only drops its worst, whatever the length penalty or early stopping. Every live beam counts,
        as its continuations may still finish first."""
        if not self.beams:
            return []
        best = max((h.score for h in self.finished), default=None)
        contenders = [h.tokens for h in self.finished if h.score == best]
        shared = _shared_prefix([*self.beams, *contenders], self.emitted)
        new, self.emitted = self.beams[0][self.emitted : shared], shared
        return new

    def result(self) -> list[Hypothesis]:
        """The n best finished hypotheses, best first."""
        if self.params.beam_size == 1:  # one hypothesis, perhaps unscored
            return self.finished
        return sorted(self.finished, key=lambda h: -h.score)[: self.params.num_hypotheses]


def _shared_prefix(seqs: Sequence[Sequence[int]], start: int = 0) -> int:
    """Length of the prefix every sequence shares, given that they share their first `start` items."""
    n, shortest = start, min(len(s) for s in seqs)
    while n < shortest and all(s[n] == seqs[0][n] for s in seqs):
        n += 1
    return n


def _slots(parents: list[int]) -> list[int]:
    """Row (within the group) for each new beam, best first: its parent's row when that is free and still in the
    group, so its cache needs no copy; the others take the free rows in order."""
    n, slots, taken = len(parents), [-1] * len(parents), set()
    for i, parent in enumerate(parents):
        if parent < n and parent not in taken:
            slots[i] = parent
            taken.add(parent)
    free = iter(r for r in range(n) if r not in taken)
    return [slot if slot >= 0 else next(free) for slot in slots]
