"""Does the server keep its engine's speed? The server against the same engine offline, on the same weights, source
sentences and decoding work (greedy, exactly --new-tokens tokens per text).

    python -m bench.serving                             # built-in model on CPU; writes its docs/benchmarks.md section
    python -m bench.serving --before /tmp/main-checkout # the same runs against another checkout too (before/after)
    python -m bench.serving --device cuda --model DIR --clients 64,256 --client-procs 8   # a GPU machine
    python -m bench.serving --tiny --texts 16 --clients 8 --requests 32 --new-tokens 16 --no-write   # smoke run
    python -m bench.serving --device cuda --model DIR --load default    # every request the checkpoint's beam (4)
    python -m bench.serving --single-requests 0 --no-sweep              # (1) and (2) alone (bench/gpu/check.sh)

--load picks the requests: greedy (beam_size 1), default (no beam_size: the checkpoint's, OPUS-MT's beam 4) or mixed
(the two alternating); every one forced to --new-tokens tokens, streamed; the offline engine decodes the same requests
with the parameters the server derives from them (app.planner.decode_params).

(1) One POST of --texts texts (JSON) against the offline engine on the same texts as one batch (target: >= 0.9x).
(2) For each --clients C: C closed-loop streaming clients spread over --client-procs processes. Client tokens/s,
    TTFT and latency; the server's own rows per decode step and decode step time (from its /metrics); the offline
    engine at the same rows (batches of that many rows); and where the machine's CPU went (engine, HTTP, clients).
(3) Latency against load: Poisson arrivals at --fractions of (2)'s req/s at the largest client count (TTFT, latency,
    a plot); (4) the same weights served one request at a time (a server with --max-batch-size 1, one client,
    --single-requests requests): the batching server under load should give >= 10x its tokens/s.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from app.engine.build import budget, decoder
from app.settings import Settings
from bench.harness.procs import cpu_account, cpu_lines
from bench.loadgen import Stats, closed_loop, one_post, open_loop, per_step, server_metrics
from bench.machine import machine_info, machine_line
from bench.report import command, log, write_section
from bench.timing import sync
from bench.workload import LOAD_WORDS, LOADS, bodies, load_fields, model_dir, pick_sentences, server_params, thread_env
from model.loading.checkpoint import load
from model.network.precision import choose
from model.runner.host_memory import keep_freed_memory

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Serving through the engine core (bench/serving.py)"  # greedy; other loads get their own section
ONE_POST_TARGET = 0.9
LOADED_TARGET = 0.85  # server / offline tokens/s under the default and the mixed load
PLOT_NAME = "latency_vs_load.png"
SINGLE_TARGET = 10.0  # tokens/s of the batching server under load over one request at a time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags; the defaults are the full CPU run."""
    p = argparse.ArgumentParser(prog="python -m bench.serving", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, help="native or Marian model dir (default: the built-in en-es)")
    p.add_argument("--tiny", action="store_true", help="a random tiny model, for smoke runs")
    p.add_argument("--device", default="cpu", help="cpu or cuda: the server's and the offline engine's (cpu)")
    p.add_argument("--dtype", default="auto", help="auto, float32, float16, bfloat16, int8: both sides (auto)")
    p.add_argument("--threads", type=int, default=2, help="torch threads of the core and the offline engine (2)")
    p.add_argument("--texts", type=int, default=64, help="texts in the one-POST run (64)")
    p.add_argument("--repeats", type=int, default=5, help="one-POST runs, alternating with offline (5)")
    p.add_argument("--clients", default="64", help="comma-separated client counts for (2) (64)")
    p.add_argument("--client-procs", type=int, default=4, help="load generator processes (4)")
    p.add_argument("--requests", type=int, default=512, help="requests per client count (512)")
    p.add_argument("--new-tokens", type=int, default=64, help="tokens generated per text, forced (64)")
    p.add_argument("--load", choices=LOADS, default="greedy", help="greedy, default (the checkpoint's beam) or mixed")
    p.add_argument("--workers", type=int, default=1, help="server HTTP worker processes (1)")
    p.add_argument(
        "--overlap",
        choices=["auto", "on", "off"],
        default="auto",
        help="the overlap scheduler, in this tree's server and the offline engine alike (auto: on on cuda, off on cpu)",
    )
    p.add_argument("--single-requests", type=int, default=32, help="requests of (4); 0 skips it (32)")
    floats = lambda text: [float(x) for x in text.split(",") if x.strip()]  # noqa: E731
    p.add_argument("--fractions", type=floats, default=[0.25, 0.5, 0.75, 0.9, 1.0], help="(3)'s rates, x (2)'s req/s")
    p.add_argument("--no-sweep", action="store_true", help="skip (3), the Poisson sweep")
    p.add_argument("--poisson-seconds", type=float, default=30.0, help="arrivals per rate in (3), s (30)")
    p.add_argument("--poisson-max-requests", type=int, default=2000, help="requests per rate in (3) at most (2000)")
    p.add_argument("--plot", type=Path, help=f"(3)'s PNG (default: {PLOT_NAME} next to --out)")
    p.add_argument("--before", type=Path, help="also run the server of this checkout (e.g. main) for comparison")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md", help="markdown file to update")
    p.add_argument("--no-write", action="store_true", help="print the section only")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def section_heading(load: str) -> str:
    """The docs section of a load: the greedy one as before, the others beside it."""
    return SECTION if load == "greedy" else SECTION.replace(" (", f": {load} requests (", 1)


