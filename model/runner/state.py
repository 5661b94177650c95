"""The decode state: every running request's rows and their device state in one place, owned by the decode loop and
changed in place.

A request has one row (greedy, sampling) or one per live beam, contiguous; its slot (its source's cross-attention
K/V, read by all of its rows) is its index in `seqs`, which are in row order. Per row on the device: the last token,
the K/V and next position (the pool), the generated tokens, beam score and rank (`search`); per beam request: its
finished hypotheses (`search`). The one count of a request's progress is its `steps` (every row of it has written as
many positions; the pool's positions mirror it on the device). Requests join (`add`) and leave (`narrow`) between steps;
rows that stay keep their place where they can, so only rows and slots that move are copied."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Hashable
from dataclasses import dataclass

import torch
from torch import Tensor

from model.network.config import ModelConfig
from model.network.step import Groups, StepInputs
from model.runner.beams import GROW, BeamState
from model.runner.constraints import Constraints, Words
from model.runner.pool import KVPool
from model.runner.rows import RowTable
from model.runner.search import Request, Seq
from model.runner.slots import group
from model.runner.transfer import upload

PRESIZE = 128  # self-attention positions a join reserves at most up front (as many as its requests may decode)


@dataclass
class Forced:
    """The forced prefixes of some of the requests joining, decoded teacher-forced: which requests (their indices),
    their self-attention K/V, each prefix token's log-probability before the forcing and where the decoder looked at
    each step (None: the model has no alignment)."""

    at: list[int]
    k: Tensor  # (L, m, H, P, D)
    v: Tensor  # (L, m, H, P, D)
    logp: Tensor  # (m, P)
    align: Tensor | None  # (m, P, S)


@dataclass
class Encoded:
    """Requests encoded and their cross-attention K/V projected, not joined yet (`forced`: their forced prefixes
    decoded already)."""

    requests: list[Request]
    cross_k: Tensor  # (L, n, H, S, D)
    cross_v: Tensor  # (L, n, H, S, D)
    src_mask: Tensor  # (n, S) bool
    forced: Forced | None = None

    @property
    def ids(self) -> list[Hashable]:
        """The requests' ids."""
        return [r.id for r in self.requests]


