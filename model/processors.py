"""Logit processing: per-row processors turn a step's logits into the scores its token choice ranks."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from model.config import ModelConfig
from model.params import DecodeParams
from model.transfer import upload

NEG_INF = float("-inf")


def process(
    scores: Tensor,
    cfg: ModelConfig,
    params: list[DecodeParams],
    steps: list[int],
    histories: Callable[[], list[list[int]]],
) -> Tensor:
    """Every processor, in place, each row with its own parameters and the tokens it generated so far (`steps`);
    `histories` gives the rows' decoder inputs, computed only when a processor reads them."""
    scores[:, cfg.pad_id] = NEG_INF  # padding and the decoder start are never generated
    if cfg.decoder_start_id != cfg.eos_id:  # NLLB/M2M100 start from EOS
        scores[:, cfg.decoder_start_id] = NEG_INF
    early = [s < p.min_new_tokens for s, p in zip(steps, params, strict=True)]
    if any(early):
        suppress(scores, cfg.eos_id, upload(early, torch.bool, scores.device))
    if any(needs_penalties(p) for p in params):
        apply_penalties(scores, histories(), params)
    if any(p.forced_bos_id is not None or p.forced_eos for p in params):
        force(scores, [p.forced_token(s, cfg.eos_id) for s, p in zip(steps, params, strict=True)])
    return scores


def banned_ngram_tokens(history: list[int], n: int) -> list[int]:
    """Tokens that would complete an n-gram already present in `history`."""
    if n <= 0 or len(history) + 1 < n:
        return []
    prefix = tuple(history[len(history) - n + 1 :]) if n > 1 else ()
    return [history[i + n - 1] for i in range(len(history) - n + 1) if tuple(history[i : i + n - 1]) == prefix]


def banned_words(history: list[int], bad_words: tuple[tuple[int, ...], ...]) -> list[int]:
    """Last tokens of the bad word sequences whose other tokens end `history` (a one-token word: always)."""
    return [w[-1] for w in bad_words if len(w) == 1 or tuple(history[-len(w) + 1 :]) == w[:-1]]


def needs_penalties(p: DecodeParams) -> bool:
    """Whether a row's parameters ask for history-dependent processing."""
    return p.repetition_penalty != 1.0 or p.no_repeat_ngram_size > 0 or bool(p.bad_words_ids)


def apply_penalties(scores: Tensor, histories: list[list[int]], params: list[DecodeParams]) -> Tensor:
    """Repetition penalty row by row, then no-repeat n-grams and bad words of every row at once (one upload), only
    where asked for (in place)."""
    rows, banned = [], []
    for row, (history, p) in enumerate(zip(histories, params, strict=True)):
        if p.repetition_penalty != 1.0 and history:
            ids = upload(sorted(set(history)), torch.long, scores.device)
            s = scores[row, ids]
            scores[row, ids] = torch.where(s < 0, s * p.repetition_penalty, s / p.repetition_penalty)
        tokens = banned_ngram_tokens(history, p.no_repeat_ngram_size) if p.no_repeat_ngram_size else []
        tokens += banned_words(history, p.bad_words_ids) if p.bad_words_ids else []
        rows += [row] * len(tokens)
        banned += tokens
    if banned:
        at = upload([rows, banned], torch.long, scores.device)
        scores.index_put_((at[0], at[1]), scores.new_full((), NEG_INF))  # a device scalar: no copy, no sync
    return scores


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