@dataclass
class Offline:
    """The engine in this process on one batch size (requests): tokens/s and mean decode step."""

    rows: int
    tps: float
    step_ms: float


@dataclass
class Loaded:
    """One client count against one server."""

    clients: int
    stats: Stats
    rows: float  # rows per decode step
    step_ms: float  # mean decode step
    cpu: dict[str, float]
    offline: Offline


@dataclass
class Served:
    """Everything measured on one server (this tree's, or --before's)."""

    name: str
    one_post: list[tuple[float, float]]  # (server tokens/s, offline tokens/s) per repeat
    loaded: list[Loaded]
    points: list[Point] = field(default_factory=list)  # (3), this tree only
    single: Stats | None = None  # (4), this tree only


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


def overlapping(args: argparse.Namespace) -> bool:
    """Whether the server (this tree's) and the offline engine keep a decode step in flight."""
    return args.device.startswith("cuda") if args.overlap == "auto" else args.overlap == "on"


@torch.inference_mode()
def offline(model, sources: list[list[int]], params: list, rows: int, overlap: bool = False) -> Offline:
    """The server's batch code in this process, in batches of `rows` requests (request i gets params[i % len]):
    tokens/s, and decode step time as the server's engine measures it (encode excluded; with `overlap`, a round:
    launch one step, read the previous back)."""
    from model.runner.loop import DecodeLoop
    from model.runner.search import Request

    tokens, wall, decode, steps = 0, 0.0, 0.0, 0
    for start in range(0, len(sources) - rows + 1, rows):
        sync()
        t0 = time.perf_counter()
        part = enumerate(sources[start : start + rows], start)
        loop = DecodeLoop(model, overlap)
        loop.join(loop.prefill([Request(i, s, params[i % len(params)]) for i, s in part]))
        sync()
        t1 = time.perf_counter()
        while loop:
            tokens += sum(len(o.hypotheses[0].tokens) for o in loop.step() if o.finished)
            steps += 1
        sync()
        wall, decode = wall + time.perf_counter() - t0, decode + time.perf_counter() - t1
    return Offline(rows, tokens / wall, 1000 * decode / max(steps, 1))


def max_batch(args: argparse.Namespace) -> int:
    """The server's --max-batch-size (and the offline runner's): the largest client count or text count."""
    return max(args.texts, *(int(c) for c in args.clients.split(",")))


@contextlib.contextmanager
def serving(args: argparse.Namespace, path: Path, checkout: Path, rows: int) -> Iterator[tuple[str, int]]:
    """A ready server of `checkout` (its own app code) on 127.0.0.1: its base URL and launcher pid."""
    from bench.harness.server import ServerProcess

    flags = ["--model", str(path), "--device", args.device, "--dtype", args.dtype, "--max-batch-size", str(rows)]
    flags += ["--max-queue", "100000", "--log-level", "warning"]
    if checkout == ROOT:  # flags another checkout may not know
        flags += ["--workers", str(args.workers), "--overlap" if overlapping(args) else "--no-overlap"]
    pythonpath = os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH")]))  # keep the caller's
    env = {**thread_env(args.threads), "PYTHONPATH": pythonpath}
    server = ServerProcess(*flags, env=env, cwd=checkout)
    try:
        server.wait(timeout=600)
        yield server.url, server.proc.pid
    finally:
        server.stop()


