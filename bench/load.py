"""Serving benchmark: the HTTP server under load vs the offline engine vs one request at a time.

    python -m bench.load            # full run on model/builtin/en-es (~7 min on 2 idle cores): writes the
                                    # "## Serving" section of docs/benchmarks.md and docs/latency_vs_load.png
    python -m bench.load --tiny --requests 16 --concurrency 8 --batch-size 8 --single-requests 4 \\
        --new-tokens 16 --rates 2 --poisson-seconds 3 --out /tmp/bench/benchmarks.md   # smoke run (~1 min)

Compares, on the same weights, the same source sentences and the same decoding work (greedy, exactly
--new-tokens tokens per request: max_new_tokens = min_new_tokens):
  (a) the real server (`python -m app`, --max-batch-size 64) driven by 64 concurrent clients (closed loop);
  (b) the engine offline: `model.generate.generate` in-process on batches of 64 (the server's DecodeBatch code);
  (c) the same weights served one request at a time: a server with --max-batch-size 1 and one client.
For reference, (a') repeats (a) with streaming toggled and (c') drives the (a) server with one client. Then
Poisson arrivals at several rates (fractions of (a)'s throughput) give latency and TTFT against load.
Only 127.0.0.1 is used; every loop is bounded in requests (--requests, ...) and time (--timeout, --phase-budget).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch

from bench.loadgen import Stats, closed_loop, open_loop
from bench.machine import machine_info, machine_line
from bench.procs import cpu_account, cpu_lines
from bench.report import DOC, command, log, write_section

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = ROOT / "model" / "builtin" / "en-es"
SENTENCES = ROOT / "training" / "work" / "test.en"
PLOT_NAME = "latency_vs_load.png"
SECTION = "## Serving (bench/load.py)"
TARGETS = [("a", "b", 0.85), ("a", "c", 10.0)]  # tokens/s ratio, minimum
REFERENCE = [("a'", "b"), ("c'", "c")]  # ratios shown for reference, no target
ORDER = ["a", "b", "a'", "a natural", "b natural", "c", "c'"]


def floats(text: str) -> list[float]:
    """A comma-separated list of numbers."""
    return [float(x) for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags; the defaults are the full run."""
    p = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, help=f"native or Marian model dir (default {DEFAULT_MODEL.relative_to(ROOT)})")
    p.add_argument(
        "--tiny", action="store_true", help="a random tiny model (harness.fixtures.make_native), for smoke runs"
    )
    p.add_argument("--device", default="cpu", help="server --device and offline device (default cpu)")
    p.add_argument("--threads", type=int, default=2, help="OMP/MKL threads of the server and offline engine (2)")
    p.add_argument("--sentences", type=int, default=200, help="distinct source sentences (200)")
    p.add_argument("--max-src-tokens", type=int, default=128, help="skip longer sentences (128)")
    p.add_argument("--requests", type=int, default=512, help="requests for (a) and sentences for (b) (512)")
    p.add_argument("--concurrency", type=int, default=64, help="clients in (a) (64)")
    p.add_argument("--batch-size", type=int, default=64, help="server --max-batch-size in (a), offline batch (64)")
    p.add_argument("--single-requests", type=int, default=32, help="requests for (c) and (c') (32)")
    p.add_argument("--new-tokens", type=int, default=64, help="tokens generated per request, forced (64)")
    p.add_argument("--natural", action="store_true", help="also (a) and (b) at natural length (EOS allowed)")
    p.add_argument("--natural-max-tokens", type=int, default=128, help="max_new_tokens of --natural (128)")
    p.add_argument("--no-stream", action="store_true", help="plain JSON requests (no TTFT) instead of SSE")
    p.add_argument("--skip-extra", action="store_true", help="skip the reference rows (a') and (c')")
    p.add_argument(
        "--fractions",
        type=floats,
        default=[0.25, 0.5, 0.75, 0.9, 1.0],
        help="Poisson rates as fractions of (a)'s req/s (0.25,0.5,0.75,0.9,1)",
    )
    p.add_argument("--rates", type=floats, help="Poisson rates in requests/s (overrides --fractions)")
    p.add_argument("--poisson-seconds", type=float, default=30.0, help="arrivals span this long per rate (30)")
    p.add_argument("--poisson-max-requests", type=int, default=2000, help="cap per rate (2000)")
    p.add_argument("--max-inflight", type=int, default=1024, help="client connections in the Poisson runs (1024)")
    p.add_argument("--client-procs", type=int, default=4, help="load generator processes (4)")
    p.add_argument("--workers", type=int, default=1, help="server HTTP worker processes (1)")
    p.add_argument("--max-queue", type=int, default=100000, help="server --max-queue (100000: no 503s)")
    p.add_argument("--timeout", type=float, default=300.0, help="per-request timeout, s (300)")
    p.add_argument("--phase-budget", type=float, default=900.0, help="no new closed-loop request after this, s")
    p.add_argument("--startup-timeout", type=float, default=300.0, help="server readiness timeout, s (300)")
    p.add_argument("--out", type=Path, default=DOC, help="markdown file whose serving section is replaced")
    p.add_argument("--plot", type=Path, help=f"PNG path (default: {PLOT_NAME} next to --out)")
    p.add_argument("--no-write", action="store_true", help="print the section only, write no file")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


