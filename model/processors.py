"""Logit processing over a batch whose rows each carry their own parameters."""

from __future__ import annotations

import torch
from torch import Tensor

from model.params import DecodeParams

NEG_INF = float("-inf")


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
    """Repetition penalty, no-repeat n-grams and bad words, row by row, only where asked for (in place)."""
    for row, (history, p) in enumerate(zip(histories, params, strict=True)):
        if p.repetition_penalty != 1.0 and history:
            ids = torch.tensor(sorted(set(history)), device=scores.device)
            s = scores[row, ids]
            scores[row, ids] = torch.where(s < 0, s * p.repetition_penalty, s / p.repetition_penalty)
        if p.no_repeat_ngram_size:
            banned = banned_ngram_tokens(history, p.no_repeat_ngram_size)
            if banned:
                scores[row, banned] = NEG_INF
        if p.bad_words_ids and (banned := banned_words(history, p.bad_words_ids)):
            scores[row, banned] = NEG_INF
    return scores


def force(scores: Tensor, tokens: list[int | None]) -> Tensor:
    """Rows with a forced token (not None) can take only that one: it scores 0, every other token -inf (in place),
    as transformers' ForcedBOS/ForcedEOS processors do."""
    rows = [r for r, t in enumerate(tokens) if t is not None]
    if rows:
        index = torch.tensor(rows, device=scores.device)
        scores.index_fill_(0, index, NEG_INF)
        scores[index, torch.tensor([tokens[r] for r in rows], device=scores.device)] = 0.0
    return scores


def suppress(scores: Tensor, token: int, rows: Tensor) -> Tensor:
    """Forbid `token` in the rows where `rows` is True (in place)."""
    scores[:, token].masked_fill_(rows, NEG_INF)
    return scores


def warp(logits: Tensor, temperature: float, top_k: int, top_p: float) -> Tensor:
    """Temperature, then top-k, then nucleus (top-p) filtering of one row's logits (V,)."""
    logits = logits / temperature
    if 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, NEG_INF)
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop = cum - sorted_logits.softmax(-1) >= top_p  # keep the smallest prefix reaching top_p
        logits = logits.masked_fill(drop.scatter(0, order, drop), NEG_INF)
    return logits


def sample(logits: Tensor, p: DecodeParams, generator: torch.Generator | None) -> int:
    """Draw one token from a row's warped distribution with the request's own generator."""
    probs = warp(logits.float(), p.temperature, p.top_k, p.top_p).softmax(-1)
    return int(torch.multinomial(probs, 1, generator=generator))
