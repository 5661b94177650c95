"""The row and cache-token budgets an engine core plans within: as set, or sized at start-up from the device and the
settings, so that `max_batch_size` requests of the model's default beam fit together."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from app.settings import Settings
from model.config import ModelConfig

CPU_MEMORY_SHARE = 0.5  # on CPU the reserved cache may take this share of the memory available at start-up
MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True)
class Budget:
    """Rows decoded together and cache tokens reserved, with why."""

    rows: int
    tokens: int
    reason: str


def batch_rows(s: Settings, cuda: bool) -> int:
    """Rows: as set; else on CUDA what the static buffers are built for, max(max_batch_size, max_beam_size), and on
    CPU, where the cache grows as it needs, max_batch_size x max_beam_size (any max_batch_size requests fit)."""
    if s.max_batch_rows is not None:
        return s.max_batch_rows
    return max(s.max_batch_size, s.max_beam_size) if cuda else s.max_batch_size * s.max_beam_size


def row_tokens(s: Settings, cfg: ModelConfig) -> int:
    """Cache tokens one row can use: its source (max_input_tokens) and its target (max_new_tokens, within the
    model's positions); the static buffers hold exactly this per row."""
    return s.max_input_tokens + min(s.max_new_tokens, cfg.max_positions)


def token_bytes(cfg: ModelConfig, element_size: int) -> int:
    """Bytes of one cache token: its key and value in every decoder layer."""
    return 2 * cfg.decoder_layers * cfg.n_heads * cfg.head_dim * element_size


def available_memory() -> int | None:
    """Bytes of memory available now (MemAvailable), or None where that is unknown."""
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def batch_budget(s: Settings, cfg: ModelConfig, cuda: bool, element_size: int, memory: int | None) -> Budget:
    """The budgets for a model on CUDA or CPU; tokens by default = what the rows can use (on CPU at most
    CPU_MEMORY_SHARE of `memory`), so that only real memory, never the accounting, splits a load into waves."""
    rows = batch_rows(s, cuda)
    if s.max_batch_tokens is not None:
        return Budget(rows, s.max_batch_tokens, "as set")
    usable = rows * row_tokens(s, cfg)
    why = f"{rows} rows x {row_tokens(s, cfg)} tokens (max_input_tokens + max_new_tokens)"
    if cuda or memory is None:
        return Budget(rows, usable, why + (" in the static buffers" if cuda else ""))
    fits = int(memory * CPU_MEMORY_SHARE) // token_bytes(cfg, element_size)
    if fits < usable:
        return Budget(rows, max(fits, 1), f"{CPU_MEMORY_SHARE:.0%} of {memory / 2**30:.1f} GiB available memory")
    return Budget(rows, usable, why + f", within {CPU_MEMORY_SHARE:.0%} of available memory")
