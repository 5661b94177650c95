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
from model.runner.beams import DEAD, GROW, LATER, BeamState
from model.runner.constraints import Constraints
from model.runner.params import DecodeParams
from model.runner.pool import KVPool
from model.runner.rows import RowTable
from model.runner.search import Request, Seq
from model.runner.slots import group
from model.runner.transfer import upload

PRESIZE = 128  # self-attention positions a join reserves at most up front (as many as its requests may decode)


@dataclass
class Encoded:
    """Requests encoded and their cross-attention K/V projected, not joined yet."""

    requests: list[Request]
    cross_k: Tensor  # (L, n, H, S, D)
    cross_v: Tensor  # (L, n, H, S, D)
    src_mask: Tensor  # (n, S) bool

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
    def add(self, new: Encoded) -> None:
        """New requests join after the running ones (a beam request with all its rows, the first scoring 0). Nothing
        changes unless all of it succeeds."""
        sizes = [r.params.beam_size for r in new.requests]
        widths = [s if whole(r.params) else 1 for r, s in zip(new.requests, sizes, strict=True)]
        n, g, m = self.rows, len(self.seqs), sum(widths)
        positions = self.max_length + 1
        if self.pool.presize:  # no growth copies up to PRESIZE positions
            positions = max(positions, min(max(r.params.max_new_tokens for r in new.requests), PRESIZE))
        self.pool.reserve(n + m, positions, g + len(widths), new.src_mask.shape[1])
        self.pool.put_sources(g, new.cross_k, new.cross_v, new.src_mask)
        self.pool.positions[n : n + m] = 0
        tokens = torch.cat([self.tokens, self.tokens.new_full((m,), self.cfg.decoder_start_id)])
        search = self.search.concat(BeamState.start(widths, self.search.positions, self.device, sizes))
        constraints = self.constraints
        if constraints is not None or any(r.params.constraints for r in new.requests):
            per_row = [r.params for r, w in zip(new.requests, widths, strict=True) for _ in range(w)]
            spans = [p.constraint_spans for p in per_row]
            joining = Constraints.start([p.constraints for p in per_row], self.device, spans)
            before = constraints or Constraints.start([()] * n, self.device)
            constraints = before.concat(joining)
        lens, seqs, first = new.src_mask.sum(1).tolist(), [], n
        for r, w, s in zip(new.requests, widths, lens, strict=True):
            seqs.append(Seq(r, first, w, s))
            first += w
        self.tokens, self.search, self.seqs, self.rows = tokens, search, self.seqs + seqs, n + m
        self.constraints, self.stale = constraints, True
        self._measure()

    def narrow(self, kept: list[tuple[Seq, int]]) -> None:
        """Only these requests stay, each with its first `width` rows (a beam request narrows when fewer beams go
        on; one forced its prefix grows as the prefix ends: its new rows copy its first, DEAD as at a beam's start);
        the others' rows and slots are free. Spans that stay in place are not copied; the others fill the gaps."""
        if len(kept) == len(self.seqs) and all(w == s.width for s, w in kept):
            return
        starts = place([(s.first, s.width, w) for s, w in kept])
        order = sorted(range(len(kept)), key=starts.__getitem__)
        slot_of = {id(s): i for i, s in enumerate(self.seqs)}
        places = [(kept[i][0], j) for i in order for j in range(kept[i][1])]  # every new row: its request, its place
        parents = [s.first + (j if j < s.width else 0) for s, j in places]
        grown = [(r, j) for r, (s, j) in enumerate(places) if j >= s.width]
        if len(parents) > self.pool.sizes[0]:
            self.pool.reserve(len(parents), *self.pool.sizes[1:])
        slots = [slot_of[id(kept[i][0])] for i in order]
        beam_of = {id(s): b for b, s in enumerate(self.beams())}
        groups = [beam_of[id(kept[i][0])] for i in order if kept[i][0].beam]
        self._move(parents, slots, groups)
        if grown:
            self._dead(grown)
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

    def _dead(self, grown: list[tuple[int, int]]) -> None:
        """The rows a beam request grew by, each (row, place in its group): they score DEAD (only its first
        row's candidates count at the next step) and rank by place, as at a beam's start."""
        at, ranks = upload(list(zip(*grown, strict=True)), torch.long, self.device)
        cum = self.search.cum.index_fill(0, at, DEAD)
        self.search = dataclasses.replace(self.search, cum=cum, rank=self.search.rank.index_copy(0, at, ranks))

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


def whole(params: DecodeParams, steps: int = 0) -> bool:
    """Whether a request has all its rows `steps` into its output: a beam request forced a prefix has one until LATER
    steps before the prefix ends (its beam searches one place until then), any other all of them."""
    return steps + LATER >= len(params.prefix)


def beam_rows(params: DecodeParams, step: int, n: int) -> int:
    """The rows a beam request keeps once step `step` (0-based) is booked, at which its beam chose `n` to go on: all of
    them from LATER steps before its forced prefix ends (`whole`), else `n`."""
    return params.beam_size if n and step < len(params.prefix) and whole(params, step) else n
