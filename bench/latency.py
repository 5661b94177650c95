"""The latency one user feels: one sentence at a time (batch 1) through the server, against the offline engine and
CTranslate2 translating the same sentence, on the same random Marian weights (`bench.marian.CPU`).

    python -m bench.latency                          # --dtype float32,int8; writes its docs/benchmarks.md section
    python -m bench.latency --before /tmp/main       # the server of another checkout takes turns too (before/after)
    python -m bench.latency --requests 8 --new-tokens 8 --dtype int8 --no-write     # smoke run

For each --dtype, a server (`python -m app --dtype D`, default settings otherwise; with --before a second one from
that checkout), our offline engine (`model.runner.generate.generate` on the checkpoint loaded as the server loads it)
and
CTranslate2 (`compute_type` D), each in a process of its own, take turns on the same sentence, the start rotating:
one JSON POST (greedy, exactly --new-tokens tokens), or one offline call. p50 / p95 of the wall time per request;
the server's own `details.total_ms` (from the HTTP worker's job to the engine's result) splits its time into the
engine core's part and the rest (HTTP, JSON, tokenization, detokenization, the result's way back). The machine is
shared, so the turns are interleaved and the ratios are what counts."""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from pathlib import Path

import httpx

from bench import engines, marian
from bench.loadgen import percentile
from bench.machine import machine_info, machine_line
from bench.report import DOC, command, log, write_section
from bench.timing import Isolated

SECTION = "## One user: latency at batch 1 through the server on {cpu} (bench/latency.py)"  # one per CPU kind
CT2_TYPE = {"float32": "float32", "int8": "int8", "bfloat16": "bfloat16"}
ROOT = Path(__file__).resolve().parents[1]
SERVER, BEFORE = "server", "server (--before)"


def ct2_engine(ct2_dir: Path, compute_type: str, threads: int) -> engines.Engine:
    """CTranslate2 in its worker (module level: spawned workers build it by reference)."""
    return engines.ct2(ct2_dir, compute_type, threads)


def offline_engine(hf_dir: Path, dtype: str) -> engines.Engine:
    """Our offline engine in its worker, on the checkpoint loaded as the server's --dtype loads it."""
    from model.loading.checkpoint import load

    return engines.ours(load(hf_dir, dtype=dtype).model)


def start_server(checkout: Path, hf_dir: Path, dtype: str, threads: int, spec: str | None = None):
    """A server of `checkout` (its own app code) on the model (`spec`, default "en-de=DIR"), default settings
    otherwise (no translation cache: ServerProcess's default); not waited for."""
    from bench.harness.server import ServerProcess

    pythonpath = os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH")]))
    env = {"OMP_NUM_THREADS": str(threads), "PYTHONPATH": pythonpath}
    args = ("--model", spec or f"en-de={hf_dir}", "--dtype", dtype, "--log-level", "warning")
    return ServerProcess(*args, env=env, cwd=checkout)


def one_dtype(args, hf_dir: Path, ct2_dir: Path, dtype: str, ids: list[int], text: str) -> dict[str, list[float]]:
    """Interleaved single-sentence timings in seconds: {contestant: [...], "<server> core": [...]}."""
    params = {"beam_size": 1, "max_new_tokens": args.new_tokens, "min_new_tokens": args.new_tokens}
    body = {"q": text, "source": "en", "target": "de", "parameters": params}
    checkouts = {SERVER: ROOT} | ({BEFORE: args.before.resolve()} if args.before else {})
    times: dict[str, list[float]] = {}
    with contextlib.ExitStack() as stack:
        servers = {name: start_server(c, hf_dir, dtype, args.threads) for name, c in checkouts.items()}
        for proc in servers.values():
            stack.callback(proc.stop)
        others = {
            "offline": Isolated(f"offline {dtype}", offline_engine, (hf_dir, dtype), args.threads),
            "CT2": Isolated(f"CT2 {dtype}", ct2_engine, (ct2_dir, CT2_TYPE[dtype], args.threads), args.threads),
        }
        for other in others.values():
            stack.callback(other.close)
        urls = {name: proc.wait(timeout=600).url for name, proc in servers.items()}
        client = stack.enter_context(httpx.Client(timeout=60))
        names = [*urls, *others]
        for k in range(args.requests + args.warmup):
            for j in range(len(names)):
                name = names[(k + j) % len(names)]
                if name in urls:
                    start = time.perf_counter()
                    r = client.post(urls[name] + "/translate", json=body)
                    seconds = time.perf_counter() - start
                    details = r.json()["details"]
                    assert details["generated_tokens"] == args.new_tokens, r.text
                    if k >= args.warmup:
                        times.setdefault(f"{name} core", []).append(details["total_ms"] / 1000)
                else:
                    out, seconds = others[name].timed([ids], 1, args.new_tokens)
                    assert len(out[0]) == args.new_tokens
                if k >= args.warmup:
                    times.setdefault(name, []).append(seconds)
    return times


