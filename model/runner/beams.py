"""Beam search on the device: transformers' step (2·B candidates, only the top B may finish, length penalty,
early stopping, the "cannot improve" stop) over every beam group of a batch at once, each group's finished
hypotheses in a fixed-size buffer, every row's token history, and the prefix a streamed request may hand out."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from model.runner.search import Hypothesis
from model.runner.transfer import fetch, upload

GROW = 32  # positions added to the histories when they are full
DEAD = -1.0e9  # candidates scored below DEAD / 2 never finish (a banned or masked token)
WINDOW = 8  # stable tokens a group hands out per step at most: the rest follow at the next steps or with the result
NEG_INF = float("-inf")
ROW_FIELDS = 4  # BeamState's per-row fields come first: history, logp, cum, rank
UNMET = 1.0e6  # a finished hypothesis ranks this much lower per constraint it left unmet (its score as reported is not)


@dataclass
class Knobs:
    """Per beam group (G,), uploaded with the step: beam size, new-token limit, steps taken, first row in the batch,
    candidates it ranks, length penalty, early stopping and forced EOS."""

    beam: Tensor
    limit: Tensor
    steps: Tensor
    first: Tensor
    ranked: Tensor
    penalty: Tensor  # float64
    early: Tensor  # bool
    forced: Tensor  # bool


@dataclass
class Moves:
    """A beam step's outcome per group, on the device: done (G,), new rows n (G,), and per new row in row order
    (G, B) its parent row within the group, token, cumulative score (DEAD past n), rank; tokens that became stable
    (G,) and the window of the best beam they start (G, WINDOW); per new row, the candidate it is (G, B) (its place
    among them)."""

    done: Tensor
    n: Tensor
    parent: Tensor
    token: Tensor
    cum: Tensor
    rank: Tensor
    stable: Tensor
    window: Tensor
    chosen: Tensor

    def packed(self) -> list[Tensor]:
        """What the host reads, flat, for the step's one copy."""
        return [self.done, self.n, self.parent, self.token, self.stable, self.window]


@dataclass
class HostMoves:
    """A beam step's outcome on the host (`Moves` after the step's one copy), per beam group."""

    done: list[bool]
    n: list[int]
    parent: list[list[int]]
    token: list[list[int]]
    stable_count: list[int]
    window: list[list[int]]

    @classmethod
    def read(cls, flat: Tensor, groups: int, beam: int) -> HostMoves:
        """From the copied `Moves.packed()` of `groups` groups of `beam` places."""
        sizes = [groups, groups, groups * beam, groups * beam, groups, groups * WINDOW]
        done, n, parent, token, stable, window = flat.long().split(sizes)
        rows = lambda x: x.view(groups, -1).tolist()  # noqa: E731
        flags = [bool(d) for d in done.tolist()]
        return cls(flags, n.tolist(), rows(parent), rows(token), stable.tolist(), rows(window))

    def stable(self, b: int) -> list[int]:
        """The tokens beam group b hands out as stable."""
        return self.window[b][: self.stable_count[b]]


