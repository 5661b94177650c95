"""A decode batch as a value: requests join (concat) and leave (filter) between steps."""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import torch
from torch import Tensor

from model.cache import DecoderCache
from model.processors import apply_penalties, suppress
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
        cfg, device = model.cfg, model.pe.device
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

    @property
    def ids(self) -> list[Hashable]:
        """Request ids in row order."""
        return [g.request.id for g in self.groups]

    def concat(self, other: DecodeBatch) -> DecodeBatch:
        """This batch's rows followed by `other`'s."""
        if not self.groups:
            return other
        return DecodeBatch(
            self.groups + other.groups, self.cache.concat(other.cache), torch.cat([self.tokens, other.tokens])
        )

    def filter(self, keep: Iterable[Hashable]) -> DecodeBatch:
        """Only the requests whose ids are in `keep` (aborted ones leave)."""
        keep = set(keep)
        rows, groups, start = [], [], 0
        for g in self.groups:
            if g.request.id in keep:
                rows.extend(range(start, start + g.width))
                groups.append(g)
            start += g.width
        return self._select(groups, rows, self.tokens[rows] if rows else self.tokens[:0])

    def _select(self, groups: list[Group], rows: list[int], tokens: Tensor, same_layout: bool = False) -> DecodeBatch:
        """A batch of `groups` whose rows come from `rows` of this one (`same_layout`: the same groups with the
        same widths, each row's parent in its own group)."""
        if rows == list(range(self.rows)):
            return DecodeBatch(groups, self.cache, tokens)
        if same_layout:
            # Same requests, same widths: only beams moved within their own request, whose rows share one
            # source, so reorder the self-attention K/V in place and leave the cross-attention K/V alone.
            self.cache.reorder_(torch.tensor(rows, dtype=torch.long, device=tokens.device))
            return DecodeBatch(groups, self.cache, tokens)
        return DecodeBatch(groups, self.cache.select(rows), tokens)

    def step(self, model: Seq2SeqTransformer) -> tuple[DecodeBatch, list[StepOutput]]:
        """Run one decoder step for every row; return the batch that goes on and what each request got."""
        cfg = model.cfg
        logits = model.decode_step(self.tokens, self.cache).float()  # (N, V)
        logprobs = logits.log_softmax(-1)
        params = [g.params for g in self.groups for _ in range(g.width)]
        widths = [g.width for g in self.groups]
        is_beam = [p.beam_size > 1 for p in params]
        n_beam = sum(is_beam)
        if n_beam == len(params):
            scores = logprobs  # modified in place below: greedy rows never read logprobs at pad/start
        elif n_beam == 0:
            scores = logits
        else:
            scores = torch.where(torch.tensor(is_beam, device=logits.device)[:, None], logprobs, logits)
        scores[:, cfg.pad_id] = float("-inf")
        scores[:, cfg.decoder_start_id] = float("-inf")
        early = [g.steps < g.params.min_new_tokens for g in self.groups for _ in range(g.width)]
        if any(early):
            suppress(scores, cfg.eos_id, torch.tensor(early, device=logits.device))
        if any(p.repetition_penalty != 1.0 or p.no_repeat_ngram_size for p in params):
            apply_penalties(scores, [h for g in self.groups for h in g.histories()], params)
        choice = picked = cands = None
        if n_beam < len(params):  # greedy rows: first maximum, and its log-probability, in one pass each
            best = scores.max(-1).indices
            choice = best.tolist()
            picked = logprobs.gather(1, best[:, None])[:, 0].tolist()
        if n_beam:  # beam rows: each row's top 2*beam (the group's best 2*beam are among them) plus its score
            k = 2 * max(p.beam_size for p in params)
            rows = None if n_beam == len(params) else torch.tensor(is_beam, device=logits.device).nonzero()[:, 0]
            block = scores if rows is None else scores.index_select(0, rows)
            cum = torch.tensor(
                [s for g in self.groups if g.params.beam_size > 1 for s in g.scores], device=logits.device
            )
            top, idx = block.topk(min(k, block.shape[1]), dim=-1)
            cands = BeamCandidates((top + cum[:, None]).tolist(), idx.tolist(), rows)
        outputs, groups, parents, new_tokens, row = [], [], [], [], 0
        for g in self.groups:
            width = g.width
            rows_ = g.advance(scores, logprobs, row, choice, picked, cands)
            row += width
            if g.width == 0:
                outputs.append(StepOutput(g.request.id, _last(g, width), g.result()))
                continue
            groups.append(g)
            parents.extend(rows_)
            new_tokens.extend(b[-1] for b in g.beams)
            outputs.append(StepOutput(g.request.id, g.beams[0][-1] if g.params.beam_size == 1 else None))
        tokens = torch.tensor(new_tokens, dtype=torch.long, device=self.tokens.device)
        same_layout = len(groups) == len(self.groups) and [g.width for g in groups] == widths
        return self._select(groups, parents, tokens, same_layout), outputs


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
