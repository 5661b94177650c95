"""Latency against load (Poisson arrivals at fractions of the closed-loop throughput, with a plot) and the same
weights served one request at a time, for bench.serving."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from bench.loadgen import Stats, closed_loop, open_loop
from bench.report import log

PLOT_NAME = "latency_vs_load.png"
SINGLE_TARGET = 10.0  # tokens/s of the batching server under load over one request at a time


@dataclass
class Point:
    """One Poisson rate of the sweep."""

    rate: float
    fraction: float
    stats: Stats


def sweep(url: str, make_bodies, fractions: list[float], max_rps: float, seconds: float, opts: dict) -> list[Point]:
    """Open-loop Poisson runs, one per fraction of `max_rps`, about `seconds` of arrivals each (at most
    opts["max_requests"]); `make_bodies(n, start)` gives the requests."""
    points = []
    for k, fraction in enumerate(fractions):
        rate = fraction * max_rps
        n = max(1, min(opts["max_requests"], round(rate * seconds)))
        t0 = time.perf_counter()
        stats = open_loop(url, make_bodies(n, 17 * k), rate, opts["timeout"], opts["max_inflight"], opts["seed"] + k,
                          opts["client_procs"])  # fmt: skip
        log(f"Poisson {rate:.2f} req/s ({n} requests): {stats.tps:.0f} tokens/s ({time.perf_counter() - t0:.1f}s)")
        points.append(Point(rate, fraction, stats))
    return points


def one_at_a_time(url: str, bodies: list[dict]) -> Stats:
    """One client, one request at a time, against a server with --max-batch-size 1."""
    closed_loop(url, bodies[:1], 1, 300, 300)  # warm-up
    return closed_loop(url, bodies, 1, 3600, 3600)


def ms3(values: tuple[float, float, float] | None) -> str:
    """p50 / p95 / p99 in milliseconds."""
    return " / ".join(f"{v * 1000:.0f}" for v in values) if values else "-"


def sweep_lines(points: list[Point], seconds: float, seed: int, plot_name: str | None) -> list[str]:
    """Markdown: how the sweep ran, the plot, one line per rate."""
    lag = max(p.stats.max_lag for p in points)
    lines = [
        "### Latency against load (Poisson arrivals)",
        "",
        f"Open loop on the same server: requests arrive as a Poisson process (seed {seed}) for about {seconds:g} s "
        "per rate, whether or not earlier ones were answered. Latency and TTFT count from the scheduled arrival, so "
        f"any client-side backlog is included (worst send delay {lag * 1000:.0f} ms).",
        "",
    ]
    lines += [f"![latency against load]({plot_name})", ""] if plot_name else []
    lines += [
        "| offered req/s | x closed loop | requests | achieved req/s | tokens/s | TTFT p50 / p95 / p99 (ms) | latency "
        "p50 / p95 / p99 (ms) | errors |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        s = p.stats
        cells = [f"{p.rate:.2f}", f"{p.fraction:.2f}", str(s.requests), f"{s.rps:.2f}", f"{s.tps:.0f}", ms3(s.ttft)]
        lines.append("| " + " | ".join([*cells, ms3(s.latency), str(s.requests - s.ok)]) + " |")
    return lines


def plot(points: list[Point], max_rps: float, title: str, path: Path) -> None:
    """PNG: latency and TTFT percentiles against offered load."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [p.rate for p in points]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    for ax, attr, name in ((axes[0], "latency", "latency"), (axes[1], "ttft", "time to first token")):
        for i, (q, style) in enumerate(((50, "o-"), (95, "s--"), (99, "^:"))):
            ys = [getattr(p.stats, attr)[i] if getattr(p.stats, attr) else float("nan") for p in points]
            ax.plot(xs, ys, style, label=f"p{q}")
        ax.axvline(max_rps, color="grey", lw=1, ls="-.", label=f"closed loop: {max_rps:.1f} req/s")
        ax.set_xlabel("offered load (requests/s, Poisson arrivals)")
        ax.set_ylabel(f"{name} (s)")
        ax.set_title(name)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
