"""Encoder outputs of the sources of requests still being decoded, by their ids. A glossary request's source is
encoded again to align its output (`align`), to score its terms' agreement and for each retry: up to four encoder
passes of one source. Kept here from its first pass until its request is done (`forget`; a byte budget, the least
recent first out, bounds what is never forgotten), each is encoded once; a later request with the same text is
encoded again, as without."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import torch
from torch import Tensor

BUDGET = 32 << 20  # bytes of encoder outputs kept (the built-in model: ~30 KB a 40-token source; NLLB-600M ~160 KB)


class Memories:
    """An encoder with some outputs kept: `encode` gives what the encoder gives, encoding only sources it has not
    kept."""

    def __init__(self, budget: int = BUDGET):
        self.kept: OrderedDict[tuple[int, ...], Tensor] = OrderedDict()  # source ids -> memory (S, d_model)
        self.budget, self.bytes = budget, 0

    def encode(
        self, encoder: Callable[[Tensor, Tensor], Tensor], src: Tensor, src_mask: Tensor, keep: list[bool] | None = None
    ) -> Tensor:  # fmt: skip
        """Memory (B, S, d_model) of sources src (B, S) with src_mask (B, S), zeros past each source's end; those of
        rows `keep` kept until forgotten."""
        if not self.kept and not (keep and any(keep)):
            return encoder(src, src_mask)  # nothing to read or keep: no copy of the ids to the host
        lens = src_mask.sum(1).tolist()
        keys = [tuple(row[:n]) for row, n in zip(src.tolist(), lens, strict=True)]
        missing = [i for i, k in enumerate(keys) if k not in self.kept]
        fresh = None
        if missing:
            whole = len(missing) == len(keys)
            at = None if whole else torch.tensor(missing, device=src.device)
            fresh = encoder(src, src_mask) if whole else encoder(src.index_select(0, at), src_mask.index_select(0, at))
            for j, i in enumerate(missing):
                if keep is not None and keep[i]:
                    self._keep(keys[i], fresh[j, : lens[i]].clone())
            if whole:
                return fresh
        out = None
        for i, key in enumerate(keys):
            memory = self.kept.get(key)
            if memory is None:  # evicted by this very batch: its fresh row
                memory = fresh[missing.index(i), : lens[i]]
            else:
                self.kept.move_to_end(key)
            if out is None:
                out = memory.new_zeros(len(keys), src.shape[1], memory.shape[-1])
            out[i, : lens[i]] = memory
        return out

    def forget(self, src: list[int]) -> None:
        """A source's memory no longer kept (its request is done)."""
        memory = self.kept.pop(tuple(src), None)
        if memory is not None:
            self.bytes -= memory.numel() * memory.element_size()

    def _keep(self, key: tuple[int, ...], memory: Tensor) -> None:
        """Keep one source's memory, the least recent ones out while over the budget."""
        if key in self.kept:
            return
        self.kept[key] = memory
        self.bytes += memory.numel() * memory.element_size()
        while self.bytes > self.budget and len(self.kept) > 1:
            _, old = self.kept.popitem(last=False)
            self.bytes -= old.numel() * old.element_size()
