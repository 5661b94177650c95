"""The decode step at static shapes, and on CUDA captured once per shape as a CUDA graph and replayed.

Rows are padded up to a few sizes, K/V live in buffers allocated once (self-attention for `max_rows` rows to a fixed
capacity, cross-attention for `max_slots` source slots, one per request, to a fixed source length) and attention
runs over one of a few spans, so a step's tensors keep their shapes and addresses from one step to the next.
Cross-attention reads one slot per row (greedy and sampling) or, when a request has several rows (beams), each row's
query is gathered into `max_width` places per slot (over the padded row count's slots, at most `max_slots`) through
index buffers that are filled in place. As vLLM's and SGLang's graph runners do, a batch runs the graph of the next
captured size; a batch above the largest size, or one whose pool outgrew the buffers (it then runs on grown copies
until it empties), runs the eager step at its exact shapes.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import itertools
import weakref
from typing import TYPE_CHECKING

import torch
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from model.network.step import Groups, StepInputs
from model.network.transformer import Seq2SeqTransformer
from model.runner.eager import Eager
from model.runner.graphs import Graphs
from model.runner.pool import KVPool
from model.runner.slots import plan
from model.runner.transfer import upload

if TYPE_CHECKING:
    from model.runner.state import DecodeState

# attention kernels whose plans do not depend on the shapes (cuDNN's are built per new shape: 55 -> 19 ms per step on
# an H100 under continuous batching once it was off)
STABLE_ATTENTION = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
MIN_SPAN = 32


def row_sizes(max_rows: int) -> list[int]:
    """Padded row counts: 1, 2, 4, 8, 16, every 16 up to 64, every 32 beyond, and max_rows itself."""
    sizes = [s for s in (1, 2, 4, 8, 16, 32, 48, 64) if s < max_rows]
    sizes += range(96, max_rows, 32)
    return [*sizes, max_rows]


def span_sizes(limit: int) -> list[int]:
    """Attention spans (positions attended, self and source alike): powers of two from MIN_SPAN, and limit itself."""
    spans = []
    while (MIN_SPAN << len(spans)) < limit:
        spans.append(MIN_SPAN << len(spans))
    return [*spans, limit]


class StaticDecoder:
    """The model with a static-shape decode step over a pool allocated once: every step of a batch that fits runs
    padded, a CUDA graph replay where one was captured."""

    def __init__(
        self, model: Seq2SeqTransformer, max_rows: int, max_positions: int, max_source: int, max_width=8, max_slots=0
    ):
        cfg = model.cfg
        self.model, self.cfg, self.eager = model, cfg, Eager(model)
        self.positions = min(max_positions, cfg.max_positions)  # self-attention capacity per row
        self.source = max_source
        self.rows, self.spans = row_sizes(max_rows), span_sizes(max(self.positions, self.source))
        self.widths = sorted({1, max_width})  # 1: row i reads slot i; else every slot has max_width query places
        # source slots (0: one per row): a padded step of one row per slot reads as many slots as it has rows
        self.slots = self.rows[bisect.bisect_left(self.rows, min(max_slots or max_rows, max_rows))]
        weight = model.out_proj.weight
        sizes = (max_rows, self.positions, self.slots, self.source)
        self.home = KVPool.empty(weight, cfg.decoder_layers, cfg.n_heads, cfg.head_dim, sizes)  # the graphs read it
        self.tokens = torch.zeros(max_rows, dtype=torch.long, device=weight.device)  # (R,) inputs of a step
        self.gather = torch.zeros(self.slots * max_width, dtype=torch.long, device=weight.device)  # (G*W,) places
        self.scatter = torch.zeros(max_rows, dtype=torch.long, device=weight.device)  # (R,) each row's place
        self.planned: tuple[int, list[int]] | None = None  # (rows, row slots) the index buffers hold
        self.logits = torch.zeros(max_rows, cfg.tgt_vocab_size, device=weight.device)  # (R, V) float32 outputs
        self.graphs: dict[tuple[int, int, int], torch.cuda.CUDAGraph] = {}
        self.lent: weakref.ref[KVPool] | None = None  # the pool over the static buffers a batch holds
        self.work = Graphs()  # the step's work after the logits: as CUDA graphs once `capture` ran

    @property
    def device(self) -> torch.device:
        """The model's device."""
        return self.model.device

    def encode(self, src: Tensor, src_mask: Tensor, keep: list[bool] | None = None) -> Tensor:
        """The model's encoder, on attention kernels with stable plans (`Eager.encode`)."""
        with self.attention():
            return self.eager.encode(src, src_mask, keep)

    def forget(self, src: list[int]) -> None:
        """A source kept no longer (its request is done)."""
        self.eager.forget(src)

    def cross_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Every decoder layer's cross-attention K/V of `memory`, each (L, B, H, S, D)."""
        return self.model.cross_kv(memory)

    def pool(self, like: Tensor) -> KVPool:
        """The static buffers for a new batch, unless another batch still holds them (that one then runs eagerly)."""
        if self.lent is not None and self.lent() is not None:
            return self.eager.pool(like)
        self.home.positions.zero_()
        pool = dataclasses.replace(self.home, presize=False)  # its own view: growing it leaves the buffers alone
        self.lent = weakref.ref(pool)
        return pool

    def release(self, pool: KVPool) -> None:
        """A finished batch's pool: the static buffers free for the next batch, or the eager one kept."""
        if self.lent is not None and self.lent() is pool:
            self.lent = None
        else:
            self.eager.release(pool)

    @staticmethod
    def attention() -> contextlib.AbstractContextManager:
        """Scaled-dot-product attention without the backends that plan per shape."""
        return sdpa_kernel(STABLE_ATTENTION)

    def step_logits(self, state: DecodeState) -> Tensor:
        """One step of the state's rows: padded to static shapes when they fit the buffers; logits (N, V)."""
        key = self._key(state)
        if key is None:
            with self.attention():
                return self.eager.step_logits(state)
        n = state.rows
        self.tokens[:n].copy_(state.tokens)
        layout = self._groups(key[0], key[2], state.row_slots)  # refills the index buffers that the graphs read
        if key in self.graphs:
            self.graphs[key].replay()
        else:
            with self.attention():
                self._forward(self._inputs(key, layout))
        return self.logits[:n]

    def step_aligned(self, state: DecodeState) -> tuple[Tensor, Tensor]:
        """`step_logits` with the decoder's alignment (N, S): eagerly at the state's own shapes (a batch whose
        glossary terms are placed by alignment is not captured)."""
        with self.attention():
            return self.eager.step_aligned(state)

    def cross_attention(self, memory: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced, the decoder's alignment at every target position over the source (B, T, S)."""
        return self.eager.cross_attention(memory, src_mask, tgt_in)

    def decode(self, memory: Tensor, src_mask: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced, the decoder's logits at every target position (B, T, V)."""
        return self.eager.decode(memory, src_mask, tgt_in)

    def prefill(
        self, tgt_in: Tensor, cross: tuple[Tensor, Tensor], src_mask: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """Teacher-forced over forced prefixes, eagerly (`Eager.prefill`)."""
        with self.attention():
            return self.eager.prefill(tgt_in, cross, src_mask)

    def _inputs(self, key: tuple[int, int, int], layout: Groups | None) -> StepInputs:
        """The padded step's inputs for `key` (rows, span, width) over the static buffers, read through `layout`."""
        rows, span, _ = key
        slots = rows if layout is None else layout.gather.numel() // layout.width
        extent = (rows, min(span, self.positions), min(span, self.source))
        return self.home.inputs(self.tokens[:rows], extent, slots, False, layout)

    def _forward(self, inputs: StepInputs) -> None:
        """The padded step's device work: logits of its rows into the output buffer (as float32)."""
        self.logits[: inputs.rows].copy_(self.model.step_logits(inputs))

    def _groups(self, rows: int, width: int, row_slots: list[int]) -> Groups | None:
        """The padded step's query layout over min(rows, slots) slots, in the persistent index buffers (refilled in
        place when the rows' slots changed); None when row i reads slot i."""
        if width == 1:
            return None
        slots = min(rows, self.slots)
        if self.planned != (rows, row_slots):
            gather, scatter = plan(row_slots, slots, width)
            self.gather[: slots * width].copy_(upload(gather, torch.long, self.gather.device))
            self.scatter[:rows].copy_(upload(scatter + [0] * (rows - len(scatter)), torch.long, self.gather.device))
            self.planned = (rows, list(row_slots))
        return Groups(width, self.gather[: slots * width], self.scatter[:rows])

    def keys(self) -> list[tuple[int, int, int]]:
        """Every (rows, span, width) a padded step can take, largest first: width 1 only up to `slots` rows."""
        shapes = itertools.product(*(reversed(s) for s in (self.rows, self.spans, self.widths)))
        return [(rows, span, width) for rows, span, width in shapes if width > 1 or rows <= self.slots]

    def _key(self, state: DecodeState) -> tuple[int, int, int] | None:
        """(padded rows, span, query places per slot) for the state's next step, or None when it runs eagerly at its
        own shapes (it does not fit the captured sizes, or its pool outgrew the static buffers)."""
        pool, length, source = state.pool, state.max_length + 1, state.src_len
        if pool.k is not self.home.k or pool.ck is not self.home.ck:
            return None
        if state.rows > self.rows[-1] or length > self.positions or source > self.source:
            return None
        if len(state.seqs) > self.slots:
            return None
        width = 1 if state.layout is None else self.widths[-1]
        if state.layout is not None and state.layout.width > width:
            return None
        rows = self.rows[bisect.bisect_left(self.rows, state.rows)]
        return rows, self.spans[bisect.bisect_left(self.spans, max(length, source))], width

    @torch.inference_mode()
    def capture(self) -> int:
        """Capture the padded step of every key (rows, span, width) as a CUDA graph, largest first so that the smaller
        ones reuse its memory (one pool); returns how many. Only before serving: warming up writes into the buffers."""
        if self.home.k.device.type != "cuda":
            return 0
        pool, stream = torch.cuda.graph_pool_handle(), torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), self.attention():
            for key in self.keys():
                inputs = self._inputs(key, self._groups(key[0], key[2], []))
                self._forward(inputs)  # warm-up outside the graph: kernels pick their algorithms
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool, stream=stream, capture_error_mode="thread_local"):
                    self._forward(inputs)
                self.graphs[key] = graph
        torch.cuda.current_stream().wait_stream(stream)
        self.home.positions.zero_()
        self.work = Graphs(enabled=True)  # the work after the logits: captured per key as batches meet it
        return len(self.graphs)