class DecodeState:
    """The running requests (`seqs`, in row order), their rows' last tokens (N,), the search columns and the pool,
    with the per-row constants and the query layout, rebuilt (one upload each) only when the rows changed."""

    def __init__(self, pool: KVPool, cfg: ModelConfig):
        self.pool, self.cfg = pool, cfg
        self.seqs: list[Seq] = []
        self.tokens = torch.zeros(0, dtype=torch.long, device=pool.k.device)  # (N,)
        self.search = BeamState.start([], GROW, pool.k.device)
        self.constraints: Constraints | None = None  # while a running request has constraints
        self.table: RowTable | None = None
        self.layout: Groups | None = None  # None: row i reads slot i
        self.stale = True  # the rows changed since the table and the layout were built
        self.rows = 0
        self.max_length, self.uniform, self.src_len = 0, True, 0  # of the seqs, measured when they change
        self.placed = False  # a running request's constraints are placed by alignment (the step returns it)

    def _measure(self) -> None:
        """The most positions any row has written, whether every row has written as many, the longest source."""
        steps = [s.steps for s in self.seqs]
        self.max_length, self.uniform = max(steps, default=0), len(set(steps)) <= 1
        self.src_len = max((s.src_len for s in self.seqs), default=0)
        self.placed = any(w >= 0 for s in self.seqs for w, _, _ in s.params.constraint_spans)

    # --- what the host knows, without a device sync ---------------------------------------------------
    @property
    def device(self) -> torch.device:
        """Where the state lives."""
        return self.tokens.device

    @property
    def row_slots(self) -> list[int]:
        """Every row's slot."""
        return [i for i, s in enumerate(self.seqs) for _ in range(s.width)]

    def row_steps(self) -> list[int]:
        """Every row's steps launched."""
        return [s.steps for s in self.seqs for _ in range(s.width)]

    def cache_tokens(self) -> int:
        """Tokens the pool holds for the live requests: sources, and every row's positions."""
        return sum(s.src_len + s.width * s.steps for s in self.seqs)

    def beams(self) -> list[Seq]:
        """The beam requests, in order: the groups of the search columns."""
        return [s for s in self.seqs if s.beam]

    # --- joins and leaves -----------------------------------------------------------------------------
    def add(self, new: Encoded, words: Words | None = None) -> None:
        """New requests join after the running ones (a beam request with all its rows, the first scoring 0; one
        forced a prefix past it, `Forced`). Nothing changes unless all of it succeeds."""
        widths = [r.params.beam_size for r in new.requests]
        n, g, m = self.rows, len(self.seqs), sum(widths)
        positions = max(self.max_length, *(len(r.params.prefix) for r in new.requests)) + 1
        if self.pool.presize:  # no growth copies up to PRESIZE positions
            positions = max(positions, min(max(r.params.max_new_tokens for r in new.requests), PRESIZE))
        self.pool.reserve(n + m, positions, g + len(widths), new.src_mask.shape[1])
        self.pool.put_sources(g, new.cross_k, new.cross_v, new.src_mask)
        self.pool.positions[n : n + m] = 0
        tokens = torch.cat([self.tokens, self.tokens.new_full((m,), self.cfg.decoder_start_id)])
        search = self.search.concat(BeamState.start(widths, max(self.search.positions, positions), self.device))
        constraints = self.constraints
        if constraints is not None or any(r.params.constraints for r in new.requests):
            per_row = [r.params for r, w in zip(new.requests, widths, strict=True) for _ in range(w)]
            spans = [p.constraint_spans for p in per_row]
            joining = Constraints.start([p.constraints for p in per_row], self.device, spans)
            if new.forced is not None:
                joining = _replayed(joining, new, widths, words, self.cfg.eos_id)
            before = constraints or Constraints.start([()] * n, self.device)
            constraints = before.concat(joining)
        lens, seqs, first = new.src_mask.sum(1).tolist(), [], n
        for r, w, s in zip(new.requests, widths, lens, strict=True):
            seqs.append(Seq(r, first, w, s))
            first += w
        if new.forced is not None:
            tokens, search = self._past_prefixes(new.forced, seqs, tokens, search)
        self.tokens, self.search, self.seqs, self.rows = tokens, search, self.seqs + seqs, n + m
        self.constraints, self.stale = constraints, True
        self._measure()

    def _past_prefixes(self, forced: Forced, seqs: list[Seq], tokens: Tensor, search: BeamState
                       ) -> tuple[Tensor, BeamState]:  # fmt: skip
        """Joining requests forced a prefix start past it, every row of each as its first (a beam's others stay
        DEAD): the prefix's K/V in the pool, its tokens in the history with their log-probabilities, the last one
        the next step's input. Returns the rows' last tokens and the search columns."""
        history, logp = search.history.clone(), search.logp.clone()
        for j, i in enumerate(forced.at):
            seq, prefix = seqs[i], seqs[i].params.prefix
            rows, p = slice(seq.first, seq.first + seq.width), len(prefix)
            self.pool.k[:, rows, :, :p] = forced.k[:, j : j + 1, :, :p]
            self.pool.v[:, rows, :, :p] = forced.v[:, j : j + 1, :, :p]
            self.pool.positions[rows] = p
            history[rows, :p] = torch.tensor(prefix, device=self.device)
            logp[rows, :p] = forced.logp[j, :p]
            tokens[rows] = prefix[-1]
            seq.steps = p
        return tokens, dataclasses.replace(search, history=history, logp=logp)

    def narrow(self, kept: list[tuple[Seq, int]]) -> None:
        """Only these requests stay, each with its first `width` rows (a beam request narrows when fewer beams go
        on); the others' rows and slots are free. Spans that stay in place are not copied; the others fill the gaps.
        """
        if len(kept) == len(self.seqs) and all(w == s.width for s, w in kept):
            return
        starts = place([(s.first, s.width, w) for s, w in kept])
        order = sorted(range(len(kept)), key=starts.__getitem__)
        slot_of = {id(s): i for i, s in enumerate(self.seqs)}
        parents = [kept[i][0].first + j for i in order for j in range(kept[i][1])]
        slots = [slot_of[id(kept[i][0])] for i in order]
        beam_of = {id(s): b for b, s in enumerate(self.beams())}
        groups = [beam_of[id(kept[i][0])] for i in order if kept[i][0].beam]
        self._move(parents, slots, groups)
        seqs = []
        for i in order:
            seq, seq.width = kept[i][0], kept[i][1]
            seq.first = starts[i]
            seqs.append(seq)
        self.seqs, self.rows = seqs, len(parents)
        self.stale = True
        self._measure()
        if not any(s.params.constraints for s in seqs):
            self.constraints = None  # no constraint left: no constraint work in the steps

    def _move(self, parents: list[int], slots: list[int], groups: list[int]) -> None:
        """Row i becomes old row parents[i], slot j old slot slots[j], beam group b old group groups[b]; rows past
        the new count write position 0 (a padded step computes them, unread)."""
        pool, device = self.pool, self.device
        moved = [i for i, p in enumerate(parents) if p != i]
        moved_slots = [j for j, s in enumerate(slots) if s != j]
        if moved:
            dst, src = upload([moved, [parents[i] for i in moved]], torch.long, device)
            pool.move_rows(dst, src, self.max_length)
        if moved_slots:
            dst, src = upload([moved_slots, [slots[j] for j in moved_slots]], torch.long, device)
            pool.move_slots(dst, src, self.src_len)
        pool.positions[len(parents) : self.rows] = 0
        if parents == list(range(self.rows)) and groups == list(range(len(self.beams()))):
            return
        at = upload(parents, torch.long, device)
        same_groups = groups == list(range(len(self.beams())))
        self.search = self.search.select(at, None if same_groups else upload(groups, torch.long, device))
        self.tokens = self.tokens.index_select(0, at)
        if self.constraints is not None:
            self.constraints = self.constraints.select(at)

    # --- a step ---------------------------------------------------------------------------------------
    def prepare(self) -> RowTable:
        """Room for the next position, and the rows' constants and query layout (rebuilt when the rows changed)."""
        t = self.max_length + 1
        if t > self.pool.sizes[1]:
            self.pool.reserve(self.rows, t, len(self.seqs), self.src_len)
        if t > self.search.positions:  # the step writes position t - 1 of each row's history
            self.search = self.search.fit(0, t + GROW)
        if self.stale:
            places = self.search.score.shape[1]
            self.table = RowTable.of(self.seqs, places, self.cfg.tgt_vocab_size, self.device)
            self.layout, self.stale = group(self.row_slots, len(self.seqs), self.device), False
        return self.table

    def inputs(self) -> StepInputs:
        """The next step's inputs over the live rows, positions and slots."""
        extent = (self.rows, self.max_length + 1, self.src_len)
        return self.pool.inputs(self.tokens, extent, len(self.seqs), self.uniform, self.layout)

    def count_step(self) -> None:
        """Count the position every row just wrote."""
        self.pool.positions[: self.rows] += 1
        for s in self.seqs:
            s.steps += 1
        self.max_length += 1


