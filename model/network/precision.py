"""Numeric precision of a served network: float32, float16, bfloat16, int8 (dynamic quantization of every linear on
CPU) or int8-ffn (only the decoder's inner feed-forward layers), and the `auto` choice for the machine at hand."""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn
from torch.ao.nn.quantized import dynamic as nnqd
from torch.ao.quantization import PerChannelMinMaxObserver, QConfig

from model.network.config import ModelConfig
from model.network.packed import pack_linears
from model.network.screened import screen_projection

FLOATS = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
INT8 = ("int8", "int8-ffn")
PRECISIONS = ("auto", *FLOATS, *INT8)
LINEAR_DYNAMIC = torch.ops.quantized.linear_dynamic.default  # the overload itself: the packet checks args in Python
INT8_FLAGS = ("amx_int8", "avx512_vnni", "avx_vnni")  # int8 dot products in hardware: dynamic int8 pays
BF16_FLAGS = ("amx_bf16", "avx512_bf16")  # bf16 dot products: without them bf16 runs 3-5x slower than float32 (AVX2)
BF16_GAIN = 1.25  # `auto` on CPU serves bfloat16 where it runs the model's own layer shapes this much faster


def cpuinfo(path: Path = Path("/proc/cpuinfo")) -> dict[str, str]:
    """The first CPU's fields as the kernel lists them ("flags", "model name", ...; empty where there is none)."""
    try:
        first = path.read_text().split("\n\n", 1)[0]
    except OSError:
        return {}
    fields = (line.partition(":") for line in first.splitlines())
    return {name.strip(): value.strip() for name, sep, value in fields if sep}


