"""Logit processing: per-row processors turn a step's logits into the scores its token choice ranks."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from model.config import ModelConfig
from model.params import DecodeParams
from model.runner.transfer import upload

NEG_INF = float("-inf")


def process(scores: Tensor, cfg: ModelConfig, params: list[DecodeParams], steps: list[int], history: Tensor) -> Tensor:
    """Every processor, in place, each row with its own parameters and the tokens it generated so far (`steps`, and
    `history` (N, T) on the device: the first steps[i] of row i)."""
    scores[:, cfg.pad_id] = NEG_INF  # padding and the decoder start are never generated
    if cfg.decoder_start_id != cfg.eos_id:  # NLLB/M2M100 start from EOS
        scores[:, cfg.decoder_start_id] = NEG_INF
    early = [s < p.min_new_tokens for s, p in zip(steps, params, strict=True)]
    if any(early):
        suppress(scores, cfg.eos_id, upload(early, torch.bool, scores.device))
    if any(needs_penalties(p) for p in params):
        inputs, lengths = None, None  # one-token bad words (OPUS-MT bans its pad) read no history
        if any(needs_history(p) for p in params):
            inputs = F.pad(history[: len(params)], (1, 0), value=cfg.decoder_start_id)  # (N, 1 + T) as transformers
            lengths = upload(steps, torch.long, scores.device) + 1
        apply_penalties(scores, inputs, lengths, params)
    if any(p.forced_bos_id is not None or p.forced_eos for p in params):
        force(scores, [p.forced_token(s, cfg.eos_id) for s, p in zip(steps, params, strict=True)])
    return scores


def needs_penalties(p: DecodeParams) -> bool:
    """Whether a row's parameters ask for a penalty or a ban."""
    return p.repetition_penalty != 1.0 or p.no_repeat_ngram_size > 0 or bool(p.bad_words_ids)


def needs_history(p: DecodeParams) -> bool:
    """Whether they read the row's history (all but one-token bad words do)."""
    return p.repetition_penalty != 1.0 or p.no_repeat_ngram_size > 0 or any(len(w) > 1 for w in p.bad_words_ids)


def apply_penalties(
    scores: Tensor, inputs: Tensor | None, lengths: Tensor | None, params: list[DecodeParams]
) -> Tensor:
    """Repetition penalty, no-repeat n-grams and bad words, where asked for, in place, from each row's decoder inputs
    (N, T') of which the first lengths[i] are real (N,) (both None when no row reads them): on the device, no copy to
    the host."""
    device = scores.device
    for token in sorted({w[0] for p in params for w in p.bad_words_ids if len(w) == 1}):
        rows = [r for r, p in enumerate(params) if (token,) in p.bad_words_ids]
        if len(rows) == len(params):
            scores[:, token] = NEG_INF
        else:
            scores[:, token].index_fill_(0, upload(rows, torch.long, device), NEG_INF)
    if any(p.repetition_penalty != 1.0 for p in params):
        penalty = upload([p.repetition_penalty for p in params], scores.dtype, device)[:, None]  # (N, 1)
        past = torch.arange(inputs.shape[1], device=device) < lengths[:, None]
        ids = torch.where(past, inputs, inputs[:, :1])  # unused places repeat the start token, already in every row
        s = scores.gather(1, ids)
        scores.scatter_(1, ids, torch.where(s < 0, s * penalty, s / penalty))
    for n in sorted({p.no_repeat_ngram_size for p in params} - {0}):
        rows = upload([r for r, p in enumerate(params) if p.no_repeat_ngram_size == n], torch.long, device)
        _ban(scores, rows, *ngram_bans(inputs.index_select(0, rows), lengths.index_select(0, rows), n))
    for word in sorted({w for p in params for w in p.bad_words_ids if len(w) > 1}):
        rows = upload([r for r, p in enumerate(params) if word in p.bad_words_ids], torch.long, device)
        tail = _tail(inputs.index_select(0, rows), lengths.index_select(0, rows), len(word) - 1)  # (R, m-1)
        ends = (tail == upload(word[:-1], torch.long, device)).all(1)  # (R,)
        _ban(scores, rows, torch.full_like(rows, word[-1])[:, None], ends[:, None])
    return scores


def ngram_bans(inputs: Tensor, lengths: Tensor, n: int) -> tuple[Tensor, Tensor]:
    """Tokens that would complete an n-gram already in each row's inputs (R, T'), first lengths[i] real: the last
    token of every n-gram (R, T'-n+1) and whether its first n-1 tokens are the row's last n-1 (R, T'-n+1)."""
    if inputs.shape[1] < n:
        inputs = F.pad(inputs, (0, n - inputs.shape[1]))
    grams = inputs.unfold(1, n, 1)  # (R, P, n) every n-gram start
    inside = torch.arange(grams.shape[1], device=inputs.device) <= (lengths - n)[:, None]  # (R, P)
    match = (grams[:, :, : n - 1] == _tail(inputs, lengths, n - 1)[:, None, :]).all(2) & inside
    return grams[:, :, n - 1], match


def _tail(inputs: Tensor, lengths: Tensor, m: int) -> Tensor:
    """Each row's last m real inputs (R, m) (clamped at the start for shorter rows: they cannot match a longer
    sequence, which the callers check apart)."""
    at = (lengths[:, None] - m + torch.arange(m, device=inputs.device)).clamp(min=0)
    tail = inputs.gather(1, at)
    return tail.masked_fill((lengths < m)[:, None], -1)


def _ban(scores: Tensor, rows: Tensor, tokens: Tensor, where: Tensor) -> None:
    """scores[rows[i], tokens[i, j]] = -inf where where[i, j], in place, the others unchanged (tokens may repeat in a
    row: a minimum, so any banned copy bans); N x K work, no copy of the scores."""
    n, k = scores.shape[0], tokens.shape[1]
    index = tokens.new_zeros(n, k).index_copy_(0, rows, tokens)
    banned = torch.where(where, NEG_INF, float("inf")).to(scores.dtype)
    scores.scatter_reduce_(1, index, scores.new_full((n, k), float("inf")).index_copy_(0, rows, banned), "amin")


def force(scores: Tensor, tokens: list[int | None]) -> Tensor:
    """Rows with a forced token (not None) can take only that one: it scores 0, every other token -inf (in place),
    as transformers' ForcedBOS/ForcedEOS processors do."""
    rows = [r for r, t in enumerate(tokens) if t is not None]
    if rows:
        index, forced = upload([rows, [tokens[r] for r in rows]], torch.long, scores.device)
        scores.index_fill_(0, index, NEG_INF)
        scores.index_put_((index, forced), scores.new_zeros(()))  # a device scalar: `= 0.0` would copy and sync
    return scores


def suppress(scores: Tensor, token: int, rows: Tensor) -> Tensor:
    """Forbid `token` in the rows where `rows` is True (in place)."""
    scores[:, token].masked_fill_(rows, NEG_INF)
    return scores
