"""A decode batch as a value: requests join (concat) and leave (filter) between steps, which run one at a time
(`step`) or overlapped, one step kept in flight (`step_ahead`)."""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

import torch
from torch import Tensor

from model.config import ModelConfig
from model.runner.beams import GROW, BeamState, HostMoves, Moves
from model.runner.beams import step as beam_step
from model.runner.cache import PRESIZE, DecoderCache
from model.runner.choice import Picked, beam_candidates, pack, pick, unpack
from model.runner.processors import process
from model.runner.rows import RowTable
from model.runner.transfer import Readback, fetch, start_fetch, upload
from model.search import Group, Request, StepOutput
from model.transformer import Seq2SeqTransformer


def pad_batch(seqs: list[list[int]], pad_id: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """Right-pad id lists: ids (B, S) and mask (B, S), True on real tokens."""
    width = max(len(s) for s in seqs)
    ids = upload([s + [pad_id] * (width - len(s)) for s in seqs], torch.long, device)
    return ids, upload([[True] * len(s) + [False] * (width - len(s)) for s in seqs], torch.bool, device)


class DecodeBatch:
    """Groups (one per request, in row order), their decoder cache, the last token of every row, the rows' and
    beam groups' device state and their constants (a `RowTable`, kept while it fits the groups)."""

    def __init__(
        self, groups: list[Group], cache: DecoderCache, tokens: Tensor, state: BeamState, table: RowTable | None = None
    ):
        self.groups, self.cache, self.tokens, self.state, self.table = groups, cache, tokens, state, table

    @classmethod
    def prefill(cls, model: Seq2SeqTransformer, requests: list[Request]) -> DecodeBatch:
        """Encode new requests and project their cross-attention K/V once: one row each."""
        cfg, device = model.cfg, model.device
        src, src_mask = pad_batch([r.src for r in requests], cfg.pad_id, device)
        capacity = min(max(r.params.max_new_tokens for r in requests), PRESIZE)  # no growth copies up to PRESIZE
        widths = [r.params.beam_size for r in requests]  # a beam request has its beam_size rows from the start
        cache = model.start_cache(model.encode(src, src_mask), src_mask, capacity, sum(widths))  # no growth copy
        if len(widths) < sum(widths):
            cache.take_([i for i, w in enumerate(widths) for _ in range(w)])  # nothing decoded yet: nothing to copy
        start = cfg.decoder_start_id
        groups = [Group(r, cfg.eos_id, start, _generator(r, device), r.params.beam_size) for r in requests]
        tokens = torch.full((sum(widths),), start, dtype=torch.long, device=device)
        return cls(groups, cache, tokens, BeamState.start(widths, capacity, device))

    def __len__(self) -> int:
        return len(self.groups)

    @property
    def rows(self) -> int:
        """Rows in the batch (a beam-search request has one per live beam)."""
        return self.tokens.shape[0]

    def cache_tokens(self) -> int:
        """Tokens the cache holds (each row's source plus its decoded positions, a step in flight included), counted
        from its python copies without touching it."""
        return sum(self.cache.src_lens) + sum(self.cache.decoded())

    @property
    def ids(self) -> list[Hashable]:
        """Request ids in row order."""
        return [g.request.id for g in self.groups]

    def concat(self, other: DecodeBatch) -> DecodeBatch:
        """This batch's rows followed by `other`'s; consumes both (the cache grows in place)."""
        if not self.groups:
            return other
        self.cache.append_(other.cache)
        tokens, state = torch.cat([self.tokens, other.tokens]), self.state.concat(other.state)
        return DecodeBatch(self.groups + other.groups, self.cache, tokens, state)

    def filter(self, keep: Iterable[Hashable], widths: list[int] | None = None) -> DecodeBatch:
        """Only the requests whose ids are in `keep` (aborted ones leave); consumes this batch. `widths`: each group's
        rows in the batch when they are no longer its width (it was booked since: a finished group has none left)."""
        keep = set(keep)
        kept, start = [], 0
        for g, width in zip(self.groups, widths or [g.width for g in self.groups], strict=True):
            if g.request.id in keep:
                kept.append((g, start, width, [(r,) for r in range(start, start + width)]))
            start += width
        groups, rows = self._rearrange(kept)
        parents = upload([r for (r,) in rows], torch.long, self.tokens.device)
        state = self.state.take(parents, self._beam_index(groups))
        return DecodeBatch(groups, self.cache, self.tokens.index_select(0, parents), state, self.table)

    def _rearrange(self, kept: list[tuple[Group, int, int, list[tuple]]]) -> tuple[list[Group], list[tuple]]:
        """Lay out the groups that go on, each (group, old first row, old width, its new rows as tuples that start
        with the parent row), in the first rows of the cache, moving as few as possible; return them in row order with
        every new row's tuple."""
        same = len(kept) == len(self.groups) and all(
            [r[0] for r in rows] == list(range(s, s + old)) for _, s, old, rows in kept
        )
        if same and self.cache.rows == self.rows:  # every row stays where it is: nothing moves (a cache that holds
            # more rows, as after a join that failed half-way, drops them below)
            return [g for g, *_ in kept], [r for *_, rows in kept for r in rows]
        starts = place([(start, old, g.width) for g, start, old, _ in kept])
        order = sorted(range(len(kept)), key=starts.__getitem__)
        rows = [row for i in order for row in kept[i][3]]  # a row reads its parent's slot: its request's source
        self.cache.take_([r[0] for r in rows])
        return [kept[i][0] for i in order], rows

    def _beam_index(self, groups: list[Group]) -> Tensor:
        """(G',) the old beam-group index of every beam group of `groups` (which are this batch's), in their order."""
        index = {id(g): i for i, g in enumerate(g for g in self.groups if g.beam)}
        return upload([index[id(g)] for g in groups if g.beam], torch.long, self.tokens.device)

    def step(self, model: Seq2SeqTransformer) -> tuple[DecodeBatch, list[StepOutput]]:
        """One decoder step for every row, in phases: logits, logit processing, token choice and the beam groups' step
        on the device (one copy to the host), bookkeeping in the groups, cache and state moves. Returns the batch that
        goes on and what each request got."""
        picked, state, moves, table, steps = self._choose(model)
        flat = fetch(pack(picked.parts + (moves.packed() if moves else [])))
        tokens, logprobs, rest = unpack(flat, picked, len(table.params))
        host = HostMoves.read(rest, len(table.beams), state.score.shape[1]) if moves else None
        outputs, kept, ended = self._advance(tokens, logprobs, host)
        groups, new = self._rearrange(kept)
        _results(self.groups, state, ended)
        if table.fits(groups, state.score.shape[1]):  # the same rows: what they take is on the device already
            parents, source, tokens = self._moved(picked.tokens, moves, table)
            return DecodeBatch(
                groups, self.cache, tokens, state.advance(parents, moves, source, tokens, steps), table
            ), outputs
        parents, source, tokens, at = upload(list(zip(*new, strict=True)) or [[]] * 4, torch.long, self.tokens.device)
        state = state.advance(parents, moves, source, tokens, at).take(None, self._beam_index(groups))
        return DecodeBatch(groups, self.cache, tokens, state, table), outputs

    def _choose(self, model: Seq2SeqTransformer) -> tuple[Picked, BeamState, Moves | None, RowTable, Tensor]:
        """A step's device work up to its choices: logits, processing, every row's pick and the beam groups' step;
        (picks, beam state after it, beam moves or None, the row table, steps per row)."""
        scores, logprobs, table, steps = self._scores(model)
        picked = pick(scores, logprobs, table)
        state, moves = self.state, None
        if table.beam:
            candidates = beam_candidates(scores, state.cum, state.rank, table.beam)
            state, moves = beam_step(state, candidates, table.beam.knobs_at(steps), model.cfg.eos_id)
        return picked, state, moves, table, steps

    # --- the overlap scheduler: step t+1 is launched before step t's choices are read back ----------------------
    def step_ahead(
        self, model: Seq2SeqTransformer, pending: Pending | None
    ) -> tuple[DecodeBatch, list[StepOutput], Pending | None]:
        """One round of the overlap scheduler: launch the next step, then book the step in flight (`pending`) while the
        device runs the new one. One-row requests at their length limit end with the step in flight and do not run the
        next one; rows that end otherwise (EOS, a beam group done) do run it (wasted: nothing of it is read, a done
        beam group's buffers are frozen on the device) and leave before the one after. Returns the batch that goes
        on, what each request got (from the booked step) and the step now in flight."""
        ahead, launched = self, None
        if pending is not None and (ending := pending.ending()):
            ahead = self._without({g.request.id for g in self.groups if id(g) in ending})
        if len(ahead):
            ahead, launched = ahead.launch(model)
        if pending is None:
            return ahead, [], launched
        widths = [g.width for g in ahead.groups]  # the rows' layout; booking empties the groups that finish
        outputs, done = pending.book(self.groups, ahead)  # waits for the step in flight only
        return ahead._without(done, widths), outputs, launched

    def launch(self, model: Seq2SeqTransformer) -> tuple[DecodeBatch, Pending]:
        """Launch one decode step for every row and start copying its choices to the host without waiting: the batch
        that runs next (the same groups, not booked yet; its inputs, cache rows, histories and beam buffers advanced on
        the device, beams reordered there) and the step in flight."""
        picked, state, moves, table, steps = self._choose(model)
        parents, source, tokens = self._moved(picked.tokens, moves, table)
        if moves is not None:  # beam rows take their parents' self-attention state
            at = table.beam.rows
            self.cache.reorder_(*((torch.arange(len(parents), device=parents.device), parents) if at is None
                                  else (at, parents.index_select(0, at))))  # fmt: skip
        state = state.advance(parents, moves, source, tokens, steps)
        parts = picked.parts + (moves.packed() if moves else [])
        firsts = list(itertools.accumulate((g.width for g in self.groups), initial=0))  # one more than groups
        pending = Pending(self.groups, firsts, picked, start_fetch(pack(parts)), state.score.shape[1])
        return DecodeBatch(self.groups, self.cache, tokens, state, table), pending

    def _moved(self, picked: Tensor | None, moves: Moves | None, table: RowTable) -> tuple[Tensor, Tensor, Tensor]:
        """Every row of the same groups after a step, on the device: its parent row, its flat index into the beam moves
        (-1: not a beam row) and its token (N,) each."""
        n, device = len(table.params), self.tokens.device
        parents, source = torch.arange(n, device=device), torch.full((n,), -1, dtype=torch.long, device=device)
        if moves is None:
            return parents, source, picked
        b = table.beam
        moved = (b.knobs.first[:, None] + moves.parent).flatten().index_select(0, b.flat)  # (Nb,) parent rows
        token = moves.token.flatten().index_select(0, b.flat)
        if b.rows is None:  # every row is a beam row
            return moved, b.flat, token
        tokens = picked.index_copy(0, b.rows, token)
        return parents.index_copy(0, b.rows, moved), source.index_copy(0, b.rows, b.flat), tokens

    def _scores(self, model: Seq2SeqTransformer) -> tuple[Tensor, Tensor | None, RowTable, Tensor]:
        """Launch the decoder step and process its logits: the scores the choice ranks (N, V), the log-probabilities
        when any row keeps scores, the rows' constants and the steps each had launched before (N,) on the device."""
        if self.cache.max_length >= self.state.positions:  # the step writes position steps[i] of each row's history
            self.state = self.state.fit(0, self.cache.max_length + GROW)
        places = self.state.score.shape[1]
        if self.table is None or not self.table.fits(self.groups, places):  # requests joined, left or narrowed
            self.table = RowTable.of(self.groups, places, model.cfg.tgt_vocab_size, self.tokens.device)
        forced = self.table.forced(self.cache.decoded(), model.cfg.eos_id) if self.table.forcing else []
        logits = model.decode_step(self.tokens, self.cache).float()  # (N, V)
        steps = self.cache.lengths - 1  # (N,) per row, steps launched before this one (a step in flight included)
        return *self._process(logits, model.cfg, steps, forced), self.table, steps

    def _without(self, ids: set[Hashable], widths: list[int] | None = None) -> DecodeBatch:
        """This batch less the requests in `ids` (itself when none of them is in it); consumes this batch. `widths`:
        as for `filter`."""
        if not any(g.request.id in ids for g in self.groups):
            return self
        return self.filter([i for i in self.ids if i not in ids], widths)

    def _process(
        self, logits: Tensor, cfg: ModelConfig, steps: Tensor, forced: list[tuple[int, int]]
    ) -> tuple[Tensor, Tensor | None]:
        """Logit processing: the scores the choice ranks (log-probabilities for beam rows, logits for the others)
        after every per-row processor (each row `steps` (N,) tokens into its output; `forced` tokens as (row,
        token)), and the log-probabilities when any row keeps scores."""
        table = self.table
        logprobs = logits.log_softmax(-1) if table.scored else None
        if table.beam_rows == len(table.params):
            scores = logprobs  # processed in place: no greedy row reads the log-probabilities
        elif table.beam_rows == 0:
            scores = logits
        else:
            scores = torch.where(table.is_beam[:, None], logprobs, logits)
        process(scores, cfg, table, steps, self.state.history, forced)
        return scores, logprobs

    def _advance(
        self, tokens: list[int], logprobs: list[float] | None, host: HostMoves | None
    ) -> tuple[list[StepOutput], list[tuple[Group, int, int, list[tuple]]], list[tuple[Group, StepOutput]]]:
        """Bookkeeping: every group takes its choice. Returns what each request got; the groups that go on as (group,
        old first row, old width, its new rows as (parent, flat index into the beam moves or -1, token, position));
        and the finished beam groups with their outputs, whose hypotheses are still to come."""
        outputs, kept, ended, row, b = [], [], [], 0, 0
        for g in self.groups:
            width = g.width
            if g.beam:
                new, out = host.take(g, b, row), StepOutput(g.request.id, stable=host.stable(b))
                if not g.width:
                    ended.append((g, out))
                b += 1
            else:
                on = g.advance(tokens[row], None if logprobs is None else logprobs[row])
                new, out = [(row, -1, tokens[row], g.steps - 1)] if on else [], _output(g, width)
            outputs.append(out)
            if g.width:
                kept.append((g, row, width, new))
            row += width
        return outputs, kept, ended


@dataclass
class Pending:
    """A decode step in flight (the overlap scheduler's): the groups that ran it in row order and their first rows
    (and the row count), its choices on the device (`picked.tokens`) and the copy to the host of those and of the
    beam moves (`beam` places per group)."""

    groups: list[Group]
    firsts: list[int]
    picked: Picked
    readback: Readback
    beam: int

    def ending(self) -> set[int]:
        """id() of the one-row groups whose step in flight is their last whatever it picks (their length limit); asked
        before the step is booked."""
        return {id(g) for g in self.groups if not g.beam and g.steps + 1 >= g.params.max_new_tokens}

    def book(self, live: list[Group], now: DecodeBatch) -> tuple[list[StepOutput], set[Hashable]]:
        """The step's choices taken by the groups of `live` that ran it (waiting for the copy, not for work launched
        after the step): what each of them got, and the ids of those that finished; the hypotheses of beam groups
        that finished come from `now`, the batch running since (their buffers no longer change). Groups that left
        since (finished at an earlier step, aborted) are not in `live` and are skipped; groups that joined after it
        did not run it."""
        beams = [g for g in self.groups if g.beam]
        flat = self.readback.wait()
        tokens, logprobs, rest = unpack(flat, self.picked, self.firsts[-1])
        host = HostMoves.read(rest, len(beams), self.beam) if beams else None
        row = {id(g): first for g, first in zip(self.groups, self.firsts, strict=False)}
        index = {id(g): b for b, g in enumerate(beams)}
        outputs, ended = [], []
        for g in live:
            if (r := row.get(id(g))) is None:
                continue
            if g.beam:
                host.take(g, index[id(g)], r)
                outputs.append(StepOutput(g.request.id, stable=host.stable(index[id(g)])))
                if not g.width:
                    ended.append((g, outputs[-1]))
            else:
                g.advance(tokens[r], None if logprobs is None else logprobs[r])
                outputs.append(_output(g, 1))
        _results(now.groups, now.state, ended)
        return outputs, {o.id for o in outputs if o.finished}


def place(spans: list[tuple[int, int, int]]) -> list[int]:
    """New first row for each (old first row, old width, new width) so that they tile rows [0, total): a span
    that keeps its width and lies inside stays; the others fill the gaps, widest first; when they do not fit,
    all are packed in order."""
    total = sum(new for _, _, new in spans)
    stays = [old == new and start + new <= total for start, old, new in spans]
    free = [True] * total
    for (start, _, new), stay in zip(spans, stays, strict=True):
        if stay:
            free[start : start + new] = [False] * new
    gaps = []  # [first row, length] of each run of free rows
    for i, f in enumerate(free):
        if f and (i == 0 or not free[i - 1]):
            gaps.append([i, 0])
        if f:
            gaps[-1][1] += 1
    starts = [start if stay else -1 for (start, _, _), stay in zip(spans, stays, strict=True)]
    for i in sorted((i for i, stay in enumerate(stays) if not stay), key=lambda i: -spans[i][2]):
        width = spans[i][2]
        gap = next((g for g in gaps if g[1] >= width), None)
        if gap is None:
            return list(itertools.accumulate((new for _, _, new in spans[:-1]), initial=0))
        starts[i], gap[0], gap[1] = gap[0], gap[0] + width, gap[1] - width
    return starts


def _results(groups: list[Group], state: BeamState, ended: list[tuple[Group, StepOutput]]) -> None:
    """The hypotheses of the beam groups that ended, each (group, its output), from `state`, whose beam groups are
    those of `groups` in order: one copy, only when requests end."""
    if not ended:
        return
    index = {id(g): b for b, g in enumerate(g for g in groups if g.beam)}
    hypotheses = state.hypotheses([index[id(g)] for g, _ in ended], [g.params.num_hypotheses for g, _ in ended])
    for (_, out), hyps in zip(ended, hypotheses, strict=True):
        out.hypotheses = hyps


def _output(group: Group, width: int) -> StepOutput:
    """What a one-row request that was `width` rows wide got from the step it just took."""
    if not group.width:
        return StepOutput(group.request.id, _last(group, width), group.finished)
    return StepOutput(group.request.id, group.tokens[-1])


def _last(group: Group, width: int) -> int | None:
    """The token a finished one-row request produced on its final step: EOS, also when forced at the length limit
    (its finish reason is then "length", and the output does not keep it), else its last token."""
    if width != 1:
        return None
    hyp = group.finished[0]
    return hyp.tokens[-1] if len(hyp.tokens) == group.steps else group.eos_id


def _generator(request: Request, device: torch.device) -> torch.Generator | None:
    """A seeded request's own random generator (an unseeded one draws from the default generator)."""
    if not request.params.sampling or request.params.seed is None:
        return None
    return torch.Generator(device=device).manual_seed(request.params.seed)