@dataclass
class BeamState:
    """The device state of a batch: every row's generated tokens (N, T), each one's log-probability as the beam
    scored it (N, T) (beam rows), cumulative score (N,) and rank within its group (N,); every beam group's finished
    hypotheses, best first: scores (G, B) float64 (-inf: none), lengths, EOS flags (G, B), tokens and their
    log-probabilities (G, B, T), EOS's included; the stable tokens each group handed out (G,); and whether it is still
    searching (G,): a done group's buffers no longer change (the overlap scheduler runs it one step more)."""

    history: Tensor
    logp: Tensor
    cum: Tensor
    rank: Tensor
    score: Tensor
    length: Tensor
    eos: Tensor
    tokens: Tensor
    logps: Tensor
    emitted: Tensor
    alive: Tensor

    @classmethod
    def start(cls, widths: list[int], positions: int, device: torch.device) -> BeamState:
        """Requests of `widths` rows (a beam group's first row scores 0, its others DEAD: transformers' start, so that
        only the first row's candidates count at the first step) that generated nothing yet."""
        beams = [w for w in widths if w > 1]
        g, b = len(beams), max(beams, default=1)
        cum = upload([DEAD * (j > 0) for w in widths for j in range(w)], torch.float32, device)
        rank = upload([j for w in widths for j in range(w)], torch.long, device)
        zeros = lambda *shape, dtype=torch.long: torch.zeros(shape, dtype=dtype, device=device)  # noqa: E731
        score = torch.full((g, b), NEG_INF, dtype=torch.float64, device=device)
        history, tokens = zeros(len(cum), positions), zeros(g, b, positions)
        logp, logps = zeros(len(cum), positions, dtype=torch.float32), zeros(g, b, positions, dtype=torch.float32)
        alive = torch.ones(g, dtype=torch.bool, device=device)
        flags = zeros(g, b, dtype=torch.bool)
        return cls(history, logp, cum, rank, score, zeros(g, b), flags, tokens, logps, zeros(g), alive)

    @property
    def positions(self) -> int:
        """Tokens each row can hold."""
        return self.history.shape[1]

    def fit(self, beam: int, positions: int) -> BeamState:
        """This state padded to hold `beam` hypotheses per group and `positions` tokens per row (itself if it does)."""
        b, t = max(beam, self.score.shape[1]) - self.score.shape[1], max(positions, self.positions) - self.positions
        if not b and not t:
            return self
        pad = lambda x, last, value=0: F.pad(x, (0, last), value=value)  # noqa: E731
        return BeamState(
            pad(self.history, t), pad(self.logp, t), self.cum, self.rank, pad(self.score, b, NEG_INF),
            pad(self.length, b), pad(self.eos, b), F.pad(self.tokens, (0, t, 0, b)), F.pad(self.logps, (0, t, 0, b)),
            self.emitted, self.alive,
        )  # fmt: skip

    def concat(self, other: BeamState) -> BeamState:
        """This state's rows and groups followed by `other`'s."""
        beam, positions = max(self.score.shape[1], other.score.shape[1]), max(self.positions, other.positions)
        a, b = self.fit(beam, positions), other.fit(beam, positions)
        return BeamState(*(torch.cat([x, y]) for x, y in zip(a.fields(), b.fields(), strict=True)))

    def fields(self) -> tuple[Tensor, ...]:
        """Every tensor, in field order."""
        rows = (self.history, self.logp, self.cum, self.rank)
        return (*rows, self.score, self.length, self.eos, self.tokens, self.logps, self.emitted, self.alive)

    def select(self, rows: Tensor | None, groups: Tensor) -> BeamState:
        """Rows `rows` (all when None) and groups `groups` (old indices, in their new order)."""
        pick = lambda x, at: x if at is None else x.index_select(0, at)  # noqa: E731
        row_part = (pick(x, rows) for x in self.fields()[:ROW_FIELDS])
        group_part = (pick(x, groups) for x in self.fields()[ROW_FIELDS:])
        return BeamState(*row_part, *group_part)

    def extend(
        self, parents: Tensor, moves: Moves | None, source: Tensor, tokens: Tensor, at: Tensor,
        forced_logp: Tensor | None = None,
    ) -> BeamState:  # fmt: skip
        """The rows after a step: row i continues row parents[i] with token tokens[i] at position at[i]; a beam row's
        score and rank come from `moves` at flat index source[i] (G*B; -1 for the other rows: 0), its token's
        log-probability from the score's increase or, where its parent was forced the token, `forced_logp` (N,)."""
        history, logp = self.history.index_select(0, parents), self.logp.index_select(0, parents)
        column = at[:, None]  # (N, 1)
        history.scatter_(1, column, tokens[:, None])
        if moves is None:
            cum, rank = self.cum.new_zeros(len(parents)), parents.new_zeros(len(parents))
        else:
            cum = F.pad(moves.cum.flatten(), (0, 1))[source]
            rank = F.pad(moves.rank.flatten(), (0, 1))[source]
            logp.scatter_(1, column, _token_logp(cum, self.cum, parents, forced_logp)[:, None])
        return BeamState(history, logp, cum, rank, *self.fields()[ROW_FIELDS:])

    def hypotheses(self, groups: list[int], counts: list[int]) -> list[list[Hypothesis]]:
        """The best counts[i] finished hypotheses of each group groups[i], best first (one copy to the host)."""
        at = upload(groups, torch.long, self.score.device)
        host = fetch(torch.cat([self.score.index_select(0, at).flatten(), self._parts(at)]))
        n, b, t = len(groups), self.score.shape[1], self.positions
        scores, lengths, eos = host[: n * b].view(n, b), *host[n * b : 3 * n * b].long().view(2, n, b)
        tokens, logps = host[3 * n * b :].view(2, n, b, t)
        tokens = tokens.long()
        reason = lambda i, j: "eos" if eos[i, j] else "length"  # noqa: E731
        return [
            [
                Hypothesis(
                    tokens[i, j, : lengths[i, j]].tolist(),
                    _unranked(scores[i, j].item()),
                    reason(i, j),
                    logprobs=logps[i, j, : lengths[i, j] + eos[i, j]].tolist(),
                )
                for j in range(count)
                if scores[i, j] > NEG_INF
            ]
            for i, count in enumerate(counts)
        ]

    def _parts(self, at: Tensor) -> Tensor:
        """Lengths, EOS flags, tokens and their log-probabilities of groups `at`, flat (float64: one copy with the
        scores)."""
        parts = (self.length, self.eos.long(), self.tokens, self.logps)
        return torch.cat([p.index_select(0, at).flatten().double() for p in parts])


