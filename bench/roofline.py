"""The decode step's roofline: the bytes a step must move and the FLOPs it must do, a device's measured copy bandwidth
and matmul rate (a GPU's here, a CPU's in bench.cpu_roofline), and a measured step as a multiple of the bound.

A step at `rows` rows reads the decoder's weights once (self-attention Q/K/V/O, cross-attention Q/O: its K/V
projections ran at prefill, the FFN, the LayerNorms, the output projection and its bias; plus one token-embedding and
one position row per row), the self-attention K/V of every row at the span, the cross-attention K/V at the source
length, and writes its logits. Its FLOPs are the matmuls' 2 x multiply-adds and attention's QK^T and AV.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from model.config import ModelConfig


@dataclass(frozen=True)
class Work:
    """What one decode step must read or write (bytes) and compute (FLOPs)."""

    weights: int  # decoder weights read once (incl. the output projection) and the rows' embedding rows
    kv: float  # self-attention K/V at the span and cross-attention K/V at the source length
    logits: int  # the (rows, vocab) logits written
    flops: float

    @property
    def bytes(self) -> float:
        """Everything the step moves."""
        return self.weights + self.kv + self.logits


def step_parameters(cfg: ModelConfig) -> int:
    """Parameters one decode step reads: every decoder layer less its cross-attention K/V projections (applied once
    at prefill), the final LayerNorm (pre-LN), the embedding LayerNorm (mBART), the output projection and its bias."""
    d, f = cfg.d_model, cfg.d_ff
    layer = 4 * (d * d + d) + 2 * (d * d + d) + (2 * d * f + f + d) + 3 * 2 * d  # self, cross Q/O, FFN, 3 norms
    norms = 2 * d * (cfg.pre_norm + cfg.embed_norm)
    out = cfg.tgt_vocab_size * d + (cfg.tgt_vocab_size if cfg.final_logits_bias else 0)
    return cfg.decoder_layers * layer + norms + out


def matmul_flops(cfg: ModelConfig, rows: int) -> int:
    """FLOPs of a step's weight matmuls alone (projections, FFN, output projection): what its linear layers do."""
    d, f = cfg.d_model, cfg.d_ff
    return 2 * rows * (cfg.decoder_layers * (6 * d * d + 2 * d * f) + cfg.tgt_vocab_size * d)


def step_flops(cfg: ModelConfig, rows: int, span: float, source: float) -> float:
    """FLOPs of one step: 2 per multiply-add of the projections, the FFN and the output projection, and attention's
    QK^T and AV over `span` positions (self) and `source` positions (cross)."""
    return matmul_flops(cfg, rows) + 2 * rows * cfg.decoder_layers * 2 * cfg.d_model * (span + source)


def step_work(
    cfg: ModelConfig, rows: int, span: float, source: float, element: int = 2, logit: int = 4, kv: int | None = None
) -> Work:
    """The work of one step at `rows` rows, `span` self-attention positions and `source` cross-attention positions
    (means are fine: both are linear in them), weights of `element` bytes and K/V of `kv` bytes (default `element`;
    int8 engines keep float32 K/V), logits of `logit` bytes (float32, as the step writes them today)."""
    d, layers = cfg.d_model, cfg.decoder_layers
    weights = (step_parameters(cfg) + 2 * rows * d) * element  # + a token-embedding and a position row per row
    kv = 2 * layers * rows * (span + source) * d * (element if kv is None else kv)
    return Work(weights, kv, rows * cfg.tgt_vocab_size * logit, step_flops(cfg, rows, span, source))


def multiples(seconds: float, work: Work, bandwidth: float, flop_rate: float) -> dict[str, float]:
    """A measured step as multiples of its memory bound (bytes / bandwidth), its compute bound (FLOPs / rate) and the
    roofline (the larger of the two bounds)."""
    memory, compute = work.bytes / bandwidth, work.flops / flop_rate
    return {"memory": seconds / memory, "compute": seconds / compute, "roofline": seconds / max(memory, compute)}


def device_seconds(
    fn: Callable[[], object], iters: int, device: torch.device, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Mean seconds of `fn` over `iters` calls after one warm-up, timed with CUDA events on a GPU (the calls queue
    back to back: device time) and by `clock` elsewhere (the wall clock; `time.process_time` counts only the time
    this process ran, all its threads together)."""
    fn()
    if device.type != "cuda":
        start = clock()
        for _ in range(iters):
            fn()
        return (clock() - start) / iters
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(device)
    begin.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end) / 1000 / iters


def copy_bandwidth(
    device: torch.device, nbytes: int, iters: int = 10, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Bytes/s of one large device-to-device copy, counting what it reads and what it writes (2 x nbytes)."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    return 2 * nbytes / device_seconds(lambda: dst.copy_(src), iters, device, clock)


def matmul_rate(device: torch.device, dtype: torch.dtype, n: int, iters: int = 10) -> float:
    """FLOP/s of an (n, n) x (n, n) matmul in `dtype` (2 n^3 FLOPs)."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    return 2 * n**3 / device_seconds(lambda: torch.mm(a, b), iters, device)


def count_kernels(fn: Callable[[], object], device: torch.device) -> int:
    """Kernels one call of `fn` runs: device kernels seen by torch.profiler on a GPU (a graph replay's kernels too,
    memory copies and sets left out), top-level aten ops on a CPU."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        fn()
        if cuda:
            torch.cuda.synchronize(device)
    events = prof.events()
    if cuda:
        kernels = [e for e in events if e.device_type == DeviceType.CUDA]
        return sum(not e.name.startswith(("Memcpy", "Memset")) for e in kernels)
    top = [e for e in events if e.name.startswith("aten::")]
    return sum(e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::") for e in top)
