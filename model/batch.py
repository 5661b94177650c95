"""A decode batch as a value: requests join (concat) and leave (filter) between steps."""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable

import torch
from torch import Tensor

from model.cache import DecoderCache
from model.processors import apply_penalties, force, needs_penalties, suppress
from model.search import Group, Request, StepOutput
from model.transformer import Seq2SeqTransformer


def pad_batch(seqs: list[list[int]], pad_id: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """Right-pad id lists: ids (B, S) and mask (B, S), True on real tokens."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    ids = ids.to(device)
    return ids, ids.new_tensor([[j < len(s) for j in range(width)] for s in seqs], dtype=torch.bool)


class DecodeBatch:
    """Groups (one per request, in row order), their decoder cache and the last token of every row."""

    def __init__(self, groups: list[Group], cache: DecoderCache, tokens: Tensor):
        self.groups, self.cache, self.tokens = groups, cache, tokens

    @classmethod
    def prefill(cls, model: Seq2SeqTransformer, requests: list[Request]) -> DecodeBatch:
        """Encode new requests and project their cross-attention K/V once: one row each."""
        cfg, device = model.cfg, model.device
        src, src_mask = pad_batch([r.src for r in requests], cfg.pad_id, device)
        cache = model.start_cache(model.encode(src, src_mask), src_mask)
        groups = [Group(r, cfg.eos_id, cfg.decoder_start_id, _generator(r, device)) for r in requests]
        tokens = torch.full((len(requests),), cfg.decoder_start_id, dtype=torch.long, device=device)
        return cls(groups, cache, tokens)

    def __len__(self) -> int:
        return len(self.groups)

    @property
    def rows(self) -> int:
        """Rows in the batch (a beam-search request has one per live beam)."""
        return self.tokens.shape[0]

    def cache_tokens(self) -> int:
        """Tokens the cache holds (each row's source plus its decoded positions), counted without touching it."""
        return sum(g.width * (len(g.request.src) + g.steps) for g in self.groups)

    @property
    def ids(self) -> list[Hashable]:
        """Request ids in row order."""
        return [g.request.id for g in self.groups]

    def concat(self, other: DecodeBatch) -> DecodeBatch:
        """This batch's rows followed by `other`'s; consumes both (the cache grows in place)."""
        if not self.groups:
            return other
        self.cache.append_(other.cache)
        return DecodeBatch(self.groups + other.groups, self.cache, torch.cat([self.tokens, other.tokens]))

    def filter(self, keep: Iterable[Hashable]) -> DecodeBatch:
        """Only the requests whose ids are in `keep` (aborted ones leave); consumes this batch."""
        keep = set(keep)
        kept, start = [], 0
        for g in self.groups:
            if g.request.id in keep:
                kept.append((g, start, g.width, list(range(start, start + g.width))))
            start += g.width
        groups, parents = self._rearrange(kept)
        return DecodeBatch(groups, self.cache, self.tokens[parents] if parents else self.tokens[:0])

    def _rearrange(self, kept: list[tuple[Group, int, int, list[int]]]) -> tuple[list[Group], list[int]]:
        """Lay out the groups that go on, each (group, old first row, old width, parent of each new row), in the
        first rows of the cache, moving as few as possible; return them in row order with every row's parent."""
        starts = place([(start, old, g.width) for g, start, old, _ in kept])
        order = sorted(range(len(kept)), key=starts.__getitem__)
        parents, sources = [], []
        for i in order:
            g, start, old, rows = kept[i]
            parents += rows
            sources += [start + min(j, old - 1) for j in range(g.width)]  # a request's rows share one source
        self.cache.take_(parents, sources)
        return [kept[i][0] for i in order], parents

    def step(self, model: Seq2SeqTransformer) -> tuple[DecodeBatch, list[StepOutput]]:
        """Run one decoder step for every row; return the batch that goes on and what each request got."""
        cfg = model.cfg
        logits = model.decode_step(self.tokens, self.cache).float()  # (N, V)
        params = [g.params for g in self.groups for _ in range(g.width)]
        is_beam = [p.beam_size > 1 for p in params]
        n_beam = sum(is_beam)
        scored = any(p.scored for p in params)  # greedy and sampling without scores need no log-softmax
        logprobs = logits.log_softmax(-1) if scored else None
        if n_beam == len(params):
            scores = logprobs  # modified in place below: greedy rows never read logprobs at pad/start
        elif n_beam == 0:
            scores = logits
        else:
            scores = torch.where(torch.tensor(is_beam, device=logits.device)[:, None], logprobs, logits)
        scores[:, cfg.pad_id] = float("-inf")
        if cfg.decoder_start_id != cfg.eos_id:  # NLLB/M2M100 start from EOS
            scores[:, cfg.decoder_start_id] = float("-inf")
        early = [g.steps < g.params.min_new_tokens for g in self.groups for _ in range(g.width)]
        if any(early):
            suppress(scores, cfg.eos_id, torch.tensor(early, device=logits.device))
        if any(needs_penalties(p) for p in params):
            apply_penalties(scores, [h for g in self.groups for h in g.histories()], params)
        forced = [g.params.forced_token(g.steps, cfg.eos_id) for g in self.groups for _ in range(g.width)]
        if any(t is not None for t in forced):
            force(scores, forced)
        choice = picked = cands = None
        if n_beam < len(params):  # greedy rows: first maximum, and its log-probability, in one pass each
            best = scores.max(-1).indices
            choice = best.tolist()
            picked = None if logprobs is None else logprobs.gather(1, best[:, None])[:, 0].tolist()
        if n_beam:  # beam rows: each row's top 2*beam (the group's best 2*beam are among them) plus its score
            k = 2 * max(p.beam_size for p in params)
            rows = None if n_beam == len(params) else torch.tensor(is_beam, device=logits.device).nonzero()[:, 0]
            block = scores if rows is None else scores.index_select(0, rows)
            cum = torch.tensor(
                [s for g in self.groups if g.params.beam_size > 1 for s in g.scores], device=logits.device
            )
            top, idx = block.topk(min(k, block.shape[1]), dim=-1)
            cands = BeamCandidates((top + cum[:, None]).tolist(), idx.tolist(), rows)
        outputs, kept, row = [], [], 0
        for g in self.groups:
            width = g.width
            parents = g.advance(scores, logprobs, row, choice, picked, cands)
            if g.width == 0:
                outputs.append(StepOutput(g.request.id, _last(g, width), g.result()))
            else:
                kept.append((g, row, width, parents))
                outputs.append(StepOutput(g.request.id, g.beams[0][-1] if g.params.beam_size == 1 else None))
            row += width
        groups, _ = self._rearrange(kept)
        tokens = torch.tensor([b[-1] for g in groups for b in g.beams], dtype=torch.long, device=self.tokens.device)
        return DecodeBatch(groups, self.cache, tokens), outputs


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


class BeamCandidates:
    """Per beam row: its best candidates' cumulative scores and token ids (python lists), by batch row."""

    def __init__(self, scores: list[list[float]], tokens: list[list[int]], rows: Tensor | None):
        self.scores, self.tokens = scores, tokens
        self.position = None if rows is None else {r: i for i, r in enumerate(rows.tolist())}

    def row(self, r: int) -> tuple[list[float], list[int]]:
        i = r if self.position is None else self.position[r]
        return self.scores[i], self.tokens[i]


def _last(group: Group, width: int) -> int | None:
    """The token a finished one-row request produced on its final step (None for beams)."""
    if group.params.beam_size > 1 or width != 1:
        return None
    hyp = group.finished[0]
    return group.eos_id if hyp.finish_reason == "eos" else hyp.tokens[-1]


def _generator(request: Request, device: torch.device) -> torch.Generator | None:
    """A per-request random generator, seeded when the request names a seed."""
    if not request.params.sampling:
        return None
    gen = torch.Generator(device=device)
    if request.params.seed is None:
        gen.seed()
    else:
        gen.manual_seed(request.params.seed)
    return gen
