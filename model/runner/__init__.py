"""The decode runner: the K/V cache pool (`cache`, `slots`), the running batch (`batch`) and the loop that owns it
with the step in flight (`loop`), the static-shape step and its CUDA graphs (`static`), token choice and sampling
(`choice`), beam search (`beams`) and logit processors (`processors`) on the device, host transfers (`transfer`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch
    from torch import Tensor

    from model.config import ModelConfig
    from model.runner.cache import DecoderCache


class Runner(Protocol):
    """What runs a batch's steps: the model itself or its static-shape `StaticDecoder`."""

    cfg: ModelConfig

    @property
    def device(self) -> torch.device: ...

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor: ...

    def start_cache(self, memory: Tensor, src_mask: Tensor, capacity: int = 32, rows: int = 0) -> DecoderCache: ...

    def decode_step(self, tokens: Tensor, cache: DecoderCache) -> Tensor: ...