def place(spans: list[tuple[int, int, int]]) -> list[int]:
    """New first row for each (old first row, old width, new width) so that they tile rows [0, total): a span that
    keeps its width and lies inside stays; the others fill the gaps, widest first; one that fits no gap takes the
    window that moves the fewest rows of narrower spans (nearest the end), which then fill gaps in turn, so that a
    beam request at the end does not repack every request after the first gap; when no window holds only narrower
    spans, all are packed in order."""
    widths = [new for _, _, new in spans]
    owner = [-1] * sum(widths)  # (total,) the span on each row, -1: free
    starts = [-1] * len(spans)
    for i, (start, old, new) in enumerate(spans):
        if old == new and start + new <= len(owner):
            starts[i], owner[start : start + new] = start, [i] * new
    pending = [i for i, s in enumerate(starts) if s < 0]
    while pending:
        i = max(pending, key=lambda j: (widths[j], -j))  # widest first, then in order
        pending.remove(i)
        at = _window(owner, widths[i], widths)
        if at is None:
            return list(itertools.accumulate(widths[:-1], initial=0))
        for j in {owner[r] for r in range(at, at + widths[i])} - {-1}:  # evicted: placed again later
            owner[starts[j] : starts[j] + widths[j]], starts[j] = [-1] * widths[j], -1
            pending.append(j)
        starts[i], owner[at : at + widths[i]] = at, [i] * widths[i]
    return starts


def _window(owner: list[int], width: int, widths: list[int]) -> int | None:
    """First row of the first run of `width` free rows; else of the window holding only spans narrower than `width`
    whose rows are fewest (the last such window); None if there is none. One pass each (a pool of wide spans only
    finds none at once)."""
    run = 0
    for r, o in enumerate(owner):
        run = run + 1 if o < 0 else 0
        if run == width:
            return r - width + 1
    best, cost, run = None, None, 0
    for r, o in enumerate(owner):
        run = run + 1 if o < 0 or widths[o] < width else 0  # rows a window may take
        if run >= width:
            moved = sum(widths[o] for o in set(owner[r - width + 1 : r + 1]) - {-1})
            if cost is None or moved <= cost:
                best, cost = r - width + 1, moved
    return best


def _replayed(joining: Constraints, new: Encoded, widths: list[int], words: Words | None, eos_id: int) -> Constraints:
    """The joining rows' constraint columns, those of requests forced a prefix as after its steps (one replay of every
    such row together)."""
    firsts = list(itertools.accumulate(widths, initial=0))
    forced, device = new.forced, joining.tokens.device
    of_rows = [j for j, i in enumerate(forced.at) for _ in range(widths[i])]  # each replayed row's prefix
    rows = upload([firsts[i] + k for i in forced.at for k in range(widths[i])], torch.long, device)
    prefixes = [new.requests[forced.at[j]].params.prefix for j in of_rows]
    width = max(map(len, prefixes))
    tokens = upload([[*p, *[-1] * (width - len(p))] for p in prefixes], torch.long, device)  # (R, P)
    at = upload(of_rows, torch.long, device)
    align = None if forced.align is None else forced.align.index_select(0, at)  # (R, P, S)
    after = joining.select(rows).replayed(tokens, align, words, eos_id).fields()
    return Constraints(*(x.index_copy(0, rows, y) for x, y in zip(joining.fields(), after, strict=True)))
