"""The network run one decode step at a time at each batch's own shapes (no padding, no CUDA graphs)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from model.network.step import StepInputs
from model.network.transformer import Seq2SeqTransformer
from model.runner.graphs import Graphs
from model.runner.memories import Memories
from model.runner.pool import KVPool

if TYPE_CHECKING:
    from model.runner.state import DecodeState


class Eager:
    """A runner over the network itself: its encoder and cross-attention projections, a pool that grows with the
    batch (and is kept for the next one), and decode steps over the live rows and positions."""

    def __init__(self, model: Seq2SeqTransformer):
        self.model, self.cfg = model, model.cfg
        self.work = Graphs()  # the step's work after the logits runs eagerly
        self.spare: KVPool | None = None  # the last finished batch's pool, for the next
        self.memories = Memories()  # sources of requests still decoding (a glossary retry's, its alignment's)

    @property
    def device(self) -> torch.device:
        """The network's device."""
        return self.model.device

    def encode(self, src: Tensor, src_mask: Tensor, keep: list[bool] | None = None) -> Tensor:
        """The network's encoder: memory (B, S, d_model) (a source kept: as it was; rows `keep` kept)."""
        return self.memories.encode(self.model.encode, src, src_mask, keep)

    def forget(self, src: list[int]) -> None:
        """A source kept no longer (its request is done)."""
        self.memories.forget(src)

    def cross_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Every decoder layer's cross-attention K/V of `memory`, each (L, B, H, S, D)."""
        return self.model.cross_kv(memory)

    def pool(self, like: Tensor) -> KVPool:
        """A pool for a new batch whose K/V look like `like`, which grows as requests join: its self-attention buffers
        the last finished batch's, already grown and faulted in (a POST of 64 beam requests on the built-in model grew
        and faulted in 300 MB afresh: 18% of the engine's time); its cross-attention buffers sized by the sources that
        join, as before (an earlier batch's longer source would leave every step reading them strided)."""
        spare, self.spare, cfg = self.spare, None, self.cfg
        pool = KVPool.empty(like, cfg.decoder_layers, cfg.n_heads, cfg.head_dim, (0, 0, 0, 0))
        if spare is None or (spare.k.dtype, spare.k.device) != (like.dtype, like.device):
            return pool
        return dataclasses.replace(pool, k=spare.k, v=spare.v, positions=spare.positions)  # joining rows start at 0

    def release(self, pool: KVPool) -> None:
        """A finished batch's pool, kept for the next batch (as the static decoder keeps its buffers)."""
        self.spare = pool

    def step_logits(self, state: DecodeState) -> Tensor:
        """One decode step of the state's rows at their own shapes: logits (N, V); their new K/V written."""
        return self.model.step_logits(self._inputs(state))

    def step_aligned(self, state: DecodeState) -> tuple[Tensor, Tensor]:
        """`step_logits`, and the decoder's alignment of every row to its source (N, S) (`ModelConfig.alignment`)."""
        return self.model.step(self._inputs(state), self.cfg.alignment)

    def cross_attention(self, memory: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced, the decoder's alignment at every target position over the source (B, T, S)."""
        return self.model.cross_attention(memory, src_mask, tgt_in, self.cfg.alignment)

    def decode(self, memory: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced, the decoder's logits at every target position (B, T, V)."""
        return self.model.decode(tgt_in, memory, src_mask)

    def prefill(
        self, tgt_in: Tensor, cross: tuple[Tensor, Tensor], src_mask: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """Teacher-forced over forced prefixes (B, T) on their cross-attention K/V: self-attention K/V, logits and the
        decoder's alignment (`Seq2SeqTransformer.prefill`)."""
        return self.model.prefill(tgt_in, cross, src_mask, self.cfg.alignment)

    def _inputs(self, state: DecodeState) -> StepInputs:
        """The state's next step inputs, within the model's positions."""
        if state.max_length >= self.cfg.max_positions:
            raise ValueError(f"decoder position {state.max_length} exceeds max_positions={self.cfg.max_positions}")
        return state.inputs()
