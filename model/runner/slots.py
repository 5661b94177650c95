"""Source slots: every request's cross-attention K/V are stored once (its slot) and read by all of its decoder rows
(its beams); a step lays its queries out per slot so that each slot's keys and values are read once."""

from __future__ import annotations

import torch

from model.network.step import Groups
from model.runner.transfer import upload


def plan(row_slots: list[int], slots: int, width: int) -> tuple[list[int], list[int]]:
    """(gather (slots*width,), scatter (rows,)) laying rows out `width` places per slot, in row order; a slot's
    spare places repeat its first row (row 0 for a slot without rows): they are computed, never read."""
    members: list[list[int]] = [[] for _ in range(slots)]
    for row, slot in enumerate(row_slots):
        members[slot].append(row)
    gather, scatter = [], [0] * len(row_slots)
    for g, rows in enumerate(members):
        for k, row in enumerate(rows):
            scatter[row] = g * width + k
        gather += rows + [rows[0] if rows else 0] * (width - len(rows))
    return gather, scatter


def width(row_slots: list[int], slots: int) -> int:
    """The most rows any slot has (0 without rows)."""
    counts = [0] * slots
    for slot in row_slots:
        counts[slot] += 1
    return max(counts, default=0)


def group(row_slots: list[int], slots: int, device: torch.device) -> Groups | None:
    """The step layout of these rows: None when row i reads slot i (one row per slot: greedy and sampling), no index
    when rows come in blocks of equal width (beams only), else gathered; one upload."""
    w = width(row_slots, slots)
    if not w:
        return None
    if len(row_slots) == slots * w and all(slot == row // w for row, slot in enumerate(row_slots)):
        return None if w == 1 else Groups(w)
    gather, scatter = plan(row_slots, slots, w)
    both = upload(gather + scatter, torch.long, device)
    return Groups(w, both[: len(gather)], both[len(gather) :])
