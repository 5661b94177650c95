"""The decoder cache's copying forms, kept as oracles for its in-place moves: a fresh gather of rows, and sizes
counted from the device."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from model.runner.cache import DecoderCache


def select(cache: DecoderCache, index: Sequence[int]) -> DecoderCache:
    """A new compact cache of rows `index` in that order, with the slots they read (one gather each)."""
    index = list(index)
    old = [cache.row_slots[r] for r in index]
    order = list(dict.fromkeys(old))  # new slot j is old slot order[j]
    device = cache.len_buf.device
    rows, slots = (torch.tensor(at, dtype=torch.long, device=device) for at in (index, order))
    pick = lambda buf, at: buf.index_select(1 if buf.dim() > 2 else 0, at)  # noqa: E731
    return DecoderCache(
        *(pick(b, rows) for b in (cache.k_buf, cache.v_buf)),
        *(pick(b, slots) for b in (cache.ck_buf, cache.cv_buf, cache.mask_buf)),
        pick(cache.len_buf, rows),
        rows=len(index),
        src_lens=[cache.src_lens[s] for s in order],
        starts=[cache.starts[i] for i in index],
        row_slots=[order.index(slot) for slot in old],
        steps=cache.steps,
    )


def tokens(cache: DecoderCache) -> int:
    """Tokens held, read from the device: decoded positions over all live rows plus source positions over all slots."""
    return int(cache.lengths.sum()) + int(cache.src_mask.sum())


def nbytes(cache: DecoderCache) -> int:
    """Bytes allocated by the K/V buffers."""
    return sum(t.numel() * t.element_size() for t in (cache.k_buf, cache.v_buf, cache.ck_buf, cache.cv_buf))
