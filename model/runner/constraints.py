"""Lexically constrained beam search: every hypothesis's progress through its request's constraints (token sequences
the output must contain, a glossary's targets), as columns of the decode state, and the candidates and their order
for dynamic beam allocation (Post & Vilar 2018; vectorized as Hu et al. 2019 and fairseq's `--constraints`).

Per row: the constraints (N, J, L) (padded with -1; a row of a request without constraints has none), each one's
length (N, J), the tokens of it matched by the row's latest tokens (N, J) and whether it was met (N, J). A beam step
adds to each group's best candidates every row's next token of each constraint it has not met and its own best token,
and ranks the candidates by bank (constraint tokens met, partial matches included) round-robin: the best of every
bank, from the fullest, then the second best of every bank, and so on. EOS waits until every constraint is met."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from model.runner.rows import Beams
from model.runner.transfer import upload

NEG_INF = float("-inf")


@dataclass
class Constraints:
    """The constraint columns of a batch's rows (see the module's docstring)."""

    tokens: Tensor  # (N, J, L) long, -1 past each constraint's end
    length: Tensor  # (N, J) long, 0 for no constraint
    matched: Tensor  # (N, J) long
    met: Tensor  # (N, J) bool

    @classmethod
    def start(cls, per_row: list[tuple[tuple[int, ...], ...]], device: torch.device) -> Constraints:
        """Rows that have generated nothing yet, each with its request's constraints (one upload)."""
        j = max((len(c) for c in per_row), default=0)
        width = max((len(t) for c in per_row for t in c), default=0)
        grid = [[list(t) + [-1] * (width - len(t)) for t in c] + [[-1] * width] * (j - len(c)) for c in per_row]
        tokens = upload(grid, torch.long, device).view(len(per_row), j, width)
        length = (tokens >= 0).sum(2)
        return cls(tokens, length, torch.zeros_like(length), length == 0)

    def concat(self, other: Constraints) -> Constraints:
        """These rows followed by `other`'s."""
        j, width = max(self.length.shape[1], other.length.shape[1]), max(self.tokens.shape[2], other.tokens.shape[2])
        a, b = self.fit(j, width), other.fit(j, width)
        return Constraints(*(torch.cat([x, y]) for x, y in zip(a.fields(), b.fields(), strict=True)))

    def fit(self, j: int, width: int) -> Constraints:
        """Padded to `j` constraints of `width` tokens (itself when it has as many)."""
        dj, dw = j - self.length.shape[1], width - self.tokens.shape[2]
        if not dj and not dw:
            return self
        tokens = F.pad(self.tokens, (0, dw, 0, dj), value=-1)
        return Constraints(tokens, F.pad(self.length, (0, dj)), F.pad(self.matched, (0, dj)),
                           F.pad(self.met, (0, dj), value=True))  # fmt: skip

    def fields(self) -> tuple[Tensor, ...]:
        """Every tensor, in field order."""
        return self.tokens, self.length, self.matched, self.met

    def take(self, rows: Tensor) -> Constraints:
        """Rows `rows` (old indices, in their new order)."""
        return Constraints(*(x.index_select(0, rows) for x in self.fields()))

    def after(self, rows: Tensor, tokens: Tensor) -> tuple[Tensor, Tensor]:
        """The progress of rows `rows` (any shape S) after taking `tokens` (S): matched and met, each (*S, J)."""
        cons, length = self.tokens[rows], self.length[rows]  # (*S, J, L), (*S, J)
        matched, met = self.matched[rows], self.met[rows]
        t = tokens[..., None]
        next_token = cons.gather(-1, matched.clamp(max=cons.shape[-1] - 1)[..., None])[..., 0]  # (*S, J)
        matched = torch.where(t == next_token, matched + 1, (t == cons[..., 0]).long())
        met = met | (matched >= length)
        return matched.masked_fill(met, 0), met

    def advance(self, parents: Tensor, tokens: Tensor) -> Constraints:
        """The rows after a step: row i continues row parents[i] with token tokens[i]."""
        matched, met = self.after(parents, tokens)
        return Constraints(self.tokens.index_select(0, parents), self.length.index_select(0, parents), matched, met)

    def unmet(self) -> Tensor:
        """(N,) bool: rows with a constraint not met yet (they may not end with EOS)."""
        return ~self.met.all(1)

    def bank(self, matched: Tensor, met: Tensor, rows: Tensor) -> Tensor:
        """Constraint tokens met by a progress (matched, met (*S, J)) of rows `rows` (*S): whole constraints met
        count their length, and the furthest one under way its tokens matched so far (constraints that start alike
        are under way together: counting each would reward repeating their common start)."""
        under_way = F.pad(matched.masked_fill(met, 0), (0, 1)).amax(-1)  # (*S,) 0 without constraints
        return torch.where(met, self.length[rows], 0).sum(-1) + under_way


