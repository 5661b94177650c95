"""Decoder cache: cross-attention K/V projected once per request (its source slot, shared by its beams), self-attention
K/V filled one position per row and step.

The buffers keep spare rows, slots and positions, so requests join (`append_`), leave and reorder (`take_`) in place,
copying only the rows and slots that move; `select` and `concat` are the copying, value-returning forms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from model.runner.slots import group
from model.runner.transfer import upload
from model.step import Groups, StepInputs

GROW = 32  # positions added when the self-attention buffer is full
PRESIZE = 128  # self-attention positions a new cache reserves at most up front (as many as its requests may decode)


def _grown(x: Tensor, sizes: dict[int, int]) -> Tensor:
    """`x` zero-padded so that dimension d has at least sizes[d] entries (itself when it already has)."""
    shape = list(x.shape)
    for dim, size in sizes.items():
        shape[dim] = max(shape[dim], size)
    if shape == list(x.shape):
        return x
    out = x.new_zeros(shape)
    out[tuple(slice(0, n) for n in x.shape)] = x
    return out


@dataclass
class DecoderCache:
    """K/V for `rows` decoding rows reading `slots` sources, stored in the first rows and slots of buffers that may
    hold more; every row keeps its own length, so rows that joined at different steps share one batch."""

    k_buf: Tensor  # (L, R, H, T_cap, D) self-attention keys; rows [0, rows) are live
    v_buf: Tensor  # (L, R, H, T_cap, D)
    ck_buf: Tensor  # (L, G_cap, H, S_cap, D) cross-attention keys per slot; slots [0, slots) are live
    cv_buf: Tensor  # (L, G_cap, H, S_cap, D)
    mask_buf: Tensor  # (G_cap, S_cap) bool, True for real source tokens
    len_buf: Tensor  # (R,) long: positions decoded so far
    rows: int  # live rows
    # python copies of what the device holds, so that steps and row moves need no device sync:
    src_lens: list[int]  # per live slot, its source length
    starts: list[int]  # per live row, `steps` when it had decoded nothing: its length is steps - start
    row_slots: list[int]  # per live row, its slot; slots are numbered in the order of their first row
    steps: int = 0  # decode steps run
    src_len: int = 0  # longest live source: cross-attention reads positions [0, src_len)
    max_length: int = 0  # longest live length
    uniform: bool = True  # every live row has decoded max_length positions
    groups: Groups | None = None  # the query layout over the live slots (None: row i reads slot i)

    def __post_init__(self) -> None:
        self._measure()
        self.groups = group(self.row_slots, self.slots, self.len_buf.device)

    @classmethod
    def create(
        cls, cross_k: Tensor, cross_v: Tensor, src_mask: Tensor, capacity: int = GROW, rows: int = 0
    ) -> DecoderCache:
        """Empty self-attention buffers beside the given cross-attention K/V, one live row per source, with room for
        `rows` rows (beams to come) without growing."""
        n_layers, n, heads, s, dim = cross_k.shape
        buf = cross_k.new_zeros(n_layers, max(n, rows), heads, capacity, dim)
        lengths = torch.zeros(max(n, rows), dtype=torch.long, device=cross_k.device)
        rows = list(range(n))
        return cls(buf, buf.clone(), cross_k, cross_v, src_mask, lengths, n, src_mask.sum(1).tolist(), [0] * n, rows)

    # --- live views ----------------------------------------------------------------------------
    @property
    def self_k(self) -> Tensor:
        """(L, N, H, T_cap, D)"""
        return self.k_buf[:, : self.rows]

    @property
    def self_v(self) -> Tensor:
        """(L, N, H, T_cap, D)"""
        return self.v_buf[:, : self.rows]

    @property
    def slots(self) -> int:
        """Live source slots (requests)."""
        return len(self.src_lens)

    @property
    def cross_k(self) -> Tensor:
        """(L, G, H, S, D)"""
        return self.ck_buf[:, : self.slots, :, : self.src_len]

    @property
    def cross_v(self) -> Tensor:
        """(L, G, H, S, D)"""
        return self.cv_buf[:, : self.slots, :, : self.src_len]

    @property
    def src_mask(self) -> Tensor:
        """(G, S) bool"""
        return self.mask_buf[: self.slots, : self.src_len]

    @property
    def lengths(self) -> Tensor:
        """(N,) long"""
        return self.len_buf[: self.rows]

    @property
    def capacity(self) -> int:
        """Self-attention positions allocated per row."""
        return self.k_buf.shape[3]

    # --- one decode step -----------------------------------------------------------------------
    def inputs(
        self, tokens: Tensor, padded: tuple[int, int, int] | None = None, groups: Groups | None = None
    ) -> StepInputs:
        """The next step's inputs (tokens (n,)): over the live rows and positions, or `padded` to fixed (rows, self
        positions, source positions) with the padded query layout `groups`, so that nothing changes shape from one
        step to the next and the step can be captured as a CUDA graph (rows past the live ones compute unread
        garbage; keys past each row's length are masked)."""
        if padded is None:
            n, t, s, g, groups = self.rows, self.max_length + 1, self.src_len, self.slots, self.groups
            uniform = self.uniform
        else:
            (n, t, s), uniform = padded, False
            g = n if groups is None or groups.gather is None else groups.gather.numel() // groups.width
        cross = (b[:, :g, :, :s] for b in (self.ck_buf, self.cv_buf))
        mask = self.mask_buf[:g, :s]
        return StepInputs(tokens, self.len_buf[:n], self.k_buf, self.v_buf, *cross, mask, t, uniform, groups)

    def ensure_capacity(self, needed: int) -> None:
        """Grow the self-attention buffers (amortised, never per step) to hold `needed` positions."""
        if needed > self.capacity:
            size = {3: max(needed, self.capacity + GROW)}
            self.k_buf, self.v_buf = _grown(self.k_buf, size), _grown(self.v_buf, size)

    def decoded(self) -> list[int]:
        """Positions each live row has decoded (steps launched for it), from the python copies: no device sync."""
        return [self.steps - start for start in self.starts]

    def advance(self) -> None:
        """Count the position just written (live rows only: padding rows stay where they are)."""
        self.lengths.add_(1)
        self.steps += 1
        self.max_length += 1

    # --- rows join, leave and move, in place ---------------------------------------------------
    def take_(self, parents: Sequence[int]) -> None:
        """In place, live row i becomes a copy of row parents[i] (its self-attention state and its slot); rows past
        the new count are dropped, and so are the slots no row reads any more. Only rows and slots that move are
        copied: beams reordering within their request never touch its cross-attention K/V."""
        order, row_slots = self._slots_of(parents)
        self._reserve(len(parents), self.capacity, len(order), self.src_len)
        moved = self._copy_rows(parents, (self.k_buf, self.v_buf, self.len_buf), self.max_length)
        if len(parents) < self.rows:  # rows that left start again at position 0 (padded steps still compute them)
            self.len_buf[len(parents) : self.rows] = 0
        self._copy_rows(order, (self.ck_buf, self.cv_buf, self.mask_buf), self.src_len)
        if moved or len(parents) != self.rows:
            self.starts = [self.starts[i] for i in parents]
            self.rows = len(parents)
        if len(order) != self.slots or order != list(range(len(order))):
            self.src_lens = [self.src_lens[i] for i in order]
        self._regroup(row_slots)

    def reorder_(self, rows: Tensor, parents: Tensor) -> None:
        """In place, live row rows[i] takes the self-attention state of row parents[i] (both (n,) on the device, rows
        of one request among themselves: beams reordering, so slots and lengths stay); no host sync."""
        t = self.max_length
        for buf in (self.k_buf, self.v_buf):
            for i in range(buf.shape[0]):
                layer = buf[i, :, :, :t]  # (R, H, t, D)
                layer.index_copy_(0, rows, layer.index_select(0, parents))

    def append_(self, other: DecoderCache) -> None:
        """In place, other's rows and slots join after this cache's."""
        n, m, g, h = self.rows, other.rows, self.slots, other.slots
        t, s = other.max_length, other.src_len
        self._reserve(n + m, t, g + h, s)
        new, joining = slice(n, n + m), slice(g, g + h)
        self.k_buf[:, new, :, :t] = other.self_k[:, :, :, :t]
        self.v_buf[:, new, :, :t] = other.self_v[:, :, :, :t]
        self.ck_buf[:, joining, :, :s] = other.cross_k
        self.cv_buf[:, joining, :, :s] = other.cross_v
        self.mask_buf[joining] = False
        self.mask_buf[joining, :s] = other.src_mask
        self.len_buf[new] = other.lengths
        self.src_lens = self.src_lens + other.src_lens
        self.starts = self.starts + [self.steps - other.steps + start for start in other.starts]
        self.rows = n + m
        self._regroup(self.row_slots + [g + slot for slot in other.row_slots])

    def relocate_(self, home: DecoderCache) -> None:
        """Move the live rows and slots into `home`'s buffers (allocated once, large enough) and use those from now
        on; rows already there (only its slots or sources had outgrown them) are copied onto themselves."""
        home.rows, home.src_lens, home.starts, home.row_slots = 0, [], [], []
        if home.len_buf is not self.len_buf:
            home.len_buf.zero_()
        home.append_(self)
        self.k_buf, self.v_buf, self.ck_buf, self.cv_buf = home.k_buf, home.v_buf, home.ck_buf, home.cv_buf
        self.mask_buf, self.len_buf = home.mask_buf, home.len_buf

    def _reserve(self, rows: int, positions: int, slots: int, src_len: int) -> None:
        """Grow the buffers to hold at least these rows and slots (a quarter more), self and source positions."""
        row_cap, slot_cap, src_cap = self.k_buf.shape[1], self.ck_buf.shape[1], self.mask_buf.shape[1]
        if rows > row_cap or positions > self.capacity:
            size = {1: max(rows, row_cap * 5 // 4) if rows > row_cap else row_cap, 3: positions}
            self.k_buf, self.v_buf = _grown(self.k_buf, size), _grown(self.v_buf, size)
            self.len_buf = _grown(self.len_buf, {0: size[1]})
        if slots > slot_cap or src_len > src_cap:
            slots = max(slots, slot_cap * 5 // 4) if slots > slot_cap else slot_cap
            self.ck_buf, self.cv_buf = (_grown(b, {1: slots, 3: src_len}) for b in (self.ck_buf, self.cv_buf))
            self.mask_buf = _grown(self.mask_buf, {0: slots, 1: src_len})

    def _copy_rows(self, parents: Sequence[int], buffers: tuple[Tensor, ...], positions: int) -> bool:
        """Row i of each buffer (rows on dim 1, or dim 0 when it has at most 2 dims) becomes row parents[i], for
        the rows where they differ; K/V buffers copy only their first `positions` positions."""
        moved = [i for i, p in enumerate(parents) if p != i]
        if not moved:
            return False
        dst, src = upload([moved, [parents[i] for i in moved]], torch.long, self.len_buf.device)
        for buf in buffers:
            if buf.dim() <= 2:
                buf[dst] = buf[src]
                continue
            for i in range(buf.shape[0]):  # per layer (R, H, T_cap, D): 1.3-1.7x faster than indexing all at once
                used = buf[i, :, :, :positions] if 3 * positions < 2 * buf.shape[3] else buf[i]  # whole rows once most
                used.index_copy_(0, dst, used.index_select(0, src))  # positions are used: one block each (measured)
        return True

    def _slots_of(self, rows: Sequence[int]) -> tuple[list[int], list[int]]:
        """For a new cache of `rows` (old row numbers, in order): the old slot of each new slot, numbered in the order
        of their first row, and each new row's new slot."""
        old = [self.row_slots[r] for r in rows]
        order = list(dict.fromkeys(old))  # new slot j is old slot order[j]
        where = {slot: j for j, slot in enumerate(order)}
        return order, [where[slot] for slot in old]

    def _regroup(self, row_slots: list[int]) -> None:
        """Take the rows' new slots; the step layout is rebuilt (one upload) only when they changed."""
        if row_slots != self.row_slots:
            self.row_slots = row_slots
            self.groups = group(row_slots, self.slots, self.len_buf.device)
        self._measure()

    def _measure(self) -> None:
        """Recompute the longest source, the longest length and whether all are equal, from the python copies."""
        if not self.rows:
            self.src_len, self.max_length, self.uniform = 0, 0, True
            return
        first = min(self.starts)
        self.src_len, self.max_length, self.uniform = max(self.src_lens), self.steps - first, first == max(self.starts)
