"""Where a server's CPU and memory go: its process tree read from /proc (Linux), split into the engine (model
threads) and the HTTP side (event loops), for the launcher layout and for the older one-process server."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _stat(path: Path) -> list[str]:
    """Fields of a /proc stat file after the command name."""
    text = path.read_text()
    return text[text.rindex(")") + 2 :].split()


def tree(pid: int) -> list[int]:
    """pid and all its descendants."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                parents.setdefault(int(_stat(entry / "stat")[1]), []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += parents.get(p, [])
    return out


def _has_torch(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    return False


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each thread of a process."""
    out = {}
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = _stat(task / "stat")
                out[int(task.name)] = (int(fields[11]) + int(fields[12])) / TICK
    return out


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
            out["engine" if _has_torch(p) else "http"] += sum(threads.values())
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
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out[p] = int(line.split()[1]) / 1024
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
        f"CPU during {what}, from `/proc/PID/task/*/stat` of the server's processes and the clients' "
        f"`time.process_time()`: {cpu['wall']:.1f} s of wall time on {cores} cores = {total:.1f} core-seconds.",
        "",
        "| where | CPU seconds | share of the machine |",
        "|---|---|---|",
    ]
    return lines + [f"| {name} | {v:.2f} | {v / total:.0%} |" for name, v in parts] + [""]
