"""Sizes of a decode state counted from the device, as oracles for the host's counts."""

from __future__ import annotations

from model.runner.state import DecodeState


def tokens(state: DecodeState) -> int:
    """Tokens held, read from the device: positions written over all live rows plus source positions over all live
    slots."""
    return int(state.pool.positions[: state.rows].sum()) + int(state.pool.mask[: len(state.seqs)].sum())
