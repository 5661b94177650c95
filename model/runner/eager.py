"""The network run one decode step at a time at each batch's own shapes (no padding, no CUDA graphs)."""

from __future__ import annotations

import torch
from torch import Tensor

from model.runner.cache import DecoderCache
from model.transformer import Seq2SeqTransformer


class Eager:
    """A runner over the network itself: its encoder, a cache for each new batch, and decode steps over the live rows
    and positions."""

    def __init__(self, model: Seq2SeqTransformer):
        self.model, self.cfg = model, model.cfg

    @property
    def device(self) -> torch.device:
        """The network's device."""
        return self.model.device

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """The network's encoder: memory (B, S, d_model)."""
        return self.model.encode(src, src_mask)

    def start_cache(self, memory: Tensor, src_mask: Tensor, capacity: int = 32, rows: int = 0) -> DecoderCache:
        """A decoder cache for these encoded rows, nothing decoded yet, with room for `rows` rows; their
        cross-attention K/V projected once."""
        return DecoderCache.create(*self.model.cross_kv(memory), src_mask, capacity, rows)

    def decode_step(self, tokens: Tensor, cache: DecoderCache) -> Tensor:
        """Feed one token per row (N,) at each row's own position; return logits (N, V); advances the cache."""
        if cache.max_length >= self.cfg.max_positions:
            raise ValueError(f"decoder position {cache.max_length} exceeds max_positions={self.cfg.max_positions}")
        cache.ensure_capacity(cache.max_length + 1)
        logits = self.model.step_logits(cache.inputs(tokens))
        cache.advance()
        return logits