def extra_candidates(scores: Tensor, rows: Tensor, cons: Constraints) -> tuple[Tensor, Tensor]:
    """For each row of `rows` (R,): its next token of every constraint it has not met, and its own best token, as
    (R, J + 1) tokens and their scores from `scores` (N, V) (-inf where there is none)."""
    c = cons.tokens.index_select(0, rows)  # (R, J, L)
    matched, met = cons.matched.index_select(0, rows), cons.met.index_select(0, rows)
    nxt = c.gather(2, matched.clamp(max=c.shape[2] - 1)[:, :, None])[:, :, 0]
    nxt = nxt.masked_fill(met, -1)  # (R, J)
    row_scores = scores.index_select(0, rows)  # (R, V)
    best = row_scores.argmax(1, keepdim=True)  # (R, 1)
    tokens = torch.cat([nxt, best], 1)  # (R, J + 1)
    got = row_scores.gather(1, tokens.clamp(min=0))
    return tokens.clamp(min=0), got.masked_fill(tokens < 0, NEG_INF)


def allocate(score: Tensor, bank: Tensor) -> Tensor:
    """The order in which a group's candidates (G, K) take its places: round-robin over banks, fullest first, each
    bank's best first; candidates that score -inf last. Returns (G, K) positions into the candidates."""
    k = score.shape[1]
    by_score = score.argsort(dim=1, descending=True, stable=True)  # (G, K)
    b = bank.gather(1, by_score)
    same = b[:, :, None] == b[:, None, :]  # (G, K, K): candidates of the same bank
    before = torch.ones(k, k, dtype=torch.bool, device=score.device).tril(-1)  # j before i in score order
    rank = (same & before[None]).sum(2)  # (G, K) the candidate's place within its bank
    top = bank.amax(1, keepdim=True) + 1
    key = (rank * top + (top - 1 - b)).double()
    key = key.masked_fill(score.gather(1, by_score) == NEG_INF, float("inf"))
    return by_score.gather(1, key.argsort(dim=1, stable=True))


def candidates(
    top: tuple[Tensor, Tensor, Tensor], scores: Tensor, cum: Tensor, cons: Constraints, beams: Beams
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Each beam group's candidates in the order they take its places: its best ones `top` (cumulative score, parent
    place, token, each (G, M)) and every row's constraint tokens and own best token (duplicates dropped), allocated
    over banks, with the count of constraints each leaves unmet. Scores (N, V) and cumulative scores (N,) of every
    row."""
    rows = beams.rows if beams.rows is not None else torch.arange(scores.shape[0], device=scores.device)
    tokens, got = extra_candidates(scores, rows, cons)  # (Nb, J + 1)
    g, w, e = beams.groups, beams.width, tokens.shape[1]
    grid = got.new_full((g * w, e), NEG_INF).index_copy_(0, beams.slots, got + cum.index_select(0, rows)[:, None])
    tok = tokens.new_zeros(g * w, e).index_copy_(0, beams.slots, tokens)
    place = torch.arange(w, device=tokens.device).repeat(g)[:, None].expand(-1, e)  # (G*W, J+1)
    score = torch.cat([top[0], grid.view(g, -1)], 1)  # (G, K)
    parent = torch.cat([top[1], place.reshape(g, -1)], 1)
    token = torch.cat([top[2], tok.view(g, -1)], 1)
    key = parent * scores.shape[1] + token  # a candidate is (parent, token): keep one of each
    order = key.argsort(dim=1, stable=True)
    sorted_key = key.gather(1, order)
    dup = torch.zeros_like(sorted_key, dtype=torch.bool)
    dup[:, 1:] = sorted_key[:, 1:] == sorted_key[:, :-1]
    score = score.scatter(1, order, score.gather(1, order).masked_fill(dup, NEG_INF))
    at = (beams.knobs.first[:, None] + parent).clamp(max=scores.shape[0] - 1)  # (G, K) rows (padding: any, -inf)
    matched, met = cons.after(at, token)
    pick = allocate(score, cons.bank(matched, met, at))
    unmet = (~met).sum(-1)  # (G, K) constraints a candidate leaves unmet
    return score.gather(1, pick), parent.gather(1, pick), token.gather(1, pick), unmet.gather(1, pick)