def ms(xs: list[float], q: float) -> str:
    """A percentile in milliseconds."""
    return f"{1000 * percentile(xs, q):.1f}"


def row(dtype: str, name: str, t: dict[str, list[float]]) -> str:
    """One server's table row: its p50 / p95, the core's share, and the ratios to offline and CT2 (p50)."""
    p50 = percentile(t[name], 50)
    rest = [a - b for a, b in zip(t[name], t[f"{name} core"], strict=True)]
    return (
        f"| {dtype} | {name} | {ms(t[name], 50)} / {ms(t[name], 95)} | {ms(t[f'{name} core'], 50)} | {ms(rest, 50)} | "
        f"{ms(t['offline'], 50)} / {ms(t['offline'], 95)} | {ms(t['CT2'], 50)} / {ms(t['CT2'], 95)} | "
        f"{p50 / percentile(t['offline'], 50):.2f}x | {percentile(t['CT2'], 50) / p50:.2f}x |"
    )


def render(args, info: dict[str, str], rows: dict[str, dict[str, list[float]]], tokens: int, load: tuple) -> str:
    """The markdown section."""
    table = [
        "| dtype | server | server p50 / p95 (ms) | in the core p50 (ms) | outside the core p50 (ms) "
        "| offline p50 / p95 (ms) | CT2 p50 / p95 (ms) | server / offline (p50) | CT2 / server (p50) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for dtype, t in rows.items():
        table += [row(dtype, name, t) for name in (SERVER, BEFORE) if name in t]
    before = f" `{BEFORE}` is the server of another checkout (`--before`), taking the same turns."
    return "\n".join([
        SECTION.format(cpu=info["kind"]), "", f"Generated by `{command('bench.latency')}` on {info['date']}.", "",
        machine_line(info, "ctranslate2") + f" The machine was shared (load average {load[0]:.1f} before, "
        f"{load[1]:.1f} after).",
        f"- Model: random `MarianMTModel` ({marian.describe(marian.CPU)}), served by `python -m app --model DIR "
        f"--dtype D` (default settings otherwise, OMP_NUM_THREADS={args.threads}), run offline by "
        f"`model.runner.generate.generate` on the checkpoint loaded with the same dtype ({args.threads} thread(s)), "
        "and "
        f"converted for CTranslate2 (`compute_type` D, intra_threads={args.threads}); each in its own process.",
        f"- Work: one sentence of {tokens} source tokens, {args.requests} times (after {args.warmup} warm-up turns), "
        f"greedy, exactly {args.new_tokens} new tokens; the server gets one JSON POST at a time from one client "
        "(HTTP, tokenization and detokenization included), the offline engine and CTranslate2 one call on the token "
        "ids; they take turns request by request, the start rotating. \"In the core\" is the server's "
        "`details.total_ms` (the HTTP worker's job to the engine core's result: submit message, admission, encode, "
        "decode steps); \"outside\" is the rest of the client's time (HTTP, validation, tokenization, the result's "
        f"message, detokenization, JSON). Lower is better; the last column > 1 means the server answers faster."
        + (before if args.before else ""),
        "", *table, "",
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Build the model, time each dtype, print (and write) the section."""
    p = argparse.ArgumentParser(prog="python -m bench.latency", description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", default="float32,int8", help="comma list of float32, int8, bfloat16")
    p.add_argument("--requests", type=int, default=40)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=1, help="torch threads of each (1: see the section's analysis)")
    p.add_argument("--before", type=Path, help="also serve from this checkout (its own app code), taking turns")
    p.add_argument("--output", type=Path, default=DOC)
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    from model.loading.checkpoint import describe

    with tempfile.TemporaryDirectory(prefix="bench_latency_") as tmp:
        hf_dir = marian.write(Path(tmp) / "opus-mt-en-de", marian.CPU)
        ct2_dir = engines.ct2_convert(hf_dir, Path(tmp) / "ct2")
        text = "abcd efgh ijkl mnop qrs tuv wxyz abc defg hij klmn opq"
        ids = describe(hf_dir).tokenizer.encode(text)
        before = os.getloadavg()[0]
        rows = {}
        for dtype in args.dtype.split(","):
            rows[dtype] = t = one_dtype(args, hf_dir, ct2_dir, dtype, ids, text)
            log(f"{dtype}: " + ", ".join(f"{n} p50 {ms(v, 50)} ms" for n, v in t.items()))
    section = render(args, machine_info("ctranslate2"), rows, len(ids), (before, os.getloadavg()[0]))
    print(section)
    if not args.no_write:
        write_section(args.output, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
