"""A decode step's inputs, as the network takes them: one new position per row, the K/V buffers it writes and reads,
how rows find their source slot, and the extent it runs over. The decode runtime builds them; the network only
reads them (and writes the rows' new K/V)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Groups:
    """A step's queries laid out (G, W) over G slots: `gather` (G*W,) picks the row of every place (None when row i
    already is place i: rows in blocks of W per slot), `scatter` (n,) each row's place (None likewise). Split in two
    (`wide`, on a CPU, where few slots have several rows: a beam request among greedy ones): one place per slot (its
    first row), and `wide` laying out the rows of the slots `wide_slots` (Gw,) over those slots' keys and values,
    gathered; `scatter` then indexes the places of both, the first part's first."""

    width: int
    gather: Tensor | None = None
    scatter: Tensor | None = None
    wide: Groups | None = None
    wide_slots: Tensor | None = None

    def queries(self, q: Tensor) -> Tensor:
        """(n, H, 1, D) one query per row -> (G, H, W, D) queries per slot."""
        n, h, _, d = q.shape
        flat = q.reshape(n, h * d)  # (n, H*D): a view, the step's query has length 1
        if self.gather is not None:
            flat = flat.index_select(0, self.gather)  # (G*W, H*D)
        return flat.view(-1, self.width, h, d).transpose(1, 2)  # (G, H, W, D)

    def parts(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> list[tuple[Tensor, ...]]:
        """(queries, keys, values, mask) of each part of the layout, for a step's queries q (n, H, 1, D) over k/v and
        mask per slot: every slot's places, and where split the wide part's over the slots `wide_slots`."""
        out = [(self.queries(q), k, v, mask)]
        if self.wide is not None:
            at = self.wide_slots
            wide_mask = None if mask is None else mask.index_select(0, at)
            out.append((self.wide.queries(q), k.index_select(0, at), v.index_select(0, at), wide_mask))
        return out

    def rows(self, *parts: Tensor) -> Tensor:
        """Each part's outputs (G, H, W, D) per slot, `parts`' order -> (n, 1, H*D) one per row."""
        hd = parts[0].shape[1] * parts[0].shape[3]
        flats = [x.transpose(1, 2).reshape(-1, hd) for x in parts]  # (G*W, H*D) [, (Gw*Ww, H*D)]
        flat = flats[0] if len(flats) == 1 else torch.cat(flats)
        if self.scatter is not None:
            flat = flat.index_select(0, self.scatter)  # (n, H*D)
        return flat[:, None]


@dataclass
class StepInputs:
    """One decode step over n rows: each row's token and the position it writes, the self-attention buffers (rows
    [0, n) are the step's; positions [0, span) are attended, those past a row's own masked unless `uniform`), the
    cross-attention K/V and source mask of the slots the rows read, and how the rows read them."""

    tokens: Tensor  # (n,) long
    positions: Tensor  # (n,) long
    self_k: Tensor  # (L, R, H, T_cap, D)
    self_v: Tensor  # (L, R, H, T_cap, D)
    cross_k: Tensor  # (L, g, H, s, D)
    cross_v: Tensor  # (L, g, H, s, D)
    src_mask: Tensor  # (g, s) bool, True for real source tokens
    span: int  # self-attention positions attended
    uniform: bool  # every row writes position span - 1: a strided write, no mask
    groups: Groups | None  # the rows' query layout over the slots (None: row i reads slot i)

    @property
    def rows(self) -> int:
        """Rows the step computes."""
        return self.tokens.shape[0]

    def write(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Store one new position per row (k, v: (n, H, D)); return the keys and values to attend over (n, H, t, D)."""
        n, t = self.rows, self.span
        keys, values = self.self_k[layer, :n], self.self_v[layer, :n]  # (n, H, T_cap, D)
        if self.uniform:
            keys[:, :, t - 1] = k
            values[:, :, t - 1] = v
        else:
            rows = torch.arange(n, device=k.device)
            keys[rows, :, self.positions] = k
            values[rows, :, self.positions] = v
        return keys[:, :, :t], values[:, :, :t]

    def self_visible(self) -> Tensor | None:
        """(n, 1, 1, t) bool: the keys each row may see (None: all of them)."""
        if self.uniform:
            return None
        pos = torch.arange(self.span, device=self.positions.device)
        return (pos[None, :] <= self.positions[:, None])[:, None, None, :]

    def cross(self, layer: int) -> tuple[Tensor, Tensor]:
        """This layer's cross-attention keys and values, each (g, H, s, D)."""
        return self.cross_k[layer], self.cross_v[layer]
