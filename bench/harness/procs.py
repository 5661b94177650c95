"""The server's processes as the OS sees them (psutil): its process tree, which processes are engine cores, and where
its CPU and memory go, split into the engine (model threads) and the HTTP side (event loops)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

GONE = (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess)


def tree(pid: int) -> list[int]:
    """pid and all its descendants."""
    with contextlib.suppress(*GONE):
        return [pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))]
    return [pid]


def children(pid: int) -> list[int]:
    """Process ids whose parent is `pid`."""
    with contextlib.suppress(*GONE):
        return [p.pid for p in psutil.Process(pid).children()]
    return []


def has_torch(pid: int) -> bool:
    """True when the process has loaded libtorch (an engine core; never an HTTP worker). Reads /proc/PID/maps: psutil's
    memory_maps parses the much larger smaps."""
    with contextlib.suppress(OSError):
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    return False


def is_python_child(pid: int) -> bool:
    """A spawned server process (not multiprocessing's resource tracker)."""
    with contextlib.suppress(*GONE):
        return "spawn_main" in " ".join(psutil.Process(pid).cmdline())
    return False


def connections(pid: int, port: int) -> int:
    """Established TCP connections of process `pid` on local `port`."""
    conns = psutil.Process(pid).net_connections(kind="tcp")
    return sum(c.laddr.port == port and c.status == psutil.CONN_ESTABLISHED for c in conns)


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each thread of a process."""
    with contextlib.suppress(*GONE):
        return {t.id: t.user_time + t.system_time for t in psutil.Process(pid).threads()}
    return {}


def split_cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far of the server rooted at pid: "engine" (processes with torch; in a one-process server its
    non-main threads) and "http" (the other processes; in a one-process server its main thread)."""
    pids = tree(pid)
    out = {"engine": 0.0, "http": 0.0}
    for p in pids:
        threads = thread_cpu(p)
        if len(pids) == 1:  # the one-process server: the event loop runs on the main thread
            out["http"] += threads.get(p, 0.0)
            out["engine"] += sum(v for t, v in threads.items() if t != p)
        else:
            out["engine" if has_torch(p) else "http"] += sum(threads.values())
    return out


@contextlib.contextmanager
def cpu_account(pid: int | None) -> Iterator[dict[str, float]]:
    """CPU seconds the server spent while the block runs, by side, and the wall time."""
    out: dict[str, float] = {}
    if pid is None:
        yield out
        return
    before, start = split_cpu(pid), time.monotonic()
    yield out
    after = split_cpu(pid)
    out.update({k: after[k] - before[k] for k in after}, wall=time.monotonic() - start)


def rss_mb(pid: int) -> dict[int, float]:
    """Resident memory (MB) of each process of the tree rooted at pid."""
    out = {}
    for p in tree(pid):
        with contextlib.suppress(*GONE):
            out[p] = psutil.Process(p).memory_info().rss / 2**20
    return out


def cpu_lines(cpu: dict[str, float], client: float, what: str) -> list[str]:
    """Markdown: where the machine's CPU went during a run (`what`), from cpu_account() and the clients' CPU."""
    cores = len(os.sched_getaffinity(0))
    total = cpu["wall"] * cores
    parts = [
        ("server: engine (core processes: model, scheduler, torch threads)", cpu["engine"]),
        ("server: HTTP (worker processes: uvicorn, FastAPI, tokenizer, SSE; launcher)", cpu["http"]),
        ("load generator (client processes, aiohttp)", client),
        ("idle or other processes", max(0.0, total - cpu["engine"] - cpu["http"] - client)),
    ]
    lines = [
        f"CPU during {what}, from the server's threads' CPU times (psutil) and the clients' "
        f"`time.process_time()`: {cpu['wall']:.1f} s of wall time on {cores} cores = {total:.1f} core-seconds.",
        "",
        "| where | CPU seconds | share of the machine |",
        "|---|---|---|",
    ]
    return lines + [f"| {name} | {v:.2f} | {v / total:.0%} |" for name, v in parts] + [""]
