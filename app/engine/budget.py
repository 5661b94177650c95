"""The row and cache-token budgets an engine core plans within: as set, or sized at start-up from the device and the
settings, so that `max_batch_size` requests of the model's default beam fit together.

With source slots a request holds its source once (cross-attention K/V, one slot) and, per beam row, its target
positions (self-attention K/V); the budgets count the cache that way."""

from __future__ import annotations

from dataclasses import dataclass

import psutil

from app.settings import Settings
from model.network.config import ModelConfig

CPU_MEMORY_SHARE = 0.5  # on CPU the reserved cache may take this share of the memory available at start-up
LOGIT_BYTES = 12  # per row and vocabulary entry on CUDA: the float32 output buffer and the step's logits/log-probs
GIB = 2**30


@dataclass(frozen=True)
class Budget:
    """Rows decoded together and cache tokens reserved, with why."""

    rows: int
    tokens: int
    reason: str


def target_positions(s: Settings, cfg: ModelConfig) -> int:
    """Self-attention positions one row can use: max_new_tokens within the model's positions (the static buffers hold
    exactly this per row)."""
    return min(s.max_new_tokens, cfg.max_positions)


def cache_tokens(s: Settings, cfg: ModelConfig, rows: int) -> int:
    """Cache tokens `rows` rows of `max_batch_size` requests can use: a source slot of max_input_tokens per request,
    target positions per row."""
    return s.max_batch_size * s.max_input_tokens + rows * target_positions(s, cfg)


def token_bytes(cfg: ModelConfig, element_size: int) -> int:
    """Bytes of one cache token: its key and value in every decoder layer."""
    return 2 * cfg.decoder_layers * cfg.n_heads * cfg.head_dim * element_size


def row_bytes(s: Settings, cfg: ModelConfig, element_size: int) -> int:
    """Device bytes one more static row takes: its target positions' K/V and its step's logits (an estimate)."""
    return target_positions(s, cfg) * token_bytes(cfg, element_size) + cfg.tgt_vocab_size * LOGIT_BYTES


def cuda_cache_memory(free: int, total: int, utilization: float) -> int:
    """Bytes the static buffers may take: what is free after the weights, less the share of the device that
    gpu_memory_utilization leaves to others (as vLLM's setting of that name)."""
    return max(0, free - round(total * (1 - utilization)))


def available_memory() -> int:
    """Bytes of memory available now (Linux's MemAvailable: free plus reclaimable)."""
    return psutil.virtual_memory().available


def cuda_rows(s: Settings, cfg: ModelConfig, element_size: int, memory: int) -> tuple[int, str]:
    """Static rows on CUDA: max_batch_size x max_beam_size, or fewer when `memory` (bytes for the buffers) holds less
    once the source slots (max_batch_size x max_input_tokens) are taken; at least one."""
    cap = s.max_batch_size * s.max_beam_size
    slots = s.max_batch_size * s.max_input_tokens * token_bytes(cfg, element_size)
    per_row = row_bytes(s, cfg, element_size)
    fits = max(memory - slots, 0) // per_row
    where = f"{memory / GIB:.1f} GiB for the cache ({per_row / 2**20:.2f} MiB per row)"
    if fits >= cap:
        return cap, f"max_batch_size x max_beam_size rows, within {where}"
    return max(fits, 1), f"rows that fit in {where}"


def batch_budget(s: Settings, cfg: ModelConfig, cuda: bool, element_size: int, memory: int | None) -> Budget:
    """The budgets for a model on CUDA or CPU. `memory`: on CUDA the bytes the static buffers may take
    (cuda_cache_memory), on CPU the memory available (the cache may take CPU_MEMORY_SHARE of it); None: unknown.
    Rows by default: on CPU max_batch_size x max_beam_size (the cache grows as it needs), on CUDA what fits in
    `memory`, at most that. Tokens by default: what those rows and max_batch_size source slots can use (on CPU within
    the memory share), so that only real memory, never the accounting, splits a load into waves."""
    if s.max_batch_rows is not None:
        rows, why_rows = s.max_batch_rows, "rows as set"
    elif cuda and memory is not None:
        rows, why_rows = cuda_rows(s, cfg, element_size, memory)
    else:
        rows, why_rows = s.max_batch_size * s.max_beam_size, "max_batch_size x max_beam_size rows"
    if s.max_batch_tokens is not None:
        return Budget(rows, s.max_batch_tokens, f"{why_rows}; tokens as set")
    usable = cache_tokens(s, cfg, rows)
    why = (
        f"{why_rows}; tokens: {s.max_batch_size} sources x {s.max_input_tokens} (max_input_tokens) + {rows} rows x "
        f"{target_positions(s, cfg)} (max_new_tokens within the model's positions)"
    )
    if cuda or memory is None:
        return Budget(rows, usable, why + (" in the static buffers" if cuda else ""))
    fits = int(memory * CPU_MEMORY_SHARE) // token_bytes(cfg, element_size)
    if fits < usable:
        share = f"{CPU_MEMORY_SHARE:.0%} of {memory / GIB:.1f} GiB available memory"
        return Budget(rows, max(fits, 1), f"{why_rows}; tokens: {share}")
    return Budget(rows, usable, why + f", within {CPU_MEMORY_SHARE:.0%} of available memory")