# --------------------------------------------------------------------------- inputs


def model_dir(args: argparse.Namespace, tmp: Path) -> Path:
    """The model to benchmark: --tiny builds a random one, else --model or the built-in model."""
    if args.tiny:
        from harness.fixtures import make_native

        return make_native(tmp / "tiny-en-es", seed=args.seed)
    path = (args.model or DEFAULT_MODEL).resolve()
    if not (path / "config.json").exists():
        raise SystemExit(f"no model at {path}: pass --model DIR (or --tiny for a smoke run)")
    return path


def candidate_sentences(seed: int) -> tuple[list[str], str]:
    """English source lines: training/work/test.en when present, else synthetic ones; and where they came from."""
    if SENTENCES.exists():
        lines = [s.strip() for s in SENTENCES.read_text(encoding="utf-8").splitlines()]
        lines = [s for s in lines if 3 <= len(s.split()) <= 60]
        if lines:
            return lines, str(SENTENCES.relative_to(ROOT))
    from harness.fixtures import EN, corpus

    return [s.strip() for s in corpus(EN, n=2000, seed=seed)], "synthetic (harness.fixtures.corpus)"


def pick_sentences(tokenizer, n: int, max_tokens: int, seed: int) -> tuple[list[str], list[list[int]], str]:
    """n distinct sentences of evenly spread lengths (<= max_tokens source tokens), shuffled; texts and ids."""
    lines, origin = candidate_sentences(seed)
    encoded = {}
    for text in dict.fromkeys(lines):
        ids = tokenizer.encode(text)
        if len(ids) <= max_tokens:
            encoded[text] = ids
    ranked = sorted(encoded, key=lambda t: (len(encoded[t]), t))
    if len(ranked) > n:
        ranked = [ranked[round(i * (len(ranked) - 1) / (n - 1))] for i in range(n)] if n > 1 else ranked[:1]
    random.Random(seed).shuffle(ranked)
    return ranked, [encoded[t] for t in ranked], origin


def cycle(items: list, n: int, start: int = 0) -> list:
    """n items taken round-robin from `items`, beginning at index `start`."""
    return [items[(start + i) % len(items)] for i in range(n)]


def decode_fields(new_tokens: int, forced: bool) -> dict:
    """The `parameters` of every request: greedy, `new_tokens` at most (exactly, when forced)."""
    return {"beam_size": 1, "max_new_tokens": new_tokens, "min_new_tokens": new_tokens if forced else 0}


# --------------------------------------------------------------------------- (b) the engine offline


def offline(model, sources: list[list[int]], fields: dict, batch: int) -> list[tuple[int, float]]:
    """Generate for every source in batches of `batch`, as the server's engine would: (tokens, seconds) per row."""
    from model.generate import generate
    from model.params import DecodeParams
    from model.search import Request

    params, out = DecodeParams(**fields), []
    for start in range(0, len(sources), batch):
        chunk = [Request(start + i, src, params) for i, src in enumerate(sources[start : start + batch])]
        t0 = time.perf_counter()
        results = generate(model, chunk)
        seconds = time.perf_counter() - t0
        out += [(len(hyps[0].tokens), seconds / len(chunk)) for hyps in results]
    return out


def offline_stats(rows: list[tuple[int, float]]) -> Stats:
    """A Stats row for offline generation: throughput over the summed batch wall time, no per-request times."""
    seconds = sum(s for _, s in rows)
    counts = [t for t, _ in rows]
    rps = len(rows) / seconds if seconds else 0.0
    tps = sum(counts) / seconds if seconds else 0.0
    return Stats(len(rows), len(rows), seconds, rps, tps, None, None, 0.0, sum(counts), (min(counts), max(counts)))


