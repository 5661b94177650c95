"""Host <-> device copies that do not stall the device: small uploads through pinned memory, one fetch per step, and
readbacks that are started now and waited on later (the overlap scheduler)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor


def upload(values: Sequence | Tensor, dtype: torch.dtype, device: torch.device) -> Tensor:
    """Host values on `device`; on CUDA through pinned memory without waiting (a pageable copy would sync)."""
    host = values if isinstance(values, Tensor) else torch.tensor(values, dtype=dtype)
    if device.type != "cuda":
        return host.to(device=device, dtype=dtype)
    return host.to(dtype=dtype).pin_memory().to(device, non_blocking=True)


@dataclass
class Readback:
    """A device tensor on its way to the host: on CUDA a non-blocking copy into pinned memory and an event recorded on
    the stream right after it; elsewhere (no asynchrony) the tensor itself and no event."""

    host: Tensor
    event: torch.cuda.Event | None = None

    def wait(self) -> Tensor:
        """The host tensor, once the copy has landed (waits for the device up to the copy only, not beyond)."""
        if self.event is not None:
            self.event.synchronize()
        return self.host


def start_fetch(x: Tensor) -> Readback:
    """Start copying `x` to the host without waiting: work enqueued after it (the next step) does not delay it."""
    if x.device.type != "cuda":
        return Readback(x)
    host = x.to("cpu", non_blocking=True)  # pinned: non_blocking device-to-host copies allocate pinned memory
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(x.device))
    return Readback(host, event)


def fetch(x: Tensor) -> Tensor:
    """`x` on the host: on CUDA a non-blocking copy into pinned memory, then a wait for the stream up to it."""
    return start_fetch(x).wait()


def upload_parts(parts: list[Sequence], device: torch.device) -> list[Tensor]:
    """Lists (flat or of equal rows) on `device` in one upload, each as float64 in its own shape (exact for ids and
    flags; cast on the device)."""
    if not parts:
        return []
    host = [torch.tensor(p, dtype=torch.float64) for p in parts]
    flat = upload(torch.cat([h.flatten() for h in host]), torch.float64, device)
    return [x.view(h.shape) for x, h in zip(flat.split([h.numel() for h in host]), host, strict=True)]
