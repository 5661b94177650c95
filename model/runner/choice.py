"""Token choice on the device: greedy argmax, vectorised sampling and each beam group's best candidates, brought to
the host together in one copy per step."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from model.runner.rows import Beams, RowTable

NEG_INF = float("-inf")
M32 = 0xFFFFFFFF
CHUNK = 128  # row_topk's chunk where no divisor of the vocabulary from 64 to 256 fits; row_max's


@dataclass
class Picked:
    """One step's choices of the greedy and sampled rows still on the device: every row's token (N,) (beam rows'
    entries unused; None when every row is a beam row), and the parts the host reads, for one packed copy."""

    tokens: Tensor | None
    parts: list[Tensor]
    scored: bool  # the parts carry the picked tokens' log-probabilities after the tokens
    confident: bool = False  # then each row's confidence signals (`signals`): log-probability, entropy


def pick(scores: Tensor, logprobs: Tensor | None, table: RowTable, steps: Tensor, best: Tensor | None = None,
         top: Tensor | None = None) -> Picked:  # fmt: skip
    """The device part of the choice for the rows that take one token: greedy argmax and sampling (each row `steps`
    (N,) tokens into its output; `best` and `top` (N,): every row's argmax and largest score where the step has them
    already, the latter right for these rows)."""
    if table.beam_rows == scores.shape[0]:
        return Picked(None, [], False)
    if best is None:  # the largest scores with the argmax, for the signals
        top, best = row_max(scores)
    tokens = best  # (N,) first maximum; beam rows' entries go unused
    if table.sampled_at is not None:
        at = table.sampled_at
        drawn = sample(scores.index_select(0, at), table.warp, table.seeds, steps.index_select(0, at), table.filtered)
        tokens.index_copy_(0, at, drawn)
    parts = [tokens]
    if logprobs is not None:
        parts.append(logprobs.gather(1, tokens[:, None])[:, 0])
    if table.confident and table.one_rows is None:
        parts.extend(signals(scores, tokens, top))
    elif table.confident:  # only the rows that take one token: a beam output is rated from its score
        at = table.one_rows
        got = signals(*(x if x is None else x.index_select(0, at) for x in (scores, tokens, top)), own=True)
        parts.extend(scores.new_zeros(scores.shape[0]).index_copy_(0, at, x) for x in got)  # (N,) each
    return Picked(tokens, parts, logprobs is not None, table.confident)


def signals(scores: Tensor, tokens: Tensor, top: Tensor | None = None, own: bool = False) -> tuple[Tensor, Tensor]:
    """What a row's choice says of its certainty, from the scores it ranked (N, V) and its token (N,): the token's
    log-probability and the distribution's entropy (N,) each (Fomicheva et al. 2020's glass-box signals; `top` (N,):
    each row's largest score where known; `own`: the scores are a copy it may write over). Without a log-softmax: one
    exp pass and one product (entropy = log Z - E[score - best]); 64 x 8000 on 2 CPU cores: 0.27 ms against 2.3 ms
    for log-softmax, exp and entr with a top-2 margin (measured; the margin added little, so it went)."""
    best = scores.amax(-1) if top is None else top  # (N,)
    chosen = scores.gather(1, tokens[:, None])[:, 0]
    shifted = scores.sub_(best[:, None]) if own else scores - best[:, None]  # (N, V) <= 0; -inf where banned
    weights = shifted.exp()  # unnormalised probabilities
    total = weights.sum(-1)
    log_total = total.log()
    mean = shifted.nan_to_num_(neginf=0.0).mul_(weights).sum(-1) / total  # E[score - best]: banned ones weigh 0
    return chosen - best - log_total, log_total - mean


def pack(parts: list[Tensor]) -> Tensor:
    """The parts as one tensor for one copy: a lone part as it is, else all flat as float64 (exact for token ids)."""
    return parts[0] if len(parts) == 1 else torch.cat([p.double().flatten() for p in parts])


def unpack(flat: Tensor, picked: Picked, n: int) -> tuple[list[int], list[float] | None, list | None, Tensor]:
    """The host part: the picked tokens, their log-probabilities (None unless scored), the rows' signals as two lists,
    log-probabilities and entropies (None unless confident), and the rest of the copy."""
    if picked.tokens is None:
        return [], None, None, flat
    tokens = flat[:n].long().tolist()
    at = 2 * n if picked.scored else n
    logprobs = flat[n:at].tolist() if picked.scored else None
    signals = None
    if picked.confident:
        signals, at = flat[at : at + 2 * n].view(2, n).tolist(), at + 2 * n
    return tokens, logprobs, signals, flat[at:]


def beam_candidates(scores: Tensor, cum: Tensor, ranks: Tensor, beams: Beams) -> tuple[Tensor, Tensor, Tensor]:
    """Each beam group's best candidates in the order of one flat top-k over its rows (equal scores: the better-ranked
    parent first, then the lower token), from every row's scores (N, V), cumulative score and rank within its group
    (N,): cumulative scores, parent rows within the group and tokens, each (G, M)."""
    vocab, n_groups, width = scores.shape[1], beams.groups, beams.width
    per_row = min(2 * beams.size, vocab)  # a group's best 2*beam are among its rows' best 2*beam
    at = beams.rows
    block, cum, rank = (x if at is None else x.index_select(0, at) for x in (scores, cum, ranks))
    top, tok = row_topk(block, per_row)  # (Nb, C)
    grid, keys = top + cum[:, None], rank[:, None] * vocab + tok  # (Nb, C)
    if not beams.full:  # into the (G*W, C) grid, past a narrower group's rows: -inf, keys that sort last
        grid = top.new_full((n_groups * width, per_row), NEG_INF).index_copy_(0, beams.slots, grid)
        keys = tok.new_full(grid.shape, torch.iinfo(torch.long).max).index_copy_(0, beams.slots, keys)
    grid, keys = grid.view(n_groups, -1), keys.view(n_groups, -1)  # (G, W*C): padding sorts last
    by_key = keys.argsort(dim=-1, stable=True)
    by_score = grid.gather(1, by_key).argsort(dim=-1, descending=True, stable=True)[
        :, : min(2 * beams.size, grid.shape[1])
    ]
    pick = by_key.gather(1, by_score)  # (G, M) positions in the group's grid, best first
    return grid.gather(1, pick), pick // per_row, keys.gather(1, pick) % vocab


def row_max(x: Tensor) -> tuple[Tensor, Tensor]:
    """Each row's largest value and its first index (N,) each, as `max(-1)`; on a CPU in two stages, as torch's CPU
    argmax is not vectorized (113 x 8064 floats: 760 us on one thread, 390 on two; this, 130 and 90): the maxima of
    chunks of CHUNK (the columns past the last whole one a chunk of their own), the first chunk that holds the row's
    largest, then the first index of it in that chunk."""
    vocab = x.shape[1]
    if x.device.type != "cpu" or vocab < 4 * CHUNK:
        return x.max(-1)
    whole = vocab - vocab % CHUNK
    chunks = x[:, :whole].unflatten(1, (-1, CHUNK))  # (N, chunks, CHUNK), a view
    maxima = chunks.amax(-1)
    if whole < vocab:
        maxima = torch.cat([maxima, x[:, whole:].amax(-1, keepdim=True)], 1)
    top, at = maxima.max(-1)  # (N,) each: the largest, the first chunk that holds it
    if whole == vocab:
        return top, at * CHUNK + chunks[torch.arange(len(x), device=x.device), at].argmax(-1)
    cols = (at[:, None] * CHUNK + torch.arange(CHUNK, device=x.device)).clamp_(max=vocab - 1)  # (past the end: the
    return top, cols.gather(1, x.gather(1, cols).argmax(-1, keepdim=True))[:, 0]  # last column again)


def row_topk(x: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Each row's k largest values and their indices, largest first, as `topk`; over a vocabulary, in two stages:
    the maxima of equal chunks pick the k chunks that hold the k largest, then one top-k within those and the columns
    past the last whole chunk (a chunk outside them has a smaller maximum than the k-th largest); 1.9x faster on CPU at
    256 x 8000, k 8, 3.5x at 256 x 58101; NLLB's 256,206 (no divisor from 64 to 256) at 64 rows, k 8: 18 -> 3 ms
    (measured). Chunks of at least 64: the second stage's k * chunk candidates then reach the size from which torch's
    CPU top-k takes its fast path (64 * k; below it, from ~100 values up, it is several times slower)."""
    n, vocab = x.shape
    chunk = next((c for c in range(64, 257) if vocab % c == 0 and vocab // c >= 4 * k), 0)
    chunk = chunk or (CHUNK if vocab // CHUNK >= 4 * k else 0)
    if not chunk or x.device.type != "cpu":
        return x.topk(k, dim=-1)
    whole = vocab - vocab % chunk  # columns in whole chunks; the rest are always candidates
    best = x[:, :whole].unflatten(1, (-1, chunk)).amax(-1).topk(k, dim=-1).indices  # (N, k) chunks
    cols = (best[:, :, None] * chunk + torch.arange(chunk, device=x.device)).flatten(1)  # (N, k*chunk)
    if whole < vocab:
        cols = torch.cat([cols, torch.arange(whole, vocab, device=x.device).expand(n, -1)], 1)  # (N, k*chunk + tail)
    top, at = x.gather(1, cols).topk(k, dim=-1)  # (N, k)
    return top, cols.gather(1, at)


def warp(logits: Tensor, temperature: Tensor, top_k: Tensor, top_p: Tensor, filtered: bool = True) -> Tensor:
    """Temperature, then top-k (0: off; ties with the k-th stay), then nucleus (top-p) filtering, each row with its
    own values: logits (S, V), temperature and top_p (S,) float, top_k (S,) long."""
    logits = logits / temperature[:, None]
    if not filtered:
        return logits
    vocab = logits.shape[-1]
    ordered, order = logits.sort(-1, descending=True)  # (S, V)
    k = torch.where(top_k > 0, top_k.clamp(max=vocab), vocab)
    ordered = ordered.masked_fill(ordered < ordered.gather(1, (k - 1)[:, None]), NEG_INF)
    probs = ordered.softmax(-1)
    drop = (probs.cumsum(-1) - probs >= top_p[:, None]) & (top_p < 1)[:, None]  # keep the smallest prefix reaching p
    return logits.scatter(1, order, ordered.masked_fill(drop, NEG_INF))


def sample(logits: Tensor, knobs: Tensor, seeds: Tensor, steps: Tensor, filtered: bool = True) -> Tensor:
    """One token per row (S,) from its distribution warped by its temperature, top-k and top-p (`knobs` (S, 3);
    `filtered`: some row keeps only its top-k or top-p). A seeded row (`seeds` (S,), -1: none) draws its noise from
    its seed and its step (`steps` (S,)), so that it draws the same whatever its neighbours; the others from the
    default generator."""
    probs = warp(logits, knobs[:, 0], knobs[:, 1].long(), knobs[:, 2], filtered).softmax(-1)
    noise = uniform(seeds, steps, probs.shape[1]).log_().neg_()  # (S, V) ~ Exp(1)
    noise = torch.where((seeds < 0)[:, None], torch.empty_like(probs).exponential_(), noise)
    # argmax of p / E with E ~ Exp(1): the exponential race picks token i with probability p_i
    return probs.div_(noise.clamp_min_(torch.finfo(noise.dtype).tiny)).argmax(-1)


def uniform(seeds: Tensor, steps: Tensor, vocab: int) -> Tensor:
    """(S, V) uniforms in (0, 1) hashed from each row's folded seed (S,), its step (S,) and the token: counter-based,
    with no generator state for a CUDA graph to hold, and the same whatever else the device draws."""
    h = _mix(_mix(seeds & M32) ^ steps)  # (S,)
    x = _mix(_mix(h[:, None] ^ torch.arange(vocab, device=seeds.device)))  # (S, V)
    return ((x >> 8).float() + 0.5) / float(1 << 24)


def _mix(x: Tensor) -> Tensor:
    """A 32-bit integer hash of each entry (0 <= x < 2**32: the int64 products stay below 2**63)."""
    x = ((x ^ (x >> 16)) * 0x7FEB352D) & M32
    x = ((x ^ (x >> 15)) * 0x5F356495) & M32
    return x ^ (x >> 16)