def cpu_flags(path: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU's instruction-set flags as the kernel lists them (empty where there is no /proc/cpuinfo)."""
    return set(cpuinfo(path).get("flags", "").split())


def choose(
    setting: str, device: str, flags: set[str] | None = None, measure: Callable[[], float] | None = None
) -> tuple[str, str]:
    """The precision for `setting` on `device` and why: `auto` is bf16 (fp16 without bf16) on CUDA; on CPU bfloat16
    where the CPU has bf16 dot products and `measure()` (float32 time / bfloat16 time of the model's own layer shapes,
    `bf16_speedup`) reaches BF16_GAIN, else float32. bfloat16 keeps the built-in model's chrF within 0.3 of float32 on
    its held-out sets (docs/benchmarks.md, "Precision on CPU"); it runs the built-in model 0.98-1.07x float32 on AMD
    (AVX-512 BF16) and the OPUS-MT shape 1.8x at 64 rows on Intel (AMX), hence a measurement, not a flag. On the
    built-in model int8-ffn keeps 95.4% of greedy outputs identical to float32 (int8 83.5%) at 1.03-1.25x float32 (int8
    1.3-1.7x), but a dynamically quantized request's output depends on what it is batched with (int8-ffn: 96.3% of
    sentences alone = batched): `auto` never picks int8, and names the int8 modes where the CPU has int8 dot products.
    bf16 set on a CPU without bf16 dot products is served, its reason saying float32 is faster there."""
    if setting not in PRECISIONS:
        raise ValueError(f"dtype {setting!r}: expected one of {', '.join(PRECISIONS)}")
    flags = cpu_flags() if flags is None else flags
    if setting == "bfloat16" and device == "cpu" and not flags & set(BF16_FLAGS):
        return setting, "as set; this CPU has no bf16 instructions (avx512_bf16, amx_bf16): float32 is faster"
    if setting != "auto":
        return setting, "as set"
    if device.startswith("cuda"):
        bf16 = torch.cuda.is_bf16_supported()
        return ("bfloat16", "CUDA with bf16") if bf16 else ("float16", "CUDA without bf16")
    bf16, measured = next((f for f in BF16_FLAGS if f in flags), None), ""
    if bf16 is not None and measure is not None:
        gain = measure()
        if gain >= BF16_GAIN:
            return "bfloat16", (
                f"CPU with {bf16}: bfloat16 ran this model's layer shapes {gain:.2f}x float32 at start-up "
                f"(>= {BF16_GAIN}x); built-in model's held-out chrF within 0.3 of float32"
            )
        measured = f"; bfloat16 ran this model's layer shapes {gain:.2f}x float32 at start-up (< {BF16_GAIN}x)"
    found = [f for f in INT8_FLAGS if f in flags]
    if found:
        why = f"CPU: outputs independent of batching; --dtype int8-ffn / int8 are faster ({found[0]})"
        return "float32", why + measured
    return "float32", "CPU without VNNI/AMX int8 instructions" + measured


def bf16_speedup(cfg: ModelConfig, rows: int = 64, src_len: int = 32, repeats: int = 3) -> float:
    """float32 time / bfloat16 time, on this CPU, of one decode step of a random decoder layer of `cfg`'s shape
    (self-attention, cross-attention over `src_len` positions, feed-forward) and a slice of the output projection (up
    to 8,192 of the vocabulary) at `rows` rows, each precision as `prepare` serves it (float32 prepacked for oneDNN,
    bfloat16 cast), best of `repeats`, interleaved (NLLB-600M's widths: ~100 MB and well under a second)."""
    from model.network.transformer import DecoderLayer

    with torch.random.fork_rng(devices=[]):  # the process's generator stays as it was (unseeded sampling draws from it)
        torch.manual_seed(0)
        f32 = nn.ModuleDict({"layer": DecoderLayer(cfg), "out": nn.Linear(cfg.d_model, min(cfg.tgt_vocab_size, 8192))})
        inputs = (torch.randn(rows, 1, cfg.d_model), torch.ones(1, 1, 1, 1, dtype=torch.bool))
        h, d = cfg.n_heads, cfg.d_model // cfg.n_heads
        cross = (torch.randn(rows, h, src_len, d), torch.randn(rows, h, src_len, d))
    bf16 = copy.deepcopy(f32).to(torch.bfloat16).eval()
    f32 = pack_linears(f32.eval())
    src_mask = torch.ones(rows, 1, 1, src_len, dtype=torch.bool)
    best = {torch.float32: float("inf"), torch.bfloat16: float("inf")}
    with torch.inference_mode():
        for warm in range(repeats + 1):  # round 0 warms both up
            for m in (f32, bf16):
                dtype = m["out"].weight.dtype
                x, kv = inputs[0].to(dtype), tuple(t.to(dtype) for t in cross)
                start = time.perf_counter()
                m["out"](m["layer"](x, inputs[1], kv, src_mask))
                best[dtype] = min(best[dtype], time.perf_counter() - start) if warm else best[dtype]
    return best[torch.float32] / best[torch.bfloat16]


def prepare(model: nn.Module, precision: str, device: str = "cpu", screen: bool = True) -> nn.Module:
    """A float32 network on `device` in `precision`, in eval mode: int8 / int8-ffn = dynamic quantization of every /
    of the decoder's inner feed-forward linears (CPU only); the float32 linears on CPU also prepacked for oneDNN, and
    with `screen` a large vocabulary's projection screened in bf16 where the CPU has bf16 dot products."""
    if precision in INT8 and torch.device(device).type != "cpu":
        raise ValueError(f"dtype {precision} is served on CPU only, not on {device}")
    model = model.to(device=device, dtype=FLOATS.get(precision, torch.float32)).eval()
    if precision in INT8:
        quantize_int8(model, inner_ffn(model) if precision == "int8-ffn" else None)
    if precision in ("float32", "int8-ffn") and torch.device(device).type == "cpu":
        if precision == "float32" and screen and cpu_flags() & set(BF16_FLAGS):
            screen_projection(model)  # a large vocabulary's projection screened in bf16 (`model.network.screened`)
        pack_linears(model)  # oneDNN's prepacked GEMM where it pays: same parameters, 1.4-2.7x faster linears
    return model


def inner_ffn(model: nn.Module) -> list[str]:
    """The feed-forward linears of the decoder's layers but its first and last (none with fewer than 3 layers): the
    int8 linears that keep >= 95% of the built-in model's greedy outputs (all six decoder FFNs: 94.2%)."""
    layers = range(1, len(model.decoder) - 1)
    return [
        f"decoder.{i}.ffn.{name}"
        for i in layers
        for name, m in model.decoder[i].ffn.named_children()
        if type(m) is nn.Linear
    ]


class Int8Linear(nnqd.Linear):
    """PyTorch's dynamic int8 linear with activations quantized to the full 8 bits (its default, `reduce_range`, uses 7
    to spare AVX2's int16 pair sums from saturating; quantize_int8 spares them by 7-bit weights instead)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., in) float -> (..., out), int8 GEMM with per-call activation scale."""
        return LINEAR_DYNAMIC(x, self._packed_params._packed_params, False)  # (..., out) float32, as x


def int8_qconfig(flags: set[str]) -> QConfig:
    """Per-channel symmetric int8 weights, 8-bit activations quantized per call; on a CPU without int8 dot products
    (AVX2 adds u8 x s8 products in int16 pairs) the weights keep 7 bits, [-64, 63], so no pair sum saturates
    (2 x 255 x 64 <= 32,767): on this project's models that errs less than PyTorch's 7-bit activations (built-in model,
    64 everyday phrases in one batch on AVX2: 98.4% identical to float32, chrF -0.45, against 95.3% and -0.90)."""
    bits = {} if flags & set(INT8_FLAGS) else {"quant_min": -64, "quant_max": 63}
    weight = PerChannelMinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_channel_symmetric, **bits)
    return torch.ao.quantization.per_channel_dynamic_qconfig._replace(weight=weight)


def quantize_int8(model: nn.Module, names: list[str] | None = None, flags: set[str] | None = None) -> nn.Module:
    """Dynamic int8 quantization (PyTorch's `quantize_dynamic`) of the nn.Linear layers `names` (None: all), in place:
    weights prepacked for the x86 backend and activations quantized per call, as `int8_qconfig` says for this CPU
    (`flags`); embeddings and norms stay float32."""
    qconfig = int8_qconfig(cpu_flags() if flags is None else flags)
    linears = [n for n, m in model.named_modules() if type(m) is nn.Linear and (names is None or n in names)]
    with warnings.catch_warnings():  # torch.ao.quantization is deprecated in favour of torchao, still works in 2.13
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(
            model, dict.fromkeys(linears, qconfig), torch.qint8, {nn.Linear: Int8Linear}, True
        )