def under_load(
    args, url: str, pid: int, clients: int, ck, runner, texts: list[str], sources: list[list[int]]
) -> Loaded:
    """Closed-loop clients against the server, then the offline engine at the rows per step the server ran."""
    fields, pair = load_fields(args.load, args.new_tokens), (ck.source_lang, ck.target_lang)
    before = server_metrics(url)
    with cpu_account(pid) as cpu:
        work = bodies(texts, args.requests, fields, True, pair)
        stats = closed_loop(url + "/translate", work, clients, 3600, 3600, args.client_procs)
    rows, step = per_step(before, server_metrics(url))
    same = (sources * (args.requests // len(sources) + 1))[: args.requests]
    params = server_params(ck, fields, max_batch(args))
    requests = max(1, round(rows / statistics.mean(p.beam_size for p in params)))  # the server's rows, as requests
    local = offline(runner, same, params, requests, overlapping(args))
    return Loaded(clients, stats, rows, step, cpu, local)


def measure(
    args, name: str, checkout: Path, path: Path, ck, runner, texts: list[str], sources: list[list[int]]
) -> Served:
    """Both phases on one server; `runner` is the offline engine (the model as the server's core runs it)."""
    fields, pair = load_fields(args.load, args.new_tokens), (ck.source_lang, ck.target_lang)
    params = server_params(ck, fields[:1], max_batch(args))  # one POST carries the load's first kind
    clients = [int(c) for c in args.clients.split(",")]
    result = Served(name, [], [])
    with serving(args, path, checkout, max_batch(args)) as (url, pid):
        warm = bodies(texts, 2 * clients[0], load_fields(args.load, 4), True, pair)  # connections, code paths
        closed_loop(url + "/translate", warm, clients[0], 300, 300, args.client_procs)
        for _ in range(args.repeats):
            server = one_post(url, texts[: args.texts], fields[0], pair)
            local = offline(runner, sources[: args.texts], params, args.texts, overlapping(args)).tps
            result.one_post.append((server, local))
            log(f"{name}: one POST of {args.texts} texts {server:.0f} tokens/s, offline {local:.0f}")
        for c in clients:
            ld = under_load(args, url, pid, c, ck, runner, texts, sources)
            result.loaded.append(ld)
            log(
                f"{name}: {c} clients {ld.stats.tps:.0f} tokens/s, {ld.rows:.1f} rows/step, step {ld.step_ms:.2f} "
                f"ms; offline at {ld.offline.rows} requests {ld.offline.tps:.0f} tokens/s, step "
                f"{ld.offline.step_ms:.2f} "
                f"ms; errors {ld.stats.errors}"
            )
        if checkout == ROOT and not args.no_sweep:
            make = lambda n, start: bodies(texts, n, fields, True, pair, start)  # noqa: E731
            opts = {"max_requests": args.poisson_max_requests, "timeout": 600, "max_inflight": 1024}
            opts |= {"seed": args.seed, "client_procs": args.client_procs}
            max_rps = result.loaded[-1].stats.rps
            result.points = sweep(url + "/translate", make, args.fractions, max_rps, args.poisson_seconds, opts)
    if checkout == ROOT and args.single_requests:
        with serving(args, path, checkout, 1) as (url, _):
            result.single = one_at_a_time(url + "/translate", bodies(texts, args.single_requests, fields, True,
                                                                           pair))  # fmt: skip
        log(f"{name}: one request at a time {result.single.tps:.0f} tokens/s")
    return result


def median_ratio(pairs: list[tuple[float, float]]) -> float:
    """Median of server/offline over the repeats."""
    return statistics.median(a / b for a, b in pairs)


def ms(values: tuple[float, float, float] | None) -> str:
    """p50 / p95 in milliseconds."""
    return " / ".join(f"{v * 1000:.0f}" for v in values[:2]) if values else "-"


def tables(runs: list[Served], args) -> list[str]:
    """The markdown tables: one POST, loaded, CPU."""
    lines = [
        f"One POST of {args.texts} texts (JSON), median of {args.repeats} runs alternating with the offline "
        "engine on the same texts as one batch:",
        "",
        "| server | server tokens/s | offline tokens/s | server / offline | target |",
        "|---|---|---|---|---|",
    ]
    for run in runs:
        ratio = median_ratio(run.one_post)
        met = "met" if ratio >= ONE_POST_TARGET else "**not met**"
        server, local = (statistics.median(x) for x in zip(*run.one_post, strict=True))
        lines.append(f"| {run.name} | {server:.0f} | {local:.0f} | {ratio:.2f} | >= {ONE_POST_TARGET} {met} |")
    lines += [
        "",
        f"{args.requests} requests per client count, streamed (SSE), closed loop over {args.client_procs} "
        "client processes; the server's rows per step and decode step from its /metrics; offline = the same "
        "batch code in one process at that many rows (as requests: rows / the load's mean beam):",
        "",
        "| server | clients | tokens/s | TTFT p50 / p95 (ms) | latency p50 / p95 (ms) | rows per step | "
        "decode step (ms) | offline step at those rows (ms) | offline tokens/s | server / offline tokens/s | "
        f"errors | >= {LOADED_TARGET} (target) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        for ld in run.loaded:
            s, o = ld.stats, ld.offline
            errors, share = s.requests - s.ok, s.tps / o.tps
            lines.append(
                f"| {run.name} | {ld.clients} | {s.tps:.0f} | {ms(s.ttft)} | {ms(s.latency)} | {ld.rows:.1f} "
                f"| {ld.step_ms:.2f} | {o.step_ms:.2f} | {o.tps:.0f} | {share:.2f} | {errors} "
                f"| {'met' if share >= LOADED_TARGET else '**not met**'} |"
            )
    for run in runs:
        for ld in run.loaded:
            lines += ["", *cpu_lines(ld.cpu, ld.stats.client_cpu, f"{run.name}, {ld.clients} clients")]
    return lines + single_lines(runs[0], args)


def single_lines(run: Served, args) -> list[str]:
    """Markdown: (4), one request at a time, against (2) at the largest client count; then (3), the sweep."""
    lines = []
    if run.single is not None:
        s, loaded = run.single, run.loaded[-1]
        ratio = loaded.stats.tps / s.tps if s.tps else 0.0
        met = "met" if ratio >= SINGLE_TARGET else "**not met**"
        lines += [
            "", f"One request at a time: a server with `--max-batch-size 1`, one client, {s.requests} requests "
            f"(streamed): {s.tps:.0f} tokens/s, latency p50 / p95 {ms(s.latency)} ms, {s.requests - s.ok} errors. "
            f"{loaded.clients} clients on the batching server get {ratio:.1f}x that (target >= "
            f"{SINGLE_TARGET:g}x: {met}).",
        ]  # fmt: skip
    if run.points:
        lines += ["", *sweep_lines(run.points, args.poisson_seconds, args.seed, args.plot_name)]
    return lines


def render(args, runs: list[Served], model: str) -> str:
    """The whole markdown section."""
    info = machine_info()
    cmd = command("bench.serving")
    return "\n".join(
        [
            section_heading(args.load),
            "",
            f"Generated by `{cmd}` on {info['date']}.",
            "",
            machine_line(info)[:-1] + f"; load average (1 min) {info['load']} at the end: the machine was shared.",
            f"- Model: {model}; device {args.device}, dtype {args.dtype} on both sides; torch threads {args.threads} "
            "(the core's OMP_NUM_THREADS and the offline engine's).",
            f"- Work: {LOAD_WORDS[args.load]}, exactly {args.new_tokens} tokens per text (`min_new_tokens = "
            "max_new_tokens`); source "
            "sentences of spread lengths, the same ones on both sides. Servers run `--max-batch-size` = the largest "
            f"client count or text count and `--workers {args.workers}`, overlap "
            f"{'on' if overlapping(args) else 'off'} in this tree's server and the offline engine (`--before`: that "
            "checkout's defaults).",
            "",
            *tables(runs, args),
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    """Measure this tree's server (and --before's), print the section, write it unless --no-write."""
    args = parse_args(argv)
    os.environ.update(thread_env(args.threads))
    torch.set_num_threads(args.threads)
    keep_freed_memory()  # the offline engine runs here, on the host allocator of the server's engine core
    with tempfile.TemporaryDirectory(prefix="bench_serving_") as tmp:
        path = model_dir(args, Path(tmp))
        ck = load(path, device=args.device, dtype=choose(args.dtype, args.device)[0])
        n = max(args.texts, 4 * max(int(c) for c in args.clients.split(",")))
        texts, sources, _ = pick_sentences(ck.tokenizer, n, 128, args.seed)
        s = Settings(max_batch_size=max_batch(args))
        runner = decoder(ck.model, s, budget(ck.model, s).rows)  # on CUDA: static shapes, CUDA graphs
        offline(runner, sources[:8], server_params(ck, load_fields(args.load, 4), 8), 8)  # warm-up
        runs = [measure(args, "this tree", ROOT, path, ck, runner, texts, sources)]
        if args.before:
            before = args.before.resolve()
            runs.append(measure(args, f"before ({args.before.name})", before, path, ck, runner, texts, sources))
    model = (
        f"{ck.name} ({ck.parameters / 1e6:.1f} M parameters, {ck.precision}, d_model "
        f"{ck.model.cfg.d_model}, {ck.model.cfg.encoder_layers}+{ck.model.cfg.decoder_layers} layers)"
    )
    args.plot_name = None
    if runs[0].points and not args.no_write:
        png = args.plot or args.out.parent / PLOT_NAME
        title = f"{ck.name}: {args.new_tokens} tokens per request, {args.load}"
        plot(runs[0].points, runs[0].loaded[-1].stats.rps, title, png)
        args.plot_name = os.path.relpath(png.resolve(), args.out.resolve().parent)
    section = render(args, runs, model)
    print(section)
    if not args.no_write:
        write_section(args.out, section)
        log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
