"""Decoder cache: cross-attention K/V projected once, self-attention K/V filled one position per step."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

GROW = 32  # positions added when the self-attention buffer is full


def _pad_dim(x: Tensor, dim: int, size: int) -> Tensor:
    """Zero-pad `x` along `dim` up to `size`."""
    if x.shape[dim] >= size:
        return x
    shape = list(x.shape)
    shape[dim] = size - x.shape[dim]
    return torch.cat([x, x.new_zeros(shape)], dim=dim)


@dataclass
class DecoderCache:
    """K/V for N decoding rows; every row keeps its own length, so rows that joined later coexist."""

    self_k: Tensor  # (L, N, H, T_cap, D)
    self_v: Tensor  # (L, N, H, T_cap, D)
    cross_k: Tensor  # (L, N, H, S, D)
    cross_v: Tensor  # (L, N, H, S, D)
    src_mask: Tensor  # (N, S) bool, True for real source tokens
    lengths: Tensor  # (N,) long: positions decoded so far
    max_length: int  # python copy of lengths.max(), so steps need no device sync
    uniform: bool = False  # every row has decoded max_length positions (python copy, no sync)
    spare: tuple[Tensor, Tensor] | None = None  # second self K/V buffer pair for in-place beam reorders

    @classmethod
    def create(cls, cross_k: Tensor, cross_v: Tensor, src_mask: Tensor, capacity: int = GROW) -> DecoderCache:
        """Empty self-attention buffers beside the given cross-attention K/V."""
        n_layers, n, heads, _, dim = cross_k.shape
        buf = cross_k.new_zeros(n_layers, n, heads, capacity, dim)
        lengths = torch.zeros(n, dtype=torch.long, device=cross_k.device)
        return cls(buf, buf.clone(), cross_k, cross_v, src_mask, lengths, 0, True)

    @property
    def rows(self) -> int:
        """Number of decoding rows."""
        return self.lengths.shape[0]

    @property
    def capacity(self) -> int:
        """Self-attention positions allocated per row."""
        return self.self_k.shape[3]

    def ensure_capacity(self, needed: int) -> None:
        """Grow the self-attention buffers (amortised, never per step) to hold `needed` positions."""
        if needed > self.capacity:
            size = max(needed, self.capacity + GROW)
            self.self_k = _pad_dim(self.self_k, 3, size)
            self.self_v = _pad_dim(self.self_v, 3, size)

    def write(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store one new position per row (k, v: (N, H, D)); return the keys/values to attend over."""
        t = self.max_length + 1
        if self.uniform:  # all rows write the same position: a strided copy, no index_put
            self.self_k[layer, :, :, t - 1] = k
            self.self_v[layer, :, :, t - 1] = v
        else:
            rows = torch.arange(self.rows, device=k.device)
            self.self_k[layer, rows, :, self.lengths] = k
            self.self_v[layer, rows, :, self.lengths] = v
        return self.self_k[layer, :, :, :t], self.self_v[layer, :, :, :t]  # (N, H, t, D)

    def self_mask(self) -> Tensor | None:
        """Keys each row may see at the current step (None: all of them)."""
        if self.uniform:
            return None
        t = self.max_length + 1
        pos = torch.arange(t, device=self.lengths.device)
        return (pos[None, :] <= self.lengths[:, None])[:, None, None, :]  # (N, 1, 1, t)

    def advance(self) -> None:
        """Count the position just written."""
        self.lengths += 1
        self.max_length += 1

    def select(self, index: Tensor | list[int]) -> DecoderCache:
        """Rows `index` in that order: drops finished rows and reorders beams in one gather."""
        index = torch.as_tensor(index, dtype=torch.long, device=self.lengths.device)
        lengths = self.lengths.index_select(0, index)
        src_mask = self.src_mask.index_select(0, index)
        max_length = int(lengths.max()) if len(index) else 0
        uniform = self.uniform or (len(index) > 0 and int(lengths.min()) == max_length)
        s = int(src_mask.sum(1).max()) if len(index) else 0
        t = min(self.capacity, max(max_length + GROW, GROW))
        return DecoderCache(
            self.self_k[:, :, :, :t].index_select(1, index),
            self.self_v[:, :, :, :t].index_select(1, index),
            self.cross_k[:, :, :, :s].index_select(1, index),
            self.cross_v[:, :, :, :s].index_select(1, index),
            src_mask[:, :s],
            lengths,
            max_length,
            uniform,
        )

    def reorder_(self, index: Tensor) -> None:
        """In place, row i takes row index[i]'s self-attention state; every index[i] must hold the same source
        as row i (beams of one request), so the cross-attention K/V stay as they are. Gathers only the positions
        decoded so far into a second buffer kept for the purpose (no allocation, no page faults)."""
        t = self.max_length
        if self.spare is None or self.spare[0].shape != self.self_k.shape:
            self.spare = (torch.zeros_like(self.self_k), torch.zeros_like(self.self_v))
        k, v = self.spare
        torch.index_select(self.self_k[:, :, :, :t], 1, index, out=k[:, :, :, :t])
        torch.index_select(self.self_v[:, :, :, :t], 1, index, out=v[:, :, :, :t])
        self.spare, self.self_k, self.self_v = (self.self_k, self.self_v), k, v
        if not self.uniform:
            self.lengths = self.lengths.index_select(0, index)

    def filter(self, keep: list[int]) -> DecoderCache:
        """Keep only rows `keep`."""
        return self.select(keep)

    def reorder(self, parents: Tensor | list[int]) -> DecoderCache:
        """Row i takes the state of row parents[i] (beam search)."""
        return self.select(parents)

    def concat(self, other: DecoderCache) -> DecoderCache:
        """Rows of self followed by rows of other, padded to the larger buffers."""
        t = max(self.capacity, other.capacity)
        s = max(self.src_mask.shape[1], other.src_mask.shape[1])
        cat = lambda a, b, dim, size: torch.cat([_pad_dim(a, dim, size), _pad_dim(b, dim, size)], dim=1)
        return DecoderCache(
            cat(self.self_k, other.self_k, 3, t),
            cat(self.self_v, other.self_v, 3, t),
            cat(self.cross_k, other.cross_k, 3, s),
            cat(self.cross_v, other.cross_v, 3, s),
            torch.cat([_pad_dim(self.src_mask, 1, s), _pad_dim(other.src_mask, 1, s)]),
            torch.cat([self.lengths, other.lengths]),
            max(self.max_length, other.max_length),
            self.uniform and other.uniform and self.max_length == other.max_length,
        )

    def tokens(self) -> int:
        """Tokens held: decoded self-attention positions plus source positions, over all rows."""
        return int(self.lengths.sum()) + int(self.src_mask.sum())

    def nbytes(self) -> int:
        """Bytes allocated by the K/V buffers."""
        return sum(t.numel() * t.element_size() for t in (self.self_k, self.self_v, self.cross_k, self.cross_v))
