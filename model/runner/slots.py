"""Source slots: every request's cross-attention K/V are stored once (its slot) and read by all of its decoder rows
(its beams); a step lays its queries out per slot so that each slot's keys and values are read once."""

from __future__ import annotations

import torch

from model.network.step import Groups
from model.runner.transfer import upload


def plan(row_slots: list[int], slots: int, width: int) -> tuple[list[int], list[int]]:
    """(gather (slots*width,), scatter (rows,)) laying rows out `width` places per slot, in row order; a slot's
    spare places repeat its first row (row 0 for a slot without rows): they are computed, never read."""
    gather, scatter = [], [0] * len(row_slots)
    for g, rows in enumerate(members(row_slots, slots)):
        for k, row in enumerate(rows):
            scatter[row] = g * width + k
        gather += padded(rows, width)
    return gather, scatter


def members(row_slots: list[int], slots: int) -> list[list[int]]:
    """Each slot's rows, in row order."""
    out: list[list[int]] = [[] for _ in range(slots)]
    for row, slot in enumerate(row_slots):
        out[slot].append(row)
    return out


def padded(rows: list[int], width: int) -> list[int]:
    """A slot's `width` places: its rows, then its first row again (row 0 for a slot without rows)."""
    return rows + [rows[0] if rows else 0] * (width - len(rows))


def width(row_slots: list[int], slots: int) -> int:
    """The most rows any slot has (0 without rows)."""
    counts = [0] * slots
    for slot in row_slots:
        counts[slot] += 1
    return max(counts, default=0)


def group(row_slots: list[int], slots: int, device: torch.device) -> Groups | None:
    """The step layout of these rows: None when row i reads slot i (one row per slot: greedy and sampling), no index
    when rows come in blocks of equal width (beams only), split where few slots have several rows on a CPU (`split`),
    else gathered; one upload."""
    w = width(row_slots, slots)
    if not w:
        return None
    if len(row_slots) == slots * w and all(slot == row // w for row, slot in enumerate(row_slots)):
        return None if w == 1 else Groups(w)
    if device.type == "cpu" and (layout := split(row_slots, slots, w, device)) is not None:
        return layout
    gather, scatter = plan(row_slots, slots, w)
    both = upload(gather + scatter, torch.long, device)
    return Groups(w, both[: len(gather)], both[len(gather) :])


def split(row_slots: list[int], slots: int, w: int, device: torch.device) -> Groups | None:
    """A two-part layout (`Groups.wide`) where the slots with several rows are few (2 Gw W < G (W - 1)): every slot's
    first row at one place, and the wide slots' rows at `w` places over their keys and values gathered each step. A
    CPU's attention costs about its places (2 CPU threads, 64 slots x 4 heads, 84 source tokens: 64 x 1 places 197
    us, 64 x 4 407 us, 64 x 5 558 us, 16 slots gathered at 4 places 152 us), so 48 greedy requests beside 16 beam
    ones no longer compute their slots 4 or 5 times; a beam row keeps its place among `w`, as alone."""
    of_slot = members(row_slots, slots)
    wide = [g for g, rows in enumerate(of_slot) if len(rows) > 1]
    if 2 * len(wide) * w >= slots * (w - 1):
        return None
    first = [(rows or [0])[0] for rows in of_slot]  # (G,) a slot without rows: row 0, computed, never read
    gather, scatter = [], [0] * len(row_slots)
    for g, rows in enumerate(of_slot):
        if len(rows) == 1:
            scatter[rows[0]] = g
    for b, g in enumerate(wide):
        for k, row in enumerate(of_slot[g]):
            scatter[row] = slots + b * w + k
        gather += padded(of_slot[g], w)
    parts = upload(first + gather + scatter + wide, torch.long, device)
    a, b, c = slots, slots + len(gather), slots + len(gather) + len(scatter)
    return Groups(1, parts[:a], parts[b:c], Groups(w, parts[a:b]), parts[c:])
