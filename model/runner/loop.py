"""The decode loop: the decode state and, with overlap, the one step in flight. The engine core, offline `generate`
and the benchmarks all decode through it; requests join and leave between its steps.

A step is launched (its device work queued: logits, processing, every row's choice, the beam step, the rows'
reorder, and the copy of its choices to the host started), then booked (the choices read on the host: tokens, stable
prefixes and results; finished requests leave). Without overlap a step is booked as soon as it is launched; with
overlap step t is booked after step t+1 is launched, so the host's bookkeeping runs while the device works."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from model.network.config import ModelConfig
from model.runner import Runner, constraints
from model.runner.beams import HostMoves, Moves
from model.runner.beams import step as beam_step
from model.runner.choice import Picked, beam_candidates, pack, pick, row_max, unpack
from model.runner.constraints import Words
from model.runner.eager import Eager
from model.runner.pool import copy_rows
from model.runner.processors import process
from model.runner.rows import RowTable
from model.runner.search import Request, RowStatus, Seq, StepOutput
from model.runner.state import DecodeState, Encoded, Forced
from model.runner.transfer import Readback, start_fetch, upload


def pad_batch(seqs: list[list[int]], pad_id: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """Right-pad id lists: ids (B, S) and mask (B, S), True on real tokens."""
    width = max(len(s) for s in seqs)
    ids = upload([s + [pad_id] * (width - len(s)) for s in seqs], torch.long, device)
    return ids, upload([[True] * len(s) + [False] * (width - len(s)) for s in seqs], torch.bool, device)


@dataclass
class Pending:
    """A launched step: the requests that ran it, each with its first row, beam group (-1: one row) and step index
    at launch; its choices on the device and their copy to the host; rows, beam groups and places per group."""

    ran: list[tuple[Seq, int, int, int]]
    picked: Picked
    readback: Readback
    rows: int
    groups: int
    places: int


class DecodeLoop:
    """Owns the decode state and the step in flight (depth 1 with `overlap`: step t+1 is launched before step t is
    booked; 0 without). Every change to the running requests goes through it, between steps."""

    def __init__(self, runner: Runner | nn.Module, overlap: bool = False, words: Words | None = None):
        self.runner = Eager(runner) if isinstance(runner, nn.Module) else runner  # a bare network runs eagerly
        self.overlap = overlap
        self.words = words  # the target vocabulary's word starts: glossary terms stay whole words (None: not known)
        self.state: DecodeState | None = None  # None until requests join, and again once all have left
        self.pending: Pending | None = None

    def __len__(self) -> int:
        return len(self.state.seqs) if self.state is not None else 0

    @property
    def rows(self) -> int:
        """Rows the next step runs (a beam request has one per live beam)."""
        return self.state.rows if self.state is not None else 0

    @property
    def ids(self) -> list[Hashable]:
        """Running request ids, in row order."""
        return [s.id for s in self.state.seqs] if self.state is not None else []

    def cache_tokens(self) -> int:
        """Tokens the pool holds for the running requests, from host counts (no device sync)."""
        return self.state.cache_tokens() if self.state is not None else 0

    # --- joins and leaves -------------------------------------------------------------------------------
    def prefill(self, requests: list[Request]) -> Encoded:
        """Encode new requests and project their cross-attention K/V once, and decode their forced prefixes
        teacher-forced (a glossary retry's: one pass instead of a step per token); they join with `join`."""
        src, src_mask = pad_batch([r.src for r in requests], self.runner.cfg.pad_id, self.runner.device)
        keep = [r.params.revisable for r in requests]  # encoded again to align or retry, until done
        new = Encoded(requests, *self.runner.cross_kv(self.runner.encode(src, src_mask, keep)), src_mask)
        at = [i for i, r in enumerate(requests) if r.params.prefix and r.params.beam_size > 1]  # one-row requests book
        # their tokens on the host, step by step
        if at:
            new.forced = self._forced(new, at)
        return new

    def _forced(self, new: Encoded, at: list[int]) -> Forced:
        """The forced prefixes of requests `at` of `new`, decoded teacher-forced."""
        cfg, device = self.runner.cfg, self.runner.device
        prefixes = [new.requests[i].params.prefix for i in at]
        tgt_in, _ = pad_batch([[cfg.decoder_start_id, *p[:-1]] for p in prefixes], cfg.pad_id, device)  # (m, P)
        taken, _ = pad_batch([list(p) for p in prefixes], 0, device)  # (m, P)
        idx = upload(at, torch.long, device)
        cross = (new.cross_k.index_select(1, idx), new.cross_v.index_select(1, idx))
        k, v, logits, align = self.runner.prefill(tgt_in, cross, new.src_mask.index_select(0, idx))
        logp = logits.float().log_softmax(-1).gather(-1, taken[..., None])[..., 0]  # (m, P)
        return Forced(at, k, v, logp, align)

    def join(self, new: Encoded) -> None:
        """Encoded requests join before the next step; when that fails, the running ones are as they were."""
        if self.state is None:
            self.state = DecodeState(self.runner.pool(new.cross_k), self.runner.cfg)
        try:
            self.state.add(new, self.words)
        finally:
            self._settle()

    def retain(self, ids: Iterable[Hashable]) -> None:
        """Only the requests in `ids` stay; the others leave now and get nothing more (a step in flight included)."""
        if self.state is None:
            return
        retained = set(ids)
        for s in self.state.seqs:
            s.status = RowStatus.RUNNING if s.id in retained else RowStatus.LEFT
        self.state.narrow([(s, s.width) for s in self.state.seqs if s.status is RowStatus.RUNNING])
        self._settle()

    def clear(self) -> None:
        """No running request any more; a step still in flight is never read."""
        self.state, self.pending = None, None

    # --- steps ---------------------------------------------------------------------------------------
    def step(self) -> list[StepOutput]:
        """One decode step for every row, and what each request got: from this step, or with overlap from the step
        launched before it (this one then runs while that one is booked)."""
        if not self.overlap:
            outputs = self._book(self._launch())
        else:
            pending, launched = self.pending, None
            if pending is not None:  # one-row requests whose step in flight is their last run no further step
                self.state.narrow([(s, s.width) for s in self.state.seqs if not _last_launched(s)])
            if self.state.rows:
                launched = self._launch()
            outputs = self._book(pending) if pending is not None else []
            self.pending = launched
        self._settle()
        return outputs

    def _settle(self) -> None:
        """Once every request has left, nothing is running and nothing in flight is read; the pool goes back to the
        runner for the next batch."""
        if self.state is not None and not self.state.seqs:
            self.runner.release(self.state.pool)
            self.clear()

    def _launch(self) -> Pending:
        """Queue one step's device work for every row and start copying its choices to the host."""
        st, cfg = self.state, self.runner.cfg
        table = st.prepare()
        forced = table.forced(st.row_steps(), cfg.eos_id, st.device) if table.forcing else None
        beam = {id(s): b for b, s in enumerate(st.beams())}  # each beam request's group in the step's moves
        ran = [(s, s.first, beam.get(id(s), -1), s.steps) for s in st.seqs]
        cons = st.constraints
        if cons is not None and st.placed:  # (N, V), and where each row looks in its source (N, S)
            logits, align = self.runner.step_aligned(st)
        else:
            logits, align = self.runner.step_logits(st), None
        st.count_step()
        graphs = self.runner.work
        cpu = st.device.type == "cpu"
        runs = _runs(table.beams) if cpu and table.beam is not None and table.beam.rows is not None else None
        plan = Plan(cfg, graphs.span(st.max_length, st.pool.sizes[1]), cpu, runs)
        refs = (st.pool.positions[: st.rows], st.pool.k, st.pool.v)
        args = (logits, table, st.search, cons, forced, align, self.words if cons is not None else None)
        placed_or_forced = align is not None or (cons is not None and forced is not None)
        run = graphs.eager if placed_or_forced else graphs.run  # terms placed or forced: not proven as graphs yet
        st.search, st.tokens, st.constraints, picked, flat = run(work, plan, refs, args)
        places = st.search.score.shape[1]
        return Pending(ran, picked, start_fetch(flat), st.rows, table.beam.groups if table.beam else 0, places)

    def _book(self, p: Pending) -> list[StepOutput]:
        """The step's choices read on the host and taken by the requests that ran it and are still running: what each
        got; finished ones leave, beam requests narrow to their live beams."""
        st, eos = self.state, self.runner.cfg.eos_id
        tokens, logprobs, signals, rest = unpack(p.readback.wait(), p.picked, p.rows)
        host = HostMoves.read(rest, p.groups, p.places) if p.groups else None
        outputs, ended, widths = [], [], {}
        for seq, first, b, step in p.ran:
            if seq.status is not RowStatus.RUNNING:  # it left, or finished at the step booked before
                continue
            if b >= 0:
                out = StepOutput(seq.id, stable=host.stable(b))
                widths[id(seq)] = 0 if host.done[b] else host.n[b]
                if host.done[b]:
                    ended.append((seq, out))
            else:
                token = tokens[first]
                logprob = None if logprobs is None else logprobs[first]
                said = None if signals is None or not seq.params.confidence else (signals[0][first], signals[1][first])
                result = seq.book(token, logprob, said, step, eos)
                out = StepOutput(seq.id, token, None if result is None else [result])
                if result is not None:
                    widths[id(seq)] = 0
            outputs.append(out)
        if ended:
            beams = {id(s): g for g, s in enumerate(st.beams())}
            counts = [s.params.num_hypotheses for s, _ in ended]
            found = st.search.hypotheses([beams[id(s)] for s, _ in ended], counts)
            for (_, out), hyps in zip(ended, found, strict=True):
                out.hypotheses = hyps
        if widths:  # each request's rows after the step (0: finished)
            kept = [(s, widths.get(id(s), s.width)) for s in st.seqs]
            for s, w in kept:
                s.status = RowStatus.RUNNING if w else RowStatus.FINISHED
            st.narrow([(s, w) for s, w in kept if w])
        return outputs


def _last_launched(seq: Seq) -> bool:
    """Whether a one-row request's last step is launched already, whatever it picks (its length limit)."""
    return not seq.beam and seq.steps >= seq.params.max_new_tokens


def _runs(beams: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """The rows of beam groups (first row, width each, in row order) as runs of consecutive rows (start, end)."""
    runs: list[tuple[int, int]] = []
    for first, width in beams:
        if runs and runs[-1][1] == first:
            runs[-1] = (runs[-1][0], first + width)
        else:
            runs.append((first, first + width))
    return tuple(runs)


@dataclass(frozen=True)
class Plan:
    """What a step's device work reads besides its tensors: the model's config, the positions a beam reorder copies
    per row, whether it reads device values on the host to skip work (a CPU has no device to wait for): it copies
    only the rows whose parent is another row and merges finished beams only when some finish; and on a CPU, where
    beam rows mix with others, the beam rows as runs of consecutive rows (start, end), processed in place."""

    cfg: ModelConfig
    copied: int
    sparse: bool
    runs: tuple[tuple[int, int], ...] | None = None


def work(plan: Plan, refs: tuple[Tensor, Tensor, Tensor], args: tuple) -> tuple:
    """A step's device work after the logits, on the device and without a host sync (one CUDA graph per key): logit
    processing, every row's choice, the beam step, the rows' reorder (K/V in place) and the copy for the host. `refs`:
    every row's next position (N,) (the step's own written) and the pool's self-attention K/V; `args`: the logits
    (N, V), the rows' constants, the search and constraint columns, the forced tokens, the decoder's alignment
    (N, S) when constraints are placed by it, and the vocabulary's word starts when there are constraints. Returns the
    new search columns, every row's token (N,), the new constraint columns, the choices and what the host reads,
    flat."""
    positions, k, v = refs
    logits, table, search, cons, forced, align, words = args
    cfg = plan.cfg
    steps = positions - 1  # (N,) steps each row had launched before this one
    scores, logprobs, forced_logp = _process(logits.float(), cfg, table, steps, search.history, forced, plan.runs)
    best = top = None  # (N,) every row's argmax and largest score, where the constraints need it before the choice
    if cons is not None:
        if align is not None:  # placed terms: where the decoder looks, and whether it would end the sentence here
            top, best = row_max(scores)  # (N,) each; the bans change no largest score of a row that takes one token
            mid_word = words.joins[best] if words is not None else None
            cons = cons.opened(align, mid_word, best == cfg.eos_id)
        best = constraints.ban(scores, cons, cfg.eos_id, words, best, forced)
    picked, moves, n = pick(scores, logprobs, table, steps, best, top), None, scores.shape[0]
    own = best if best is not None else picked.tokens  # (N,) every row's argmax, or None
    progress = None  # the constrained candidates' matched and met (G, K, J), and their order (G, K)
    if table.beam:
        candidates = beam_candidates(scores, search.cum, search.rank, table.beam)
        if cons is not None:
            candidates, progress = constraints.candidates(candidates, scores, search.cum, cons, table.beam, own, words)
        search, moves = beam_step(search, candidates, table.beam.knobs_at(steps), cfg.eos_id, forced_logp, plan.sparse)
    parents, source, tokens = _moved(picked.tokens, moves, table, n, scores.device)
    if moves is not None:  # beam rows take their parents' self-attention K/V, by device index
        at = table.beam.rows
        rows, from_rows = (torch.arange(n, device=scores.device), parents) if at is None else (at, parents[at])
        if plan.sparse:  # only the rows whose parent is another row (a beam mostly stays in its parent's)
            moved = (rows != from_rows).nonzero()[:, 0]
            rows, from_rows = rows.index_select(0, moved), from_rows.index_select(0, moved)
        copy_rows((k, v), rows, from_rows, plan.copied)
    search = search.extend(parents, moves, source, tokens, steps, forced_logp)
    if cons is not None:
        cons = cons.extend(parents, tokens, words, None if moves is None else cons.chosen(progress, moves, table.beam))
    return search, tokens, cons, picked, pack(picked.parts + (moves.packed() if moves else []))


def _process(
    logits: Tensor, cfg: ModelConfig, table: RowTable, steps: Tensor, history: Tensor, forced: Tensor | None,
    runs: tuple[tuple[int, int], ...] | None = None,
) -> tuple[Tensor, Tensor | None, Tensor | None]:  # fmt: skip
    """Logit processing: the scores the choice ranks (log-probabilities for beam rows, logits for the others) after
    every per-row processor (each row `steps` (N,) tokens into its output; `forced` tokens (N,), -1: none), the
    log-probabilities when any row keeps scores, and where beam rows are forced a token, its log-probability before
    the forcing scored it 0 (N,) (NaN: not forced; the other rows' values are logits, never read), which the beam
    keeps beside its tokens. `runs`: the beam rows as runs of consecutive rows, where given (a CPU)."""
    every_beam = table.beam_rows == logits.shape[0]
    logprobs = None
    if table.beam_rows and (every_beam or not table.one_row_scored):  # only beam rows keep log-probabilities
        at = table.beam.rows
        if at is None:  # written over the logits, no second (N, V) buffer (64 x 256k: 66 MB a step)
            scores = logprobs = torch.log_softmax(logits, -1, out=logits)
        elif runs is not None:  # run by run in place: no copies of the beam rows (each row's own, the same numbers)
            for run in (logits[start:end] for start, end in runs):
                torch.log_softmax(run, -1, out=run)
            scores = logprobs = logits
        else:  # the beam rows' written over theirs; the other rows' logits, which nothing books, stay
            scores = logprobs = logits.index_copy_(0, at, logits.index_select(0, at).log_softmax(-1))
    elif table.scored:
        logprobs = logits.log_softmax(-1)
        scores = logits if table.beam_rows == 0 else torch.where(table.is_beam[:, None], logprobs, logits)
    else:
        scores = logits
    forced_logp = None
    if forced is not None and table.beam_rows:
        forced_logp = scores.gather(1, forced.clamp(min=0)[:, None])[:, 0].masked_fill(forced < 0, float("nan"))
    process(scores, cfg, table, steps, history, forced)
    return scores, logprobs, forced_logp


def _moved(picked: Tensor | None, moves: Moves | None, table: RowTable, n: int, device: torch.device
           ) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """Every row after a step, on the device: its parent row, its flat index into the beam moves (-1: not a beam
    row) and its token (N,) each."""
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