def _token_logp(cum: Tensor, parent_cum: Tensor, parents: Tensor, forced_logp: Tensor | None) -> Tensor:
    """The log-probability of the tokens that took rows `parents` from `parent_cum` to `cum` (any shape): the
    increase, or where the parent was forced its token (scored 0), the token's log-probability before (NaN: none)."""
    rise = cum - parent_cum.index_select(0, parents.flatten()).view_as(parents)
    if forced_logp is None:
        return rise
    before = forced_logp.index_select(0, parents.flatten()).view_as(parents)
    return torch.where(before.isnan(), rise, before)


def _unranked(score: float) -> float:
    """A finished hypothesis's score without the ranking penalty of the constraints it left unmet."""
    return score + UNMET * round(-score / UNMET) if score < -UNMET / 2 else score


def step(
    state: BeamState, candidates: tuple[Tensor, ...], k: Knobs, eos_id: int, forced_logp: Tensor | None = None,
    sparse: bool = False,
) -> tuple[BeamState, Moves]:  # fmt: skip
    """One beam-search step of every group from its best candidates (cumulative score, parent row within the group,
    token, and with constraints the count each leaves unmet and the count its parent lost), each (G, M) best first, as
    transformers' beam scorer takes it: the finished buffers updated, the moves. A hypothesis that ends with constraints
    unmet (lost, or at the length limit) ranks below every one that met them all (UNMET per constraint), and a live
    one that lost a constraint cannot keep its group searching. `forced_logp` (N,): where a row was forced its token,
    that token's log-probability before the forcing (NaN: not forced), kept with a finishing hypothesis's tokens.
    `sparse` (a CPU: it may read the device on the host): the finished buffers are merged only when a candidate
    finishes (else the merge changes nothing)."""
    score, parent, token, *rest = candidates
    unmet, lost = (rest + [None, None])[:2]  # None without constraints: none unmet, none lost
    b = state.score.shape[1]
    if score.shape[1] < b:  # fewer candidates than beams (a tiny vocabulary): pad with ones that never count
        pads = ((score, NEG_INF), (parent, 0), (token, 0), (unmet, 0), (lost, 0))
        score, parent, token, unmet, lost = (None if x is None else F.pad(x, (0, b - x.shape[1]), value=v)
                                             for x, v in pads)  # fmt: skip
    length = k.steps + 1  # (G,) the length of what this step ends or extends, EOS counted
    limited = length >= k.limit  # (G,) this step ends every hypothesis
    m = torch.arange(score.shape[1], device=score.device)
    valid = m < k.ranked[:, None]  # (G, M)
    ends = (token == eos_id) | limited[:, None]
    live = valid & ~ends
    chosen = live & (live.cumsum(1) <= k.beam[:, None])
    n = chosen.sum(1)  # (G,) beams that go on
    pos = chosen.argsort(dim=1, descending=True, stable=True)[:, :b]  # (G, B) the chosen, best first, then the rest
    c_score, c_parent = score.gather(1, pos), parent.gather(1, pos)
    place = torch.arange(b, device=n.device)
    taken = place < n[:, None]  # (G, B) the places of the beams that go on
    c_score = torch.where(taken, c_score, DEAD)  # places not taken: inert
    finishing = ends & valid & (m < k.beam[:, None]) & (score > DEAD / 2) & state.alive[:, None]
    scale = length.double().pow(k.penalty)  # (G,) score / length ** length_penalty
    if not sparse or finishing.any():
        normalised = score.double() / scale[:, None]
        if unmet is not None:
            normalised = normalised - UNMET * unmet
        normalised = torch.where(finishing, normalised, NEG_INF)
        state = _finish(state, score, normalised, parent, token, k, eos_id, forced_logp, length, limited)
    worst = state.score.gather(1, (k.beam - 1)[:, None])[:, 0]  # -inf until the buffer holds `beam` (best first)
    hopeful = taken if lost is None else taken & (lost.gather(1, pos) == 0)  # live, no term lost
    best = torch.where(hopeful, c_score, NEG_INF).amax(1)  # the best live beam that can still rank first
    hopeless = k.early | ~(best.double() / scale > worst)  # transformers' "cannot improve"
    done = (n == 0) | ((worst > NEG_INF) & hopeless) | ~state.alive
    inv = _slots(c_parent, n, taken).argsort(1)  # (G, B) new row s holds chosen candidate inv[s]
    at = pos.gather(1, inv)  # (G, B) each new row's candidate
    parent, token = c_parent.gather(1, inv), token.gather(1, at)
    state, stable, window = _stable(state, parent, token, taken, done, k, length)
    return state, Moves(done, n, parent, token, c_score.gather(1, inv), inv, stable, window, at)


