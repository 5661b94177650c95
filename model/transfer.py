"""Host <-> device copies that do not stall the device: small uploads through pinned memory, one fetch per step."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def upload(values: Sequence | Tensor, dtype: torch.dtype, device: torch.device) -> Tensor:
    """Host values on `device`; on CUDA through pinned memory without waiting (a pageable copy would sync)."""
    host = values if isinstance(values, Tensor) else torch.tensor(values, dtype=dtype)
    if device.type != "cuda":
        return host.to(device=device, dtype=dtype)
    return host.to(dtype=dtype).pin_memory().to(device, non_blocking=True)


def fetch(x: Tensor) -> Tensor:
    """`x` on the host: on CUDA a non-blocking copy into pinned memory, then a wait for the stream up to it."""
    if x.device.type != "cuda":
        return x
    out = x.to("cpu", non_blocking=True)  # pinned: non_blocking device-to-host copies allocate pinned memory
    torch.cuda.current_stream(x.device).synchronize()
    return out
