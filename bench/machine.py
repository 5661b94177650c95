"""The machine a benchmark ran on: CPU model and instruction sets (or the GPU), cores, versions, load."""

from __future__ import annotations

import datetime as dt
import os
import platform
from importlib.metadata import PackageNotFoundError, version

import torch

from model.network.precision import cpu_flags, cpuinfo

ISA = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def cpu_model() -> str:
    """The CPU's model name ("AMD EPYC", "Intel(R) Xeon(R) Processor", ...)."""
    return cpuinfo().get("model name") or platform.processor() or "unknown CPU"


def cpu_kind(flags: set[str] | None = None) -> str:
    """The CPU's model and the widest vector or matrix instructions it has ("AMD EPYC with AVX2"): a CPU ratio holds for
    one such kind, so the per-CPU sections of docs/benchmarks.md are keyed by it."""
    flags = cpu_flags() if flags is None else flags
    tiers = (("amx_int8", "AMX"), ("avx512f", "AVX-512"), ("avx2", "AVX2"))
    return f"{cpu_model()} with {next((name for flag, name in tiers if flag in flags), 'SSE only')}"


def _version(package: str) -> str:
    """An installed package's version, or "-"."""
    try:
        return version(package)
    except PackageNotFoundError:
        return "-"


def machine_info(*packages: str) -> dict[str, str]:
    """Date, CPU (model, the instruction sets that matter here), cores, GPU, Python/torch and `packages` versions,
    torch threads, 1-minute load average."""
    flags = cpu_flags()
    info = {
        "date": dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "cpu": cpu_model(),
        "kind": cpu_kind(flags),
        "isa": ", ".join(f for f in ISA if f in flags) or "-",
        "cores": f"{os.cpu_count()} logical, {len(os.sched_getaffinity(0))} usable",
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "threads": str(torch.get_num_threads()),
        "load": f"{os.getloadavg()[0]:.1f}",
    }
    return info | {p: _version(p) for p in packages}


def machine_line(info: dict[str, str], *packages: str) -> str:
    """One markdown bullet: '- Machine: CPU (cores; ISA), GPU; versions.'"""
    gpu = "" if info["gpu"] == "none" else f", GPU {info['gpu']}"
    versions = ", ".join([f"Python {info['python']}", f"torch {info['torch']}", *(f"{p} {info[p]}" for p in packages)])
    return f"- Machine: {info['cpu']} ({info['cores']}; {info['isa']}){gpu}; {versions}."
