"""The decode runtime: the decode state (`state`: every running request's rows, their device columns and the K/V
pool of `pool`), the loop that owns it with the step in flight (`loop`), the runners that run a step's network work
(`eager`, and `static`: static shapes and CUDA graphs), the cache of CUDA graphs of the step's work after the
logits (`graphs`), token choice and sampling (`choice`), beam search (`beams`)
and logit processors (`processors`) on the device, the per-row constants (`rows`), source slots (`slots`) and host
transfers (`transfer`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch
    from torch import Tensor

    from model.network.config import ModelConfig
    from model.runner.graphs import Graphs
    from model.runner.pool import KVPool
    from model.runner.state import DecodeState


class Runner(Protocol):
    """What runs a decode state's network work: `Eager` (the network at each batch's shapes) or `StaticDecoder`."""

    cfg: ModelConfig
    work: Graphs  # how the step's work after the logits runs: eagerly, or as CUDA graphs

    @property
    def device(self) -> torch.device: ...

    def encode(self, src: Tensor, src_mask: Tensor, keep: list[bool] | None = None) -> Tensor: ...

    def forget(self, src: list[int]) -> None: ...

    def cross_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]: ...

    def pool(self, like: Tensor) -> KVPool: ...

    def release(self, pool: KVPool) -> None: ...

    def step_logits(self, state: DecodeState) -> Tensor: ...

    def step_aligned(self, state: DecodeState) -> tuple[Tensor, Tensor]: ...

    def cross_attention(self, memory: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor: ...

    def decode(self, memory: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor: ...

    def prefill(
        self, tgt_in: Tensor, cross: tuple[Tensor, Tensor], src_mask: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]: ...