# --------------------------------------------------------------------------- servers


def thread_env(threads: int) -> dict[str, str]:
    """Environment pinning the intra-op thread count."""
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def server_flags(args: argparse.Namespace, path: Path, max_batch: int) -> list[str]:
    """`python -m app` flags of a benchmarked server."""
    return [
        "--model",
        str(path),
        "--device",
        args.device,
        "--max-batch-size",
        str(max_batch),
        "--max-queue",
        str(args.max_queue),
        "--workers",
        str(args.workers),
        "--log-level",
        "warning",
    ]


@contextlib.contextmanager
def serving(args: argparse.Namespace, path: Path, max_batch: int) -> Iterator[tuple[str, int]]:
    """A ready server subprocess on 127.0.0.1 (yields its /translate URL and pid); stopped on exit."""
    from harness.server import ServerProcess

    t0 = time.perf_counter()
    server = ServerProcess(*server_flags(args, path, max_batch), env=thread_env(args.threads))
    try:
        server.wait(timeout=args.startup_timeout)
        log(f"server --max-batch-size {max_batch} ready in {time.perf_counter() - t0:.1f}s ({server.log_path})")
        yield server.url + "/translate", server.proc.pid
    finally:
        server.stop()


# --------------------------------------------------------------------------- the run


@dataclass
class Workload:
    """What every mode translates: the sentences (texts and source ids) and the request bodies."""

    texts: list[str]
    sources: list[list[int]]
    origin: str
    pair: tuple[str, str]
    stream: bool

    def bodies(self, n: int, fields: dict, start: int = 0) -> list[dict]:
        """n request bodies cycling through the sentences from `start`."""
        texts = cycle(self.texts, n, start)
        return [
            {"q": t, "source": self.pair[0], "target": self.pair[1], "stream": self.stream, "parameters": fields}
            for t in texts
        ]


@dataclass
class Row:
    """One measured mode of the main table (key: a, b, c, c', ...)."""

    key: str
    label: str
    stats: Stats
    cpu: dict[str, float] | None = None  # cpu_account() of the run


@dataclass
class Point:
    """One Poisson rate of the sweep."""

    rate: float
    fraction: float | None
    stats: Stats


@dataclass
class Results:
    """Everything the report needs."""

    rows: list[Row]
    points: list[Point]
    model: str
    work: Workload
    load: tuple[float, float]  # 1-min load average before and after


def workload(args: argparse.Namespace, ck) -> Workload:
    """The sentences picked with the checkpoint's tokenizer."""
    texts, sources, origin = pick_sentences(ck.tokenizer, args.sentences, args.max_src_tokens, args.seed)
    if not texts:
        raise SystemExit(f"no sentence of at most {args.max_src_tokens} source tokens")
    return Workload(texts, sources, origin, (ck.source_lang, ck.target_lang), not args.no_stream)


def closed(args: argparse.Namespace, url: str, bodies: list[dict], concurrency: int) -> Stats:
    """A closed-loop run (bounded by --phase-budget and --timeout)."""
    return closed_loop(url, bodies, concurrency, args.timeout, args.phase_budget, args.client_procs)


def warm_up(args: argparse.Namespace, url: str, work: Workload, concurrency: int) -> None:
    """Open connections and touch the code paths with short requests (not measured)."""
    closed(args, url, work.bodies(max(concurrency, 1), decode_fields(4, forced=True)), concurrency)


def timed(name: str, run: Callable[[], Stats]) -> Stats:
    """Run a phase, logging its duration and headline numbers."""
    t0 = time.perf_counter()
    stats = run()
    extra = f", errors {stats.errors}" if stats.errors else ""
    log(f"{name}: {stats.rps:.2f} req/s, {stats.tps:.0f} tokens/s ({time.perf_counter() - t0:.1f}s{extra})")
    return stats