def _finish(
    state: BeamState, cum: Tensor, normalised: Tensor, parent: Tensor, token: Tensor, k: Knobs, eos_id: int,
    forced_logp: Tensor | None, length: Tensor, limited: Tensor,
) -> BeamState:  # fmt: skip
    """The finished buffers with this step's finished candidates (cumulative and normalised scores (G, M), -inf where
    none; their tokens' log-probabilities as `_token_logp` takes them; each group's `length` (G,) EOS counted and
    whether it is `limited` there) merged in: each group keeps its best `beam`, ties in the order old ones first, then
    the candidates' ranks."""
    g, b = state.score.shape
    merged = torch.cat([state.score, normalised], 1)  # (G, B + M)
    order = merged.argsort(dim=1, descending=True, stable=True)[:, :b]  # (G, B)
    score = merged.gather(1, order).masked_fill(torch.arange(b, device=order.device) >= k.beam[:, None], NEG_INF)
    old, new = order.clamp(max=b - 1), (order - b).clamp(min=0)
    from_old = order < b
    c_parent, c_token = parent.gather(1, new), token.gather(1, new)  # (G, B)
    rows = k.first[:, None] + c_parent  # (G, B)
    tokens, logps = (x.index_select(0, rows.flatten()).view(g, b, -1) for x in (state.history, state.logp))
    last = k.steps[:, None, None].expand(g, b, 1)
    tokens.scatter_(2, last, c_token[:, :, None])  # EOS too: its length drops it
    logp = _token_logp(cum.gather(1, new), state.cum, rows, forced_logp)  # (G, B)
    logps.scatter_(2, last, logp[:, :, None])
    is_eos = c_token == eos_id
    length = torch.where(from_old, state.length.gather(1, old), length[:, None] - is_eos.long())
    at_limit = (k.forced & limited)[:, None]  # EOS forced by the limit: reason "length"
    eos = torch.where(from_old, state.eos.gather(1, old), is_eos & ~at_limit)
    olds = old[:, :, None].expand(-1, -1, state.positions)
    tokens = torch.where(from_old[:, :, None], state.tokens.gather(1, olds), tokens)
    logps = torch.where(from_old[:, :, None], state.logps.gather(1, olds), logps)
    return BeamState(*state.fields()[:ROW_FIELDS], score, length, eos, tokens, logps, state.emitted, state.alive)


