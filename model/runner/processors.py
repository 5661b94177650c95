"""Logit processing: per-row processors turn a step's logits into the scores its token choice ranks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

from model.network.config import ModelConfig
from model.runner.params import DecodeParams
from model.runner.transfer import upload_parts

NEG_INF = float("-inf")


def process(scores: Tensor, cfg: ModelConfig, rows: Rows, steps: Tensor, history: Tensor, forced: Tensor | None
            ) -> Tensor:  # fmt: skip
    """Every processor, in place, each row with its own parameters (`rows`: their minimum lengths and penalties) and
    the tokens it generated so far (`steps` (N,), and `history` (N, T): the first steps[i] of row i), on the device;
    the rows' `forced` tokens (N,) (-1: none) last."""
    scores[:, cfg.pad_id].fill_(NEG_INF)  # never generated, as the decoder start (`= value` makes a host tensor)
    if cfg.decoder_start_id != cfg.eos_id:  # NLLB/M2M100 start from EOS
        scores[:, cfg.decoder_start_id].fill_(NEG_INF)
    if rows.min_new is not None:
        suppress(scores, cfg.eos_id, steps < rows.min_new)
    if rows.penalties is not None:
        inputs, lengths = None, None  # one-token bad words (OPUS-MT bans its pad) read no history
        if rows.penalties.history:
            inputs = F.pad(history[: scores.shape[0]], (1, 0), value=cfg.decoder_start_id)  # (N, 1 + T)
            lengths = steps + 1
        apply_penalties(scores, inputs, lengths, rows.penalties)
    return force(scores, forced)


class Rows(Protocol):
    """What the processors read of the rows' constants (a RowTable)."""

    min_new: Tensor | None
    penalties: Penalties | None


@dataclass
class Penalties:
    """A batch's repetition penalties, no-repeat n-grams and bad words, on the device: one-token bans (token, the
    rows that ban it; None: every row), each row's repetition penalty (N, 1) (None: none asks), per n-gram size the
    rows (R,), per longer bad word its rows (R,), first tokens (m-1,) and last token; whether any reads history."""

    bans: list[tuple[int, Tensor | None]]
    repetition: Tensor | None
    ngrams: list[tuple[int, Tensor]]
    words: list[tuple[Tensor, Tensor, int]]
    history: bool

    @classmethod
    def of(cls, params: list[DecodeParams], device: torch.device) -> Penalties | None:
        """The penalties of rows with `params` (one upload); None when no row asks for any."""
        if not any(needs_penalties(p) for p in params):
            return None
        singles = sorted({w[0] for p in params for w in p.bad_words_ids if len(w) == 1})
        ban_rows = [[r for r, p in enumerate(params) if (t,) in p.bad_words_ids] for t in singles]
        partial = [rows for rows in ban_rows if len(rows) < len(params)]
        sizes = sorted({p.no_repeat_ngram_size for p in params} - {0})
        words = sorted({w for p in params for w in p.bad_words_ids if len(w) > 1})
        lists = [*partial, *([r for r, p in enumerate(params) if p.no_repeat_ngram_size == n] for n in sizes)]
        for w in words:
            lists += [[r for r, p in enumerate(params) if w in p.bad_words_ids], list(w[:-1])]
        repetition = any(p.repetition_penalty != 1.0 for p in params)
        if repetition:
            lists.append([p.repetition_penalty for p in params])
        up = iter(upload_parts(lists, device))
        bans = [
            (t, next(up).long() if len(rows) < len(params) else None) for t, rows in zip(singles, ban_rows, strict=True)
        ]
        ngrams = [(n, next(up).long()) for n in sizes]
        words_ = [(next(up).long(), next(up).long(), w[-1]) for w in words]
        penalty = next(up).float()[:, None] if repetition else None
        return cls(bans, penalty, ngrams, words_, any(needs_history(p) for p in params))


def needs_penalties(p: DecodeParams) -> bool:
    """Whether a row's parameters ask for a penalty or a ban."""
    return p.repetition_penalty != 1.0 or p.no_repeat_ngram_size > 0 or bool(p.bad_words_ids)


def needs_history(p: DecodeParams) -> bool:
    """Whether they read the row's history (all but one-token bad words do)."""
    return p.repetition_penalty != 1.0 or p.no_repeat_ngram_size > 0 or any(len(w) > 1 for w in p.bad_words_ids)


def apply_penalties(scores: Tensor, inputs: Tensor | None, lengths: Tensor | None, penalties: Penalties) -> Tensor:
    """Repetition penalty, no-repeat n-grams and bad words, where asked for, in place, from each row's decoder inputs
    (N, T') of which the first lengths[i] are real (N,) (both None when no row reads them): on the device, no copy
    either way."""
    for token, rows in penalties.bans:
        if rows is None:
            scores[:, token].fill_(NEG_INF)
        else:
            scores[:, token].index_fill_(0, rows, NEG_INF)
    if penalties.repetition is not None:
        penalty = penalties.repetition.to(scores.dtype)  # (N, 1)
        past = torch.arange(inputs.shape[1], device=scores.device) < lengths[:, None]
        ids = torch.where(past, inputs, inputs[:, :1])  # unused places repeat the start token, already in every row
        s = scores.gather(1, ids)
        scores.scatter_(1, ids, torch.where(s < 0, s * penalty, s / penalty))
    for n, rows in penalties.ngrams:
        _ban(scores, rows, *ngram_bans(inputs.index_select(0, rows), lengths.index_select(0, rows), n))
    for rows, prefix, last in penalties.words:
        tail = _tail(inputs.index_select(0, rows), lengths.index_select(0, rows), len(prefix))  # (R, m-1)
        ends = (tail == prefix).all(1)  # (R,)
        _ban(scores, rows, torch.full_like(rows, last)[:, None], ends[:, None])
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


def force(scores: Tensor, forced: Tensor | None) -> Tensor:
    """Rows with a forced token (`forced` (N,), -1: none) can take only that one: it scores 0, every other token -inf
    (in place), as transformers' ForcedBOS/ForcedEOS processors do; one masked write of the forced rows and one value
    per row, no (N, V) mask."""
    if forced is not None:
        on, at = (forced >= 0)[:, None], forced.clamp(min=0)[:, None]  # (N, 1) each
        kept = scores.gather(1, at)  # (N, 1): what an unforced row holds there, written back unchanged
        scores.masked_fill_(on, NEG_INF).scatter_(1, at, torch.where(on, 0.0, kept))
    return scores


def suppress(scores: Tensor, token: int, rows: Tensor) -> Tensor:
    """Forbid `token` in the rows where `rows` is True (in place)."""
    scores[:, token].masked_fill_(rows, NEG_INF)
    return scores
