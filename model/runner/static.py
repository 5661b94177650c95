"""The decode step at static shapes, and on CUDA captured once per shape as a CUDA graph and replayed.

Rows are padded up to a few sizes, K/V live in buffers allocated once (self-attention for `max_rows` rows to a fixed
capacity, cross-attention for `max_slots` source slots, one per request, to a fixed source length) and attention
runs over one of a few spans, so a step's tensors keep their shapes and addresses from one step to the next.
Cross-attention reads one slot per row (greedy and sampling) or, when a request has several rows (beams), each row's
query is gathered into `max_width` places per slot (over the padded row count's slots, at most `max_slots`) through
index buffers that are filled in place. As vLLM's and SGLang's graph runners do, a batch runs the graph of the next
captured size; a batch above the largest size, or one that does not fit the buffers, runs the model's own eager
step at its exact shapes.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import weakref

import torch
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from model.runner.cache import DecoderCache
from model.runner.eager import Eager
from model.runner.slots import plan
from model.runner.transfer import upload
from model.step import Groups, StepInputs
from model.transformer import Seq2SeqTransformer

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
    """The model with a static-shape decode step: `decode_step(tokens, cache)` moves the cache's rows into the
    preallocated buffers once, then every step runs padded (a CUDA graph replay where one was captured)."""

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
        empty = lambda n, t: weight.new_zeros(cfg.decoder_layers, n, cfg.n_heads, t, cfg.head_dim)  # noqa: E731
        self.home = DecoderCache(
            empty(max_rows, self.positions), empty(max_rows, self.positions),
            empty(self.slots, self.source), empty(self.slots, self.source),
            torch.zeros(self.slots, self.source, dtype=torch.bool, device=weight.device),
            torch.zeros(max_rows, dtype=torch.long, device=weight.device),
            rows=0, src_lens=[], starts=[], row_slots=[],
        )  # fmt: skip
        self.tokens = torch.zeros(max_rows, dtype=torch.long, device=weight.device)  # (R,) inputs of a step
        self.gather = torch.zeros(self.slots * max_width, dtype=torch.long, device=weight.device)  # (G*W,) places
        self.scatter = torch.zeros(max_rows, dtype=torch.long, device=weight.device)  # (R,) each row's place
        self.planned: tuple[int, list[int]] | None = None  # (rows, row slots) the index buffers hold
        self.logits = torch.zeros(max_rows, cfg.tgt_vocab_size, device=weight.device)  # (R, V) float32 outputs
        self.buffer = self.home.k_buf  # the graphs read these buffers: they must never be replaced
        self.graphs: dict[tuple[int, int, int], torch.cuda.CUDAGraph] = {}
        self.owner: weakref.ref[DecoderCache] | None = None

    @property
    def device(self) -> torch.device:
        """The model's device."""
        return self.model.device

    def start_cache(self, memory: Tensor, src_mask: Tensor, capacity: int = 32, rows: int = 0) -> DecoderCache:
        """A new batch's cache, as the eager runner makes it (it moves into the static buffers at its first step)."""
        return self.eager.start_cache(memory, src_mask, capacity, rows)

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """The model's encoder, on attention kernels with stable plans."""
        with self.attention():
            return self.model.encode(src, src_mask)

    @staticmethod
    def attention() -> contextlib.AbstractContextManager:
        """Scaled-dot-product attention without the backends that plan per shape."""
        return sdpa_kernel(STABLE_ATTENTION)

    def decode_step(self, tokens: Tensor, cache: DecoderCache) -> Tensor:
        """One step of `cache`'s rows (tokens (N,)): padded to static shapes when they fit; logits (N, V)."""
        key = self._key(cache)
        if key is None:
            with self.attention():
                return self.eager.decode_step(tokens, cache)
        n = cache.rows
        self.tokens[:n].copy_(tokens)
        groups = self._groups(key[0], key[2], cache)  # refills the index buffers that the graphs read
        if key in self.graphs:
            self.graphs[key].replay()
        else:
            with self.attention():
                self._forward(self._inputs(key, cache, groups))
        cache.advance()
        return self.logits[:n]

    def _inputs(self, key: tuple[int, int, int], cache: DecoderCache, groups: Groups | None) -> StepInputs:
        """The padded step's inputs for `key` (rows, span, width) over `cache`, which lives in the static buffers,
        with its query layout `groups`."""
        rows, span, _ = key
        return cache.inputs(self.tokens[:rows], (rows, min(span, self.positions), min(span, self.source)), groups)

    def _forward(self, inputs: StepInputs) -> None:
        """The padded step's device work: logits of its rows into the output buffer (as float32)."""
        self.logits[: inputs.rows].copy_(self.model.step_logits(inputs))

    def _groups(self, rows: int, width: int, cache: DecoderCache) -> Groups | None:
        """The padded step's query layout over min(rows, slots) slots, in the persistent index buffers (refilled in
        place when the rows' slots changed); None when row i reads slot i."""
        if width == 1:
            return None
        slots = min(rows, self.slots)
        if self.planned != (rows, cache.row_slots):
            gather, scatter = plan(cache.row_slots, slots, width)
            self.gather[: slots * width].copy_(upload(gather, torch.long, self.gather.device))
            self.scatter[:rows].copy_(upload(scatter + [0] * (rows - len(scatter)), torch.long, self.gather.device))
            self.planned = (rows, list(cache.row_slots))
        return Groups(width, self.gather[: slots * width], self.scatter[:rows])

    def keys(self) -> list[tuple[int, int, int]]:
        """Every (rows, span, width) a padded step can take, largest first: width 1 only up to `slots` rows."""
        shapes = itertools.product(*(reversed(s) for s in (self.rows, self.spans, self.widths)))
        return [(rows, span, width) for rows, span, width in shapes if width > 1 or rows <= self.slots]

    def _key(self, cache: DecoderCache) -> tuple[int, int, int] | None:
        """(padded rows, span, query places per slot) for the cache's next step, or None when it runs eagerly at its
        own shapes."""
        if cache.rows > self.rows[-1] or cache.max_length + 1 > self.positions or cache.src_len > self.source:
            return None
        if cache.slots > self.slots:
            return None
        width = 1 if cache.groups is None else self.widths[-1]
        if cache.groups is not None and cache.groups.width > width:
            return None
        if not self._holds(cache):
            return None
        rows = self.rows[bisect.bisect_left(self.rows, cache.rows)]
        return rows, self.spans[bisect.bisect_left(self.spans, max(cache.max_length + 1, cache.src_len))], width

    def _holds(self, cache: DecoderCache) -> bool:
        """Whether `cache` lives in the static buffers; it moves in (one copy) when no other live cache holds them."""
        if cache.k_buf is self.buffer and cache.ck_buf is self.home.ck_buf:
            return True
        owner = self.owner() if self.owner is not None else None
        if owner is not None and owner is not cache and owner.k_buf is self.buffer:
            return False  # another batch decodes with them: this one runs eagerly
        cache.relocate_(self.home)  # also back in after its slots or sources outgrew them (then it ran eagerly)
        assert cache.k_buf is self.buffer and cache.ck_buf is self.home.ck_buf, "the static buffers grew"
        self.owner = weakref.ref(cache)
        return True

    @torch.inference_mode()
    def capture(self) -> int:
        """Capture the padded step of every key (rows, span, width) as a CUDA graph, largest first so that the smaller
        ones reuse its memory (one pool); returns how many. Only before serving: warming up writes into the buffers."""
        if self.home.k_buf.device.type != "cuda":
            return 0
        pool, stream = torch.cuda.graph_pool_handle(), torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), self.attention():
            for key in self.keys():
                inputs = self._inputs(key, self.home, self._groups(key[0], key[2], self.home))
                self._forward(inputs)  # warm-up outside the graph: kernels pick their algorithms
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool, stream=stream, capture_error_mode="thread_local"):
                    self._forward(inputs)
                self.graphs[key] = graph
        torch.cuda.current_stream().wait_stream(stream)
        return len(self.graphs)
