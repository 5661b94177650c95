"""The decode step's roofline: the bytes a step must move and the FLOPs it must do, a device's measured copy bandwidth
and matmul rate, and a measured step as a multiple of the bound; on a CPU, the rates of the paths our linears use (at
one thread and at the benchmark's threads), the bound of a model_speed cell, and our step split by torch.profiler
into GEMMs, attention and the rest.

    python -m bench.roofline            # print the CPU's rates at 1 and 2 threads (~20 s)

A step at `rows` rows reads the decoder's weights once (self-attention Q/K/V/O, cross-attention Q/O: its K/V
projections ran at prefill, the FFN, the LayerNorms, the output projection and its bias; plus one token-embedding and
one position row per row), the self-attention K/V of every row at the span, the cross-attention K/V at the source
length, and writes its logits. Its FLOPs are the matmuls' 2 x multiply-adds and attention's QK^T and AV.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from model.network.config import ModelConfig


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


def kernels_of(fn: Callable[[], object], device: torch.device) -> list[tuple[str, float]]:
    """(name, seconds) of every kernel one call of `fn` runs: device kernels seen by torch.profiler on a GPU (a graph
    replay's kernels too, memory copies and sets left out), top-level aten ops and their CPU time on a CPU."""
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
        copies = ("Memcpy", "Memset")
        kernels = [e for e in events if e.device_type == DeviceType.CUDA and not e.name.startswith(copies)]
        return [(e.name, e.self_device_time_total / 1e6) for e in kernels]
    top = [e for e in events if e.name.startswith("aten::")]
    top = [e for e in top if e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")]
    return [(e.name, e.cpu_time_total / 1e6) for e in top]


KINDS = (  # a kernel's kind by the first pattern its lowercased name holds (cuBLAS, CUTLASS, flash and aten names)
    ("matmul", ("gemm", "gemv", "cutlass", "nvjet", "sm90_xmma", "cublas", "aten::mm", "aten::addmm", "aten::bmm",
                "aten::linear", "aten::matmul", "mkldnn")),
    ("attention", ("flash", "fmha", "attention", "sdpa")),
    ("norm", ("layer_norm", "layernorm", "rms")),
    ("index and copy", ("index", "gather", "scatter", "copy", "cat", "embedding", "take", "put")),
    ("elementwise", ("elementwise", "vectorized", "unrolled", "aten::add", "aten::mul", "aten::where", "silu",
                     "gelu", "relu", "fill")),
    ("reduce", ("softmax", "reduce", "argmax", "topk", "sort", "max", "sum")),
)  # fmt: skip


def kernel_kinds(kernels: list[tuple[str, float]]) -> dict[str, tuple[int, float]]:
    """{kind: (kernels, seconds)} of `kernels_of`'s list, in KINDS's order, then "other"."""
    out = {kind: (0, 0.0) for kind, _ in KINDS} | {"other": (0, 0.0)}
    for name, seconds in kernels:
        low = name.lower()
        kind = next((k for k, marks in KINDS if any(m in low for m in marks)), "other")
        count, total = out[kind]
        out[kind] = (count + 1, total + seconds)
    return {k: v for k, v in out.items() if v[0]}


# The CPU: its measured rates, a model_speed cell's bound, the profiler's split of our step.

CPU = torch.device("cpu")
MIB = 1 << 20
GEMM = {"mkldnn::_linear_pointwise", "quantized::linear_dynamic", "aten::addmm", "aten::mm", "aten::linear"}
ATTENTION = {"aten::bmm", "aten::baddbmm", "aten::_softmax", "aten::_scaled_dot_product_flash_attention_for_cpu"}
PRECISION = {  # engine precision -> (GEMM rate, weight bytes, K/V bytes)
    "float32": ("packed", 4, 4),
    "int8": ("int8", 1, 4),  # dynamic quantization: int8 weights, float32 activations and K/V
    "bfloat16": ("bf16", 2, 2),
}


@dataclass(frozen=True)
class Rates:
    """A CPU's measured rates at one thread count: FLOP/s of large GEMMs, bytes/s (read + written) of copies."""

    threads: int
    packed: float  # float32 through oneDNN with a prepacked weight (torch.ops.mkldnn._linear_pointwise: our linears)
    dense: float  # float32 F.linear (MKL)
    int8: float  # torch.ao.nn.quantized.dynamic.Linear (what --dtype int8 runs)
    bf16: float  # bfloat16 F.linear
    dram: float  # a copy far larger than L3
    l3: float  # a copy whose source and destination fit in L3

    def gemm(self, precision: str) -> float:
        """The GEMM rate an engine of `precision` can reach."""
        return getattr(self, PRECISION[precision][0])


def clock(threads: int):
    """The clock of a measurement at `threads` threads: at one, the CPU time this process ran (what other processes
    on a shared machine take away is left out); at more, the wall clock."""
    return time.process_time if threads == 1 else time.perf_counter


def best_seconds(fn, iters: int, rounds: int = 3) -> float:
    """The fastest of `rounds` mean times of `fn` over `iters` calls: on a shared machine, the least disturbed."""
    return min(device_seconds(fn, iters, CPU, clock(torch.get_num_threads())) for _ in range(rounds))


def linear_rates(rows: int, inp: int, out: int, iters: int) -> dict[str, float]:
    """FLOP/s of one (rows, inp) x (inp, out) linear (2 rows inp out FLOPs) through each path."""
    x, w, b = torch.randn(rows, inp), torch.randn(out, inp), torch.randn(out)
    packed = torch.ops.mkldnn._reorder_linear_weight(w)
    with warnings.catch_warnings():  # torch.ao's deprecation notices
        warnings.simplefilter("ignore")
        int8 = torch.ao.quantization.quantize_dynamic(nn.Sequential(nn.Linear(inp, out)), dtype=torch.qint8)
    xb, wb, bb = x.bfloat16(), w.bfloat16(), b.bfloat16()
    calls = {
        "packed": lambda: torch.ops.mkldnn._linear_pointwise(x, packed, b, "none", [], ""),
        "dense": lambda: F.linear(x, w, b),
        "int8": lambda: int8(x),
        "bf16": lambda: F.linear(xb, wb, bb),
    }
    flops = 2 * rows * inp * out
    return {name: flops / best_seconds(fn, iters) for name, fn in calls.items()}


def copy_rate(nbytes: int, iters: int) -> float:
    """Bytes/s (read + written) of the least disturbed of three rounds of `nbytes` copies."""
    return max(copy_bandwidth(CPU, nbytes, iters, clock(torch.get_num_threads())) for _ in range(3))


@torch.inference_mode()
def measure(threads: int, rows: int = 1024, size: int = 1024, dram: int = 256 * MIB, l3: int = 4 * MIB) -> Rates:
    """The rates at `threads` torch threads: GEMMs of (rows, size) x (size, 4 size), copies of `dram` and `l3` bytes
    (an L3-sized copy reads and writes 2 x `l3`: keep that under the L3)."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        gemm = linear_rates(rows, size, 4 * size, iters=3)
        return Rates(threads, **gemm, dram=copy_rate(dram, 3), l3=copy_rate(l3, 50))
    finally:
        torch.set_num_threads(before)


def best_of(*rates: Rates) -> Rates:
    """Each rate at its best over several measurements (e.g. 1 thread and 2 on a loaded machine): the bound a step
    at the larger thread count must respect."""
    best = {f.name: max(getattr(r, f.name) for r in rates) for f in fields(Rates)}
    return Rates(**best)


def rates_table(rates: list[Rates]) -> str:
    """Markdown: one row per thread count (GFLOP/s, GB/s)."""
    head = "| threads | fp32 oneDNN packed | fp32 F.linear | int8 dynamic | bf16 | copy DRAM | copy in L3 |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for r in rates:
        flops = [f"{getattr(r, f.name) / 1e9:.0f} GFLOP/s" for f in fields(r)[1:5]]
        lines.append(f"| {r.threads} | " + " | ".join([*flops, f"{r.dram / 1e9:.0f} GB/s", f"{r.l3 / 1e9:.0f} GB/s"]))
        lines[-1] += " |"
    return "\n".join(lines)


def cell_work(cfg: ModelConfig, precision: str, rows: int, new: int, source: float) -> Work:
    """The mean decode step of a cell: `rows` rows (batch x beam), `new` tokens forced (the self-attention span runs
    1..new: its mean (new + 1) / 2), `source` the mean source length, in `precision`'s bytes."""
    _, element, kv = PRECISION[precision]
    return step_work(cfg, rows, (new + 1) / 2, source, element=element, logit=4, kv=kv)


@dataclass(frozen=True)
class Bound:
    """Lower bounds (seconds) of a step: its bytes from DRAM and from L3, its FLOPs at the GEMM rate, its GEMMs'
    FLOPs alone, and its K/V bytes from L3 (what attention must read)."""

    dram: float
    l3: float
    compute: float
    gemm: float
    kv: float

    @property
    def roofline(self) -> float:
        """The larger of the L3 and compute bounds: no step can beat it (the DRAM bound holds only when the weights
        and K/V do not stay in L3 from step to step)."""
        return max(self.l3, self.compute)

    def __add__(self, other: Bound) -> Bound:
        return Bound(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(Bound)))


def bound(cfg: ModelConfig, precision: str, rows: int, new: int, source: float, rates: Rates) -> Bound:
    """The bounds of a cell's mean step at these rates."""
    work, rate = cell_work(cfg, precision, rows, new, source), rates.gemm(precision)
    m = multiples(1.0, work, rates.dram, rate)  # one second as multiples of each bound: their inverses
    return Bound(1 / m["memory"], work.bytes / rates.l3, 1 / m["compute"], matmul_flops(cfg, rows) / rate,
                 work.kv / rates.l3)  # fmt: skip


def cell_bound(cfg: ModelConfig, precision: str, parts: list[list[list[int]]], beam: int, new: int, rates: Rates):
    """The bounds of a cell's mean step over its batches `parts` (each `new` steps of len(part) x beam rows at its
    mean source length): (Bound per step, steps)."""
    total = Bound(0.0, 0.0, 0.0, 0.0, 0.0)
    for part in parts:
        total += bound(cfg, precision, len(part) * beam, new, sum(map(len, part)) / len(part), rates)
    n = len(parts)
    return Bound(*(getattr(total, f.name) / n for f in fields(Bound))), n * new


def split(events) -> dict[str, float]:
    """Self CPU seconds of profiled events by kind: GEMM (the linear layers), attention (QK^T, softmax, AV), rest."""
    out = {"gemm": 0.0, "attention": 0.0, "rest": 0.0}
    for e in events:
        kind = "gemm" if e.key in GEMM else "attention" if e.key in ATTENTION else "rest"
        out[kind] += e.self_cpu_time_total / 1e6
    return out


@torch.inference_mode()
def profile_steps(model, sources: list[list[int]], beam: int, new: int, steps: int = 8) -> dict[str, float]:
    """Shares of GEMM, attention and the rest in `steps` decode steps of our batch code around the middle of a
    `new`-token decode (prefill and the first steps unprofiled): {kind: share}."""
    from torch.profiler import ProfilerActivity, profile

    from model.runner.loop import DecodeLoop
    from model.runner.params import DecodeParams
    from model.runner.search import Request

    params = DecodeParams(beam_size=beam, max_new_tokens=new, min_new_tokens=new, return_scores=False)
    loop = DecodeLoop(model)
    loop.join(loop.prefill([Request(i, s, params) for i, s in enumerate(sources)]))
    for _ in range(max(0, (new - steps) // 2)):
        loop.step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(min(steps, new)):
            loop.step()
    seconds = split(prof.key_averages())
    total = sum(seconds.values()) or 1.0
    return {k: v / total for k, v in seconds.items()}


def ms_times(seconds: float, floor: float) -> str:
    """'12.3 (1.4x)': milliseconds and the multiple of a bound."""
    return f"{seconds * 1e3:.2f} ({seconds / floor:.1f}x)" if floor else f"{seconds * 1e3:.2f}"


def step_times(ran: float, wall: float, floor: float) -> str:
    """'7.5 (2.9x); wall 16.4': the step while it ran, its multiple of the bound, and its wall time."""
    return f"{ms_times(ran, floor)}; wall {wall * 1e3:.2f}"


def cell_rows(head: str, bounds: dict[str, Bound], ours: dict[str, tuple], ct2: dict[str, tuple]) -> list[str]:
    """Markdown rows of one cell, one per precision: `bounds` {precision: Bound}, `ours` {precision: (step seconds
    while it ran, wall step seconds, {kind: share})}, `ct2` {precision: (ran, wall)}."""
    lines = []
    for precision, b in bounds.items():
        cells = [f"{b.l3 * 1e3:.2f} / {b.dram * 1e3:.2f} / {b.compute * 1e3:.2f}"]
        if precision in ours:
            ran, wall, share = ours[precision]
            cells += [step_times(ran, wall, b.roofline), ms_times(ran * share["gemm"], b.gemm)]
            cells += [ms_times(ran * share["attention"], b.kv), f"{ran * share['rest'] * 1e3:.2f}"]
        else:
            cells += ["-"] * 4
        cells.append(step_times(*ct2[precision], b.roofline) if precision in ct2 else "-")
        lines.append(f"| {head} | {precision} | " + " | ".join(cells) + " |")
    return lines


TABLE_HEAD = [
    "| mode | batch | precision | bound per step, ms: L3 / DRAM / compute | ours step, ms (x bound); wall | ours "
    "GEMMs, ms (x their FLOPs at the GEMM rate) | ours attention, ms (x K/V from L3) | ours rest, ms | CTranslate2 "
    "step, ms (x bound); wall |",
    "|---|---|---|---|---|---|---|---|---|",
]


def main(argv: list[str] | None = None) -> int:
    """Print the CPU's rates at one thread and at --threads."""
    p = argparse.ArgumentParser(prog="python -m bench.roofline", description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2, help="the second thread count measured (default 2)")
    args = p.parse_args(argv)
    print(rates_table([measure(n) for n in dict.fromkeys([1, args.threads])]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
