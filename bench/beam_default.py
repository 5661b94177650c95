"""The request most OPUS-MT users send, on CPU: a random Marian checkpoint whose config asks `num_beams: 4`, served
with default settings; one POST of --texts texts whose only parameters force --new-tokens tokens (the beam is the
checkpoint's); against CTranslate2 and `transformers` beam 4 on the same source ids as one batch, in the same run.

    python -m bench.beam_default                          # this tree's server, CT2, HF; writes docs/benchmarks.md
    python -m bench.beam_default --before /tmp/main-tree  # the server of another checkout too (before/after)

Every contestant runs with --threads intra-op threads (servers: OMP_NUM_THREADS), each engine in its own process;
they take turns, the start rotating from repeat to repeat; tokens/s = generated tokens / wall time of the POST (or
of the engine's call); each server's rows per decode step come from its /metrics.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bench import engines, marian
from bench.loadgen import one_post, per_step, server_metrics
from bench.machine import machine_info, machine_line
from bench.model_speed import build_engine
from bench.report import DOC, command, log, ratio, write_section
from bench.timing import Isolated
from bench.workload import thread_env
from model.loading.checkpoint import load

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## The default OPUS-MT request on {cpu} (bench/beam_default.py)"  # one section per CPU kind
TARGETS = [("CT2 fp32", 1.0), ("HF fp32", 1.5)]  # this tree's server / engine, beam 4 (docs/benchmarks.md: Targets)
ENGINES = [name for name, _ in TARGETS]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags; the defaults are the full run."""
    p = argparse.ArgumentParser(prog="python -m bench.beam_default", description=__doc__.split("\n\n")[0])
    p.add_argument("--texts", type=int, default=64, help="texts in the one POST (64)")
    p.add_argument("--new-tokens", type=int, default=64, help="tokens generated per text, forced (64)")
    p.add_argument("--repeats", type=int, default=3, help="rounds, every contestant once per round (3)")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads of every contestant (1)")
    p.add_argument("--before", type=Path, help="also serve from this checkout (its own app code)")
    p.add_argument("--no-write", action="store_true", help="print the section only")
    return p.parse_args(argv)


@contextlib.contextmanager
def server(path: Path, checkout: Path, threads: int) -> Iterator[str]:
    """A ready server of `checkout` with default settings on the model at `path`: its base URL."""
    from bench.harness.server import ServerProcess

    pythonpath = os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH")]))
    env = {**thread_env(threads), "PYTHONPATH": pythonpath}
    proc = ServerProcess("--model", str(path), "--device", "cpu", "--log-level", "warning", env=env, cwd=checkout)
    try:
        yield proc.wait(timeout=600).url
    finally:
        proc.stop()


def run(args: argparse.Namespace, work: Path) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Every contestant --repeats times, taking turns: ({name: tokens/s per repeat}, {server: rows per step})."""
    path = marian.write_opus_mt(work / "opus-mt-en-de")
    ct2_dir = engines.ct2_convert(path, work / "ct2")
    ck = load(path)
    texts = marian.random_lines(random.Random(1), args.texts)  # one sentence each: one request per text
    sources = [ck.tokenizer.encode(t) for t in texts]
    pair, new = (ck.source_lang, ck.target_lang), args.new_tokens
    fields = {"max_new_tokens": new, "min_new_tokens": new}  # no beam_size: the checkpoint's 4
    checkouts = {"server (this tree)": ROOT} | ({"server (--before)": args.before.resolve()} if args.before else {})
    tps: dict[str, list[float]] = {}
    with contextlib.ExitStack() as stack:
        urls = {name: stack.enter_context(server(path, c, args.threads)) for name, c in checkouts.items()}
        engines_ = {n: Isolated(n, build_engine, (n, path, ct2_dir, args.threads), args.threads) for n in ENGINES}
        stack.callback(lambda: [e.close() for e in engines_.values()])
        for url in urls.values():
            one_post(url, texts[:8], {"max_new_tokens": 8}, pair)  # warm-up
        for e in engines_.values():
            e.run(sources[:8], 4, 8)
        start = {url: server_metrics(url) for url in urls.values()}
        names = [*urls, *engines_]
        for k in range(args.repeats):
            for j in range(len(names)):
                name = names[(k + j) % len(names)]
                if name in urls:
                    value = one_post(urls[name], texts, fields, pair)
                else:
                    out, seconds = engines_[name].timed(sources, 4, new)
                    assert all(len(o) == new for o in out), f"{name} did not generate {new} tokens per text"
                    value = sum(map(len, out)) / seconds
                tps.setdefault(name, []).append(value)
                log(f"round {k + 1}: {name} {value:.0f} tokens/s")
        rows = {name: per_step(start[url], server_metrics(url))[0] for name, url in urls.items()}
    return tps, rows


def render(args: argparse.Namespace, tps: dict[str, list[float]], rows: dict[str, float], load: tuple) -> str:
    """The section: method, table, targets."""
    med = {name: statistics.median(v) for name, v in tps.items()}
    info = machine_info("transformers", "ctranslate2")
    lines = [
        SECTION.format(cpu=info["kind"]),
        "",
        f"Generated by `{command('bench.beam_default')}` on {info['date']}.",
        "",
        machine_line(info, "transformers", "ctranslate2"),
        f"- Model: random Marian ({marian.describe(marian.CPU)}) with OPUS-MT's generation config (`num_beams: 4`, "
        f"`max_length: 512`); servers with default settings (`--model DIR --device cpu`); one POST of {args.texts} "
        f"texts (lines of random words, one sentence each) whose parameters only force {args.new_tokens} tokens "
        f"(`min_new_tokens` = `max_new_tokens`), so every text is a beam-4 request; CT2 and HF beam 4 on the same "
        f"source ids as one batch, forced alike.",
        f"- {args.threads} intra-op thread(s) per contestant (servers: OMP_NUM_THREADS), engines in their own "
        f"processes; they take turns, the start rotating; median of {args.repeats} rounds. The machine was shared "
        f"(load average {load[0]:.1f} before / {load[1]:.1f} after on {os.cpu_count()} cores).",
        "",
        "| contestant | tokens/s (median) | runs | rows per decode step | / CT2 beam 4 | / HF beam 4 |",
        "|---|---|---|---|---|---|",
    ]
    for name, value in med.items():
        runs = ", ".join(f"{v:.0f}" for v in tps[name])
        step_rows = f"{rows[name]:.0f}" if name in rows else "-"
        lines.append(
            f"| {name} | {value:.0f} | {runs} | {step_rows} | {ratio(value, med['CT2 fp32'])} | "
            f"{ratio(value, med['HF fp32'])} |"
        )
    ours = med["server (this tree)"]
    lines += ["", "| target | ratio | met |", "|---|---|---|"]
    for other, minimum in TARGETS:
        lines.append(f"| server / {other} beam 4 >= {minimum}x | {ratio(ours, med[other])} | "
                     f"{'yes' if ours >= minimum * med[other] else '**no**'} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Build the checkpoint, time every contestant, print (and write) the section."""
    args = parse_args(argv)
    before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="beam_default_") as tmp:
        tps, rows = run(args, Path(tmp))
    section = render(args, tps, rows, (before, os.getloadavg()[0]))
    print(section)
    if not args.no_write:
        write_section(DOC, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
