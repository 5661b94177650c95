"""The K/V pool: self-attention K/V and the position each row writes next, per row; cross-attention K/V and the source
mask, per slot (one per request, read by all of its rows). Buffers keep spare rows, slots and positions so that
requests join, leave and reorder in place, copying only the rows and slots that move."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from model.network.step import Groups, StepInputs

GROW = 32  # self-attention positions added when a row needs more
SMALL_COPY = 1 << 22  # bytes of a buffer's rows copied for all layers at once (fewer ops); more go layer by layer


def grown(x: Tensor, sizes: dict[int, int]) -> Tensor:
    """`x` zero-padded so that dimension d has at least sizes[d] entries (itself when it already has)."""
    shape = list(x.shape)
    for dim, size in sizes.items():
        shape[dim] = max(shape[dim], size)
    if shape == list(x.shape):
        return x
    out = x.new_zeros(shape)
    out[tuple(slice(0, n) for n in x.shape)] = x
    return out


def copy_rows(buffers: tuple[Tensor, ...], dst: Tensor, src: Tensor, used: int) -> None:
    """Rows dst[i] of each (L, R, H, T, D) buffer take rows src[i]'s first `used` positions, whole rows once most
    positions are used (one block each): all layers in one index of the layers' rows when the copy is at most
    SMALL_COPY bytes (fewer ops: 1.2-1.6x faster at 2-6 rows on one CPU thread; up to 4 MiB no slower in the glossary
    benchmark's steps, faster on two threads), else layer by layer (1.3-1.7x faster than indexing all at once)."""
    layers, rows, heads, positions, dim = buffers[0].shape
    whole = 3 * used >= 2 * positions
    if len(dst) * layers * heads * (positions if whole else used) * dim * buffers[0].element_size() <= SMALL_COPY:
        first = torch.arange(0, layers * rows, rows, device=dst.device)[:, None]  # (L, 1) each layer's first row
        dst, src = (first + dst).flatten(), (first + src).flatten()  # (L * n,) rows of the layers' rows
        for buf in buffers:
            flat = buf.view(layers * rows, heads, positions, dim)
            block = flat if whole else flat[:, :, :used]
            block.index_copy_(0, dst, block.index_select(0, src))
        return
    for buf in buffers:
        for i in range(buf.shape[0]):
            layer = buf[i] if whole else buf[i, :, :, :used]  # (R, H, t, D)
            layer.index_copy_(0, dst, layer.index_select(0, src))


@dataclass
class KVPool:
    """Buffers for R rows of T positions and G slots of S source positions; the static step's pool is allocated once
    (its CUDA graphs read these very tensors), an eager one grows (a quarter more rows or slots at a time)."""

    k: Tensor  # (L, R, H, T, D) self-attention keys
    v: Tensor  # (L, R, H, T, D)
    ck: Tensor  # (L, G, H, S, D) cross-attention keys
    cv: Tensor  # (L, G, H, S, D)
    mask: Tensor  # (G, S) bool, True for real source tokens
    positions: Tensor  # (R,) long: the position each row writes next (0 for rows that hold no request)
    presize: bool = True  # joins reserve the positions their requests may decode (a static pool keeps its size)

    @classmethod
    def empty(cls, like: Tensor, layers: int, heads: int, dim: int, sizes: tuple[int, int, int, int]) -> KVPool:
        """Zeroed buffers of `like`'s dtype and device for (rows, positions, slots, source positions)."""
        rows, positions, slots, source = sizes
        kv = lambda n, t: like.new_zeros(layers, n, heads, t, dim)  # noqa: E731
        mask = torch.zeros(slots, source, dtype=torch.bool, device=like.device)
        return cls(kv(rows, positions), kv(rows, positions), kv(slots, source), kv(slots, source), mask,
                   torch.zeros(rows, dtype=torch.long, device=like.device))  # fmt: skip

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        """(rows, positions, slots, source positions) it holds."""
        return self.k.shape[1], self.k.shape[3], self.ck.shape[1], self.ck.shape[3]

    def reserve(self, rows: int, positions: int, slots: int, source: int) -> None:
        """Grow to hold at least these (new buffers, the old contents copied: never during a step's capture)."""
        r, t, g, s = self.sizes
        if rows > r or positions > t:
            size = {1: max(rows, r * 5 // 4) if rows > r else r, 3: max(positions, t + GROW) if positions > t else t}
            self.k, self.v = grown(self.k, size), grown(self.v, size)
            self.positions = grown(self.positions, {0: size[1]})
        if slots > g or source > s:
            size = {1: max(slots, g * 5 // 4) if slots > g else g, 3: source}
            self.ck, self.cv = grown(self.ck, size), grown(self.cv, size)
            self.mask = grown(self.mask, {0: size[1], 1: source})

    def put_sources(self, first: int, ck: Tensor, cv: Tensor, mask: Tensor) -> None:
        """New requests' cross-attention K/V (L, n, H, s, D) and source mask (n, s) into slots [first, first + n)."""
        n, s = mask.shape
        self.ck[:, first : first + n, :, :s] = ck
        self.cv[:, first : first + n, :, :s] = cv
        self.mask[first : first + n] = False
        self.mask[first : first + n, :s] = mask

    def move_rows(self, dst: Tensor, src: Tensor, used: int) -> None:
        """Rows dst[i] take rows src[i]'s K/V (their first `used` positions) and position; on the device."""
        self.reorder(dst, src, used)
        self.positions[dst] = self.positions[src]

    def move_slots(self, dst: Tensor, src: Tensor, source: int) -> None:
        """Slots dst[i] take slot src[i]'s cross-attention K/V (first `source` positions) and mask."""
        copy_rows((self.ck, self.cv), dst, src, source)
        self.mask[dst] = self.mask[src]

    def reorder(self, rows: Tensor, parents: Tensor, used: int) -> None:
        """Rows rows[i] take the self-attention K/V of rows parents[i] (beams of one request among themselves: their
        positions are equal); on the device, no host sync."""
        copy_rows((self.k, self.v), rows, parents, used)

    def inputs(self, tokens: Tensor, extent: tuple[int, int, int], slots: int, uniform: bool, layout: Groups | None
               ) -> StepInputs:  # fmt: skip
        """A step's inputs: tokens (n,) of the first n rows over `extent` (n rows, t self positions, s source positions)
        and the first `slots` slots, read through the query layout `layout`; `uniform`: every row writes t - 1."""
        n, t, s = extent
        cross = (b[:, :slots, :, :s] for b in (self.ck, self.cv))
        return StepInputs(tokens, self.positions[:n], self.k, self.v, *cross, self.mask[:slots, :s], t, uniform, layout)
