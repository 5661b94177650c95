"""Numeric precision of a served network: float32, float16, bfloat16, or int8 (dynamic quantization on CPU), and the
`auto` choice for the machine at hand."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import torch
from torch import nn

from model.packed import pack_linears

FLOATS = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
PRECISIONS = ("auto", *FLOATS, "int8")
INT8_FLAGS = ("amx_int8", "avx512_vnni", "avx_vnni")  # int8 dot products in hardware: dynamic int8 pays


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU's instruction-set flags as the kernel lists them (empty where there is no /proc/cpuinfo)."""
    try:
        match = re.search(r"^flags\s*:\s*(.*)$", cpuinfo.read_text(), flags=re.M)
    except OSError:
        return set()
    return set(match.group(1).split()) if match else set()


def choose(setting: str, device: str, flags: set[str] | None = None) -> tuple[str, str]:
    """The precision for `setting` on `device` and why: `auto` is bf16 (fp16 without bf16) on CUDA and float32 on CPU.
    int8 and bf16 stay opt-in on CPU: on the built-in model they keep chrF (+0.02 / 0.00 on the Handbook test) but
    change 28% / 12% of its greedy outputs, past the 5% that `auto` may change (docs/benchmarks.md)."""
    if setting not in PRECISIONS:
        raise ValueError(f"dtype {setting!r}: expected one of {', '.join(PRECISIONS)}")
    if setting != "auto":
        return setting, "as set"
    if device.startswith("cuda"):
        bf16 = torch.cuda.is_bf16_supported()
        return ("bfloat16", "CUDA with bf16") if bf16 else ("float16", "CUDA without bf16")
    found = [f for f in INT8_FLAGS if f in (cpu_flags() if flags is None else flags)]
    if found:
        return "float32", f"CPU: float32 keeps greedy outputs; --dtype int8 is faster ({found[0]}) but changes some"
    return "float32", "CPU without VNNI/AMX int8 instructions"


def prepare(model: nn.Module, precision: str, device: str = "cpu") -> nn.Module:
    """A float32 network on `device` in `precision`, in eval mode: int8 = dynamic quantization (CPU only); float32 on
    CPU with its linear weights also prepacked for oneDNN (model.packed)."""
    if precision == "int8" and torch.device(device).type != "cpu":
        raise ValueError(f"dtype int8 is served on CPU only, not on {device}")
    model = model.to(device=device, dtype=FLOATS.get(precision, torch.float32)).eval()
    if precision == "int8":
        return quantize_int8(model)
    if precision == "float32" and torch.device(device).type == "cpu":
        return pack_linears(model)  # oneDNN's prepacked GEMM: same parameters, 1.4-2.7x faster linears
    return model


def quantize_int8(model: nn.Module) -> nn.Module:
    """Dynamic int8 quantization (PyTorch's `quantize_dynamic`) of every nn.Linear, in place: weights int8 per tensor,
    prepacked once for the x86 backend; activations quantized per call; embeddings and norms stay float32."""
    with warnings.catch_warnings():  # torch.ao.quantization is deprecated in favour of torchao, still works in 2.13
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8, inplace=True)