def batched_vs_offline(
    args: argparse.Namespace, url: str, work: Workload, model, natural: bool, pid: int | None = None
) -> list[Row]:
    """(a) on the running server, and (b) offline on the same sources: half before (a), half after it."""
    if natural:
        fields, key, label = decode_fields(args.natural_max_tokens, forced=False), " natural", ", natural length"
    else:
        fields, key, label = decode_fields(args.new_tokens, forced=True), "", ""
    ids = cycle(work.sources, args.requests)
    half = (args.requests // 2 // args.batch_size) * args.batch_size or args.requests // 2
    before = offline(model, ids[:half], fields, args.batch_size)
    with cpu_account(pid) as cpu:
        a = timed(f"(a){key}", lambda: closed(args, url, work.bodies(args.requests, fields), args.concurrency))
    b = offline_stats(before + offline(model, ids[half:], fields, args.batch_size))
    log(f"(b){key}: {b.rps:.2f} req/s, {b.tps:.0f} tokens/s")
    return [
        Row("a" + key, f"(a) server, {args.concurrency} concurrent clients{label}", a, cpu),
        Row("b" + key, f"(b) engine offline, batch {args.batch_size}{label}", b),
    ]


def extra_rows(args: argparse.Namespace, url: str, work: Workload) -> list[Row]:
    """For reference, on the batching server: (a') = (a) with streaming toggled, (c') = one client."""
    forced = decode_fields(args.new_tokens, forced=True)
    toggled = [{**b, "stream": not work.stream} for b in work.bodies(args.requests, forced)]
    single = work.bodies(args.single_requests, forced)
    other = "plain JSON requests" if work.stream else "streamed (SSE)"
    return [
        Row("a'", f"(a') as (a), {other}", timed("(a')", lambda: closed(args, url, toggled, args.concurrency))),
        Row(
            "c'",
            f"(c') server --max-batch-size {args.batch_size}, 1 client",
            timed("(c')", lambda: closed(args, url, single, 1)),
        ),
    ]


def poisson_rates(args: argparse.Namespace, max_rps: float) -> list[tuple[float, float | None]]:
    """(rate, fraction of (a)) pairs to sweep."""
    if args.rates:
        return [(r, r / max_rps if max_rps else None) for r in args.rates]
    return [(f * max_rps, f) for f in args.fractions] if max_rps else []


def sweep(args: argparse.Namespace, url: str, work: Workload, fields: dict, max_rps: float) -> list[Point]:
    """Open-loop Poisson runs, one per rate, about --poisson-seconds of arrivals each."""
    points = []
    for k, (rate, fraction) in enumerate(poisson_rates(args, max_rps)):
        n = max(1, min(args.poisson_max_requests, round(rate * args.poisson_seconds)))
        bodies = work.bodies(n, fields, start=17 * k)
        run = partial(open_loop, url, bodies, rate, args.timeout, args.max_inflight, args.seed + k, args.client_procs)
        stats = timed(f"Poisson {rate:.2f} req/s ({n} requests)", run)
        points.append(Point(rate, fraction, stats))
    return points


def run_all(args: argparse.Namespace, path: Path) -> Results:
    """Every phase, one at a time: the batching server (a, b, c', sweep), then the one-at-a-time server (c)."""
    from model.checkpoint import load

    ck = load(path, device=args.device)
    work = workload(args, ck)
    load_before = os.getloadavg()[0]
    offline(ck.model, work.sources[: args.batch_size], decode_fields(4, forced=True), args.batch_size)  # warm-up
    with serving(args, path, args.batch_size) as (url, pid):
        warm_up(args, url, work, args.concurrency)
        rows = batched_vs_offline(args, url, work, ck.model, natural=False, pid=pid)
        rows += [] if args.skip_extra else extra_rows(args, url, work)
        rows += batched_vs_offline(args, url, work, ck.model, natural=True) if args.natural else []
        points = sweep(args, url, work, decode_fields(args.new_tokens, forced=True), rows[0].stats.rps)
    with serving(args, path, 1) as (url, _):
        warm_up(args, url, work, 1)
        single = work.bodies(args.single_requests, decode_fields(args.new_tokens, forced=True))
        c = timed("(c)", lambda: closed(args, url, single, 1))
    rows.append(Row("c", "(c) server --max-batch-size 1, 1 client", c))
    rows.sort(key=lambda r: ORDER.index(r.key))
    return Results(rows, points, describe_model(ck, path, args.tiny), work, (load_before, os.getloadavg()[0]))


# --------------------------------------------------------------------------- report


def describe_model(ck, path: Path, tiny: bool) -> str:
    """Name, directory and shape of the checkpoint."""
    cfg = ck.model.cfg
    params = ck.parameters
    where = (
        "a random tiny model (--tiny)" if tiny else f"`{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}`"
    )
    return (
        f"{ck.name} from {where}: {params / 1e6:.2f} M parameters, d_model {cfg.d_model}, "
        f"{cfg.encoder_layers}+{cfg.decoder_layers} layers, {cfg.n_heads} heads, ffn {cfg.d_ff}, "
        f"vocab {cfg.tgt_vocab_size}, {ck.precision} on {ck.model.device}"
    )


def ms(values: tuple[float, float, float] | None) -> str:
    """p50 / p95 / p99 in milliseconds."""
    return " / ".join(f"{v * 1000:.0f}" for v in values) if values else "-"


def errors(stats: Stats) -> str:
    """Failed requests, by kind."""
    text = ", ".join(f"{k}: {v}" for k, v in stats.errors.items()) if stats.errors else "0"
    return text if stats.complete else f"{text} (stopped at the phase budget)"


def main_table(rows: list[Row]) -> str:
    """Markdown: one line per mode."""
    head = "| mode | requests | req/s | tokens/s | TTFT p50 / p95 / p99 (ms) | latency p50 / p95 / p99 (ms) | errors |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for r in rows:
        s = r.stats
        cells = [r.label, str(s.requests), f"{s.rps:.2f}", f"{s.tps:.0f}", ms(s.ttft), ms(s.latency), errors(s)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ratio(rows: list[Row], a: str, b: str) -> float | None:
    """tokens/s of row a over row b (None when either is missing or zero)."""
    by = {r.key: r.stats for r in rows}
    return by[a].tps / by[b].tps if a in by and b in by and by[b].tps else None


def ratios(rows: list[Row]) -> list[tuple[str, float | None, float]]:
    """(name, measured tokens/s ratio or None, target) for each target."""
    return [(f"({a}) / ({b}) tokens/s", ratio(rows, a, b), want) for a, b, want in TARGETS]


def target_table(rows: list[Row]) -> str:
    """Markdown: the ratios against their targets, then reference ratios."""
    lines = ["| ratio | measured | target met |", "|---|---|---|"]
    for name, value, want in ratios(rows):
        measured = f"{value:.2f}" if value is not None else "-"
        met = "-" if value is None else ("yes" if value >= want else "**no**")
        lines.append(f"| {name} >= {want:g} | {measured} | {met} |")
    for a, b in REFERENCE:
        value = ratio(rows, a, b)
        if value is not None:
            lines.append(f"| ({a}) / ({b}) tokens/s, for reference | {value:.2f} | - |")
    return "\n".join(lines)


def sweep_table(points: list[Point]) -> str:
    """Markdown: one line per Poisson rate."""
    head = "| offered req/s | x (a) | requests | achieved req/s | tokens/s | TTFT p50 / p95 / p99 (ms) "
    lines = [head + "| latency p50 / p95 / p99 (ms) | errors |", "|---|---|---|---|---|---|---|---|"]
    for p in points:
        s = p.stats
        frac = f"{p.fraction:.2f}" if p.fraction is not None else "-"
        cells = [f"{p.rate:.2f}", frac, str(s.requests), f"{s.rps:.2f}", f"{s.tps:.0f}", ms(s.ttft), ms(s.latency)]
        lines.append("| " + " | ".join([*cells, errors(s)]) + " |")
    return "\n".join(lines)


def token_check(rows: list[Row], new_tokens: int) -> str:
    """Whether every forced-length request generated exactly new_tokens tokens."""
    bad = [
        f"{r.key}: {r.stats.tokens_range[0]}-{r.stats.tokens_range[1]}"
        for r in rows
        if " " not in r.key and r.stats.tokens_range not in (None, (new_tokens, new_tokens))
    ]
    return "checked per request" if not bad else "**check failed**, tokens per request: " + "; ".join(bad)


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
        if max_rps:
            ax.axvline(max_rps, color="grey", lw=1, ls="-.", label=f"(a) closed loop: {max_rps:.1f} req/s")
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


def method(args: argparse.Namespace, res: Results, info: dict[str, str]) -> list[str]:
    """The bullet list that says what was measured and how."""
    lens = sorted(map(len, res.work.sources))
    requests = "plain JSON requests (no TTFT)" if args.no_stream else "every request streamed (SSE)"
    reference = " For reference: (a') repeats (a) with streaming toggled; (c') is the (a) server with one client."
    extra = "" if args.skip_extra else reference
    natural = (
        f" Natural-length rows: EOS allowed, `max_new_tokens = {args.natural_max_tokens}`." if args.natural else ""
    )
    return [
        machine_line(info, "httpx")[:-1] + f". The machine was shared: load average (1 min) {res.load[0]:.1f} "
        f"before, {res.load[1]:.1f} after.",
        f"- Model: {res.model}.",
        f"- Threads: the servers run with OMP_NUM_THREADS={args.threads}, the offline engine with "
        f"torch.set_num_threads({args.threads}). The load generator ({args.client_procs} client processes, aiohttp) "
        "runs on the same machine and shares its cores with the server.",
        f"- Work: {len(res.work.texts)} distinct English sentences from {res.work.origin} (evenly spread lengths, "
        f"{lens[0]}-{lens[-1]} source tokens, median {int(statistics.median(lens))}), cycled in the same order in "
        f"every mode. Greedy with `max_new_tokens = min_new_tokens = {args.new_tokens}`: EOS is suppressed until "
        f"the limit, so every request does the same work, {args.new_tokens} generated tokens "
        f"({token_check(res.rows, args.new_tokens)}).{natural}",
        f"- (a) `python -m app --max-batch-size {args.batch_size} --max-queue {args.max_queue} --log-level warning` "
        f"(other settings default), {args.concurrency} clients in a closed loop (each sends its next request as "
        f"soon as its answer arrives), {args.requests} requests after a short warm-up, {requests}. req/s and "
        "tokens/s: successful requests and their `details.generated_tokens` over the wall time from the first "
        "send to the last answer.",
        f"- (b) `model.generate.generate` in-process on the same sources in batches of {args.batch_size} (the "
        "DecodeBatch code the server's engine runs), half just before (a) and half just after it; wall time of "
        "the batches summed.",
        f"- (c) the same weights served one request at a time: a server with `--max-batch-size 1` and one client, "
        f"{args.single_requests} requests; the (a)/(c) target uses this row.{extra}",
        "- TTFT: from sending a request to its first `event: token`; latency: to its `event: done` (or the JSON "
        "answer). Client-side times; percentiles interpolated linearly.",
    ]


def cpu_table(rows: list[Row]) -> list[str]:
    """Where the machine's CPU went during (a) (empty without /proc)."""
    row = next((r for r in rows if r.key == "a" and r.cpu), None)
    return cpu_lines(row.cpu, row.stats.client_cpu, "(a)") if row else []


def render(args: argparse.Namespace, res: Results, plot_name: str | None) -> str:
    """The whole markdown section."""
    info = machine_info("httpx")
    cmd = command("bench.load")
    parts = [SECTION, "", f"Generated by `{cmd}` on {info['date']}.", "", *method(args, res, info), ""]
    parts += [main_table(res.rows), "", target_table(res.rows), ""]
    parts += cpu_table(res.rows)
    if res.points:
        lag = max(p.stats.max_lag for p in res.points)
        parts += [
            "### Latency against load (Poisson arrivals)",
            "",
            f"Open loop on the (a) server: requests arrive as a Poisson process (seed {args.seed}) for about "
            f"{args.poisson_seconds:g} s per rate (at most {args.poisson_max_requests} requests), whether or not "
            "earlier ones were answered. Latency and TTFT count from the scheduled arrival, so any client-side "
            f"backlog is included (worst send delay {lag * 1000:.0f} ms).",
            "",
        ]
        parts += [f"![latency against load]({plot_name})", ""] if plot_name else []
        parts += [sweep_table(res.points), ""]
    return "\n".join(parts)


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the markdown section and write it (and the plot) unless --no-write."""
    args = parse_args(argv)
    os.environ.update(thread_env(args.threads))
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_load_") as tmp:
        res = run_all(args, model_dir(args, Path(tmp)))
    plot_path, plot_name = args.plot or args.out.parent / PLOT_NAME, None
    if res.points and not args.no_write:
        title = f"{res.model.split(' from ')[0]}: {args.new_tokens} tokens per request, greedy"
        plot(res.points, res.rows[0].stats.rps, title, plot_path)
        plot_name = os.path.relpath(plot_path.resolve(), args.out.resolve().parent)
    section = render(args, res, plot_name)
    print(section)
    for name, value, want in ratios(res.rows):
        log(f"{name}: " + (f"{value:.2f} (target >= {want:g})" if value is not None else "-"))
    if not args.no_write:
        write_section(args.out, section, SECTION)
        log(f"wrote {args.out}" + (f" and {plot_path}" if plot_name else ""))
    log(f"total {time.perf_counter() - t0:.0f}s")
    stats = [r.stats for r in res.rows] + [p.stats for p in res.points]
    return 1 if any(s.ok < s.requests or not s.complete for s in stats) else 0


if __name__ == "__main__":
    raise SystemExit(main())