def _slots(parent: Tensor, n: Tensor, used: Tensor) -> Tensor:
    """Row within the group for each chosen beam (G, B), best first (the first n (G,) places, `used` (G, B)): its
    parent's row when that is free and still in the group, so its cache needs no copy; the others take the free rows
    in order; unused places sort last."""
    b = parent.shape[1]
    j = torch.arange(b, device=parent.device)
    earlier = (parent[:, :, None] == parent[:, None, :]) & (j[None, :] < j[:, None])  # (G, B, B) an earlier beam
    stays = used & (parent < n[:, None]) & ~earlier.any(2)
    taken = parent.new_zeros(parent.shape[0], b + 1, dtype=torch.bool)
    taken.scatter_(1, torch.where(stays, parent, b), True)
    later = b + j  # (B,) keys that sort after every row
    free = torch.where(~taken[:, :b] & used, j, later).argsort(1)  # (G, B) free rows first, in order
    nth = ((~stays & used).cumsum(1) - 1).clamp(min=0)
    slot = torch.where(stays, parent, free.gather(1, nth))
    return torch.where(used, slot, later)


def _stable(
    state: BeamState, parent: Tensor, token: Tensor, taken: Tensor, done: Tensor, k: Knobs, length: Tensor
) -> tuple[BeamState, Tensor, Tensor]:
    """How many tokens (G,), new since the last step, every live beam (parent, token (G, B), where `taken`) and every
    finished hypothesis that can still come first (the best, ties included) share, at most WINDOW, and the window of
    the first beam they start (G, WINDOW); none once a group is done (`length` (G,): each group's after the step). A
    finished score never changes and the buffer drops only its worst, so no other finished hypothesis can come first
    again."""
    g, b = parent.shape
    at = state.emitted[:, None] + torch.arange(WINDOW + 1, device=parent.device)  # (G, W+1) past the emitted ones
    cols = at.clamp(max=state.positions - 1)[:, None, :].expand(g, b, -1)  # (G, B, W+1)
    live = state.history[(k.first[:, None] + parent)[:, :, None], cols]  # (G, B, W+1) the beams after the step
    live = torch.where((at == k.steps[:, None])[:, None, :], token[:, :, None], live)
    best = state.score[:, :1]  # (G, 1) the buffer is best first
    contender = (state.score == best) & (best > NEG_INF)  # (G, B)
    seqs = torch.cat([live, state.tokens.gather(2, cols)], 1)  # (G, 2B, W+1)
    lengths = torch.cat([length[:, None].expand(g, b), state.length], 1)  # (G, 2B)
    counts = torch.cat([taken, contender], 1)
    differs = (seqs != live[:, :1]) | (at[:, None, :] >= lengths[:, :, None])
    differs[:, :, -1].fill_(True)  # (G, 2B, W+1): the shared run ends within the window
    shared = torch.where(counts, differs.byte().argmax(2), WINDOW).amin(1)  # (G,) shared past the emitted ones
    stable = shared.masked_fill(done, 0)  # at most WINDOW
    emitted, alive = state.emitted + stable, state.alive & ~done
    state = BeamState(*state.fields()[:-2], emitted, alive)
    return state, stable, live[:, 0, :WINDOW]
