"""Model-level decoding speed on CPU: our engine (float32, int8, bfloat16) against CTranslate2 (float32, int8, and
bfloat16 where it offers it) and `transformers`, on the same random Marian weights.

    python -m bench.model_speed                      # full run (~15 min on 2 busy cores), writes docs/benchmarks.md
    python -m bench.model_speed --sentences 16 --batch-sizes 1,16 --new-tokens 16 --skip-int8 --no-write  # quick
    python -m bench.model_speed --before ../base --no-write  # ours against another checkout's engine, nothing else

A random `MarianMTModel` (`bench.marian.CPU`: d_model 256, 3+3 layers, 4 heads, ffn 1024, vocab 8000) is saved with
`save_pretrained` and its tokenizer files, then loaded three ways: by `model.loading.checkpoint.load` with the server's
`--dtype` (ours), by `MarianMTModel.from_pretrained` (HF) and, converted, by CTranslate2. Sources are random ids
(10-40 tokens, EOS last). Every engine is forced to generate exactly `--new-tokens` tokens per sentence (checked).

Each engine runs in its own spawned process (CTranslate2 ships its own OpenMP runtime, and once it has run in a
process, torch there slows down by a third or more: `--same-process` shows it); the engines take turns batch by
batch (the start rotates), so load on the machine hits all of them alike; tokens/s = generated tokens of the best
hypothesis / wall time, timed inside the worker, summed over the batches. The section is one per CPU kind.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from bench import engines, marian
from bench import roofline as rl
from bench.machine import machine_info, machine_line
from bench.report import DOC, command, log, ratio, write_section
from bench.timing import Cell, Isolated, Local, time_cell

SECTION = "## Model decoding on {cpu} (bench/model_speed.py)"  # one section per CPU kind
OURS = {"ours fp32": "float32", "ours int8": "int8", "ours bf16": "bfloat16"}
CT2 = {"CT2 fp32": "float32", "CT2 int8": "int8", "CT2 bf16": "bfloat16"}
TARGETS = [  # (numerator, denominator, minimum ratio, batch size: 0 = the largest); docs/benchmarks.md: Targets
    ("ours fp32", "CT2 fp32", 1.2, 0),
    ("ours int8", "CT2 int8", 1.3, 0),
    ("ours fp32", "HF fp32", 1.5, 0),
    ("ours int8", "CT2 int8", 1.5, 1),
]


def engine_names(int8: bool, bf16: bool, before: bool = False) -> list[str]:
    """The engines of a run, in table order (CT2 bf16 only where CTranslate2 offers bfloat16 on this CPU); with
    `before`, ours against another checkout's, and nothing else."""
    if before:
        return ["ours fp32", "before fp32"] + (["ours int8", "before int8"] if int8 else [])
    names = ["ours fp32", "HF fp32", "CT2 fp32"] + (["ours int8", "CT2 int8"] if int8 else [])
    return (
        names + (["ours bf16"] if bf16 else []) + (["CT2 bf16"] if bf16 and "bfloat16" in engines.ct2_types() else [])
    )


def build_engine(name: str, hf_dir: Path, ct2_dir: Path, threads: int, before: Path | None = None) -> engines.Engine:
    """One engine by name, from the saved checkpoint (ours as the server's --dtype loads it) or its conversion; the
    "before" engines are ours from the checkout `before` (its `model` package, imported afresh in this process)."""
    if name.startswith("before "):
        return before_engine(before, hf_dir, OURS[name.replace("before", "ours")])
    if name in CT2:
        return engines.ct2(ct2_dir, CT2[name], threads)
    if name == "HF fp32":
        from transformers import MarianMTModel
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        return engines.hf(MarianMTModel.from_pretrained(hf_dir).eval())
    from model.loading.checkpoint import load

    return engines.ours(load(hf_dir, dtype=OURS[name]).model)


def before_engine(tree: Path, hf_dir: Path, dtype: str) -> engines.Engine:
    """Ours from the checkout `tree`: its own `model` package and its `bench/engines.py`, imported afresh in this
    (spawned) process, whatever the layout of its `model` package."""
    sys.path.insert(0, str(tree))
    for module in [m for m in sys.modules if m == "model" or m.startswith("model.")]:
        del sys.modules[module]
    spec = importlib.util.spec_from_file_location("before_engines", tree / "bench" / "engines.py")
    theirs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(theirs)
    layout = "model.loading.checkpoint" if (tree / "model" / "loading").is_dir() else "model.checkpoint"
    return theirs.ours(importlib.import_module(layout).load(hf_dir, dtype=dtype).model)


def agreement(runners: list, sources: list[list[int]], new: int) -> dict[str, float]:
    """Share of greedy tokens equal to ours fp32's (same weights => near 1.0; int8/bf16 drift)."""
    outs = {r.name: r.run(sources, 1, new) for r in runners}
    ref = outs["ours fp32"]
    same = lambda a, b: sum(x == y for p, q in zip(a, b, strict=True) for x, y in zip(p, q, strict=False))
    return {name: same(ref, o) / sum(map(len, ref)) for name, o in outs.items() if name != "ours fp32"}


def table(results: dict[tuple[str, int], dict[str, Cell]], names: list[str]) -> str:
    """Markdown: tokens/s per engine per (mode, batch) and the ratios."""
    cols = [(a, b) for a, b in (("ours fp32", "HF fp32"), ("ours fp32", "CT2 fp32")) if b in names]
    cols += [(f"ours {p}", f"before {p}") for p in ("fp32", "int8") if f"before {p}" in names]
    cols += [("ours int8", "CT2 int8")] if "CT2 int8" in names else []
    cols += [("ours bf16", "CT2 bf16" if "CT2 bf16" in names else "CT2 fp32")] if "ours bf16" in names else []
    cols += [("ours int8", "ours fp32")] if "ours int8" in names else []
    head = ["mode", "batch", "sentences", *names, *(f"{a} / {b}" for a, b in cols)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (mode, batch), cells in results.items():
        row = [mode, str(batch), str(next(iter(cells.values())).sentences)]
        row += [f"{cells[n].tps:.0f}" + (" (!)" if cells[n].wrong_length else "") for n in names]
        row += [ratio(cells[a].tps, cells[b].tps) for a, b in cols]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def target_lines(results: dict[tuple[str, int], dict[str, Cell]], names: list[str]) -> str:
    """Markdown: the issue's targets, measured and met or not."""
    big = max(b for _, b in results)
    lines = ["| target | mode | batch | measured | met |", "|---|---|---|---|---|"]
    for mode in dict.fromkeys(m for m, _ in results):
        for a, b, want, batch in TARGETS:
            cells = results.get((mode, batch or big))
            if cells is None or a not in names or b not in names:
                continue
            r = cells[a].tps / cells[b].tps if cells[b].tps else 0.0
            met = "yes" if r >= want else "**no**"
            lines.append(f"| {a} / {b} >= {want:.1f}x | {mode} | {batch or big} | {r:.2f}x | {met} |")
    return "\n".join(lines)


def render(info: dict[str, str], args: argparse.Namespace, body: str, targets: str, notes: list[str]) -> str:
    """The markdown section."""
    where = "all in this one process (`--same-process`)" if args.same_process else "each in its own spawned process"
    return "\n".join([
        SECTION.format(cpu=info["kind"]), "", f"Generated by `{command('bench.model_speed')}` on {info['date']}.", "",
        machine_line(info, "transformers", "ctranslate2"),
        f"- Threads: torch.set_num_threads({args.threads}); CTranslate2 inter_threads=1, "
        f"intra_threads={args.threads}; OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY', 'unset')}.",
        f"- Model: random `MarianMTModel` ({marian.describe(marian.CPU)}); ours loads it with "
        "`model.loading.checkpoint.load(dir, dtype=...)` as the server's `--dtype float32 / int8 / bfloat16` does "
        "(int8: "
        "`torch.ao.quantization.quantize_dynamic` of every nn.Linear, x86 backend); CTranslate2 gets "
        "`TransformersConverter(dir).convert(out, quantization=None)` and `compute_type` float32 / int8 / bfloat16.",
        f"- Work: random source ids of 10-40 tokens (EOS last); {args.sentences} sentences per batch size, "
        f"{min(args.batch1_sentences, args.sentences)} at batch 1; exactly {args.new_tokens} new tokens forced "
        "per sentence, checked by counting each engine's output; beam rows count the best hypothesis.",
        f"- Method: engines {where}; the same batches for all (CT2 `max_batch_size` = batch); each warmed up on each "
        "shape; they take turns batch by batch (rotating order); tokens/s = generated tokens / wall time.",
        *[f"- {n}" for n in notes], "", "Tokens/s (higher is better):", "", body, "", targets, "",
    ])  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags; the defaults are the full run."""
    p = argparse.ArgumentParser(prog="python -m bench.model_speed", description=__doc__.split("\n\n")[0])
    ints = lambda s: [int(x) for x in s.split(",") if x]
    p.add_argument("--sentences", type=int, default=100, help="sentences per batch size (default 100)")
    p.add_argument("--batch1-sentences", type=int, default=16, help="sentences at batch size 1 (default 16)")
    p.add_argument("--batch-sizes", type=ints, default=[1, 16, 64], help="comma list (default 1,16,64)")
    p.add_argument("--beams", type=ints, default=[1, 4], help="beam sizes, 1 = greedy (default 1,4)")
    p.add_argument("--new-tokens", type=int, default=64, help="tokens forced per sentence (default 64)")
    p.add_argument("--threads", type=int, default=2, help="torch / CTranslate2 intra threads (default 2)")
    p.add_argument("--skip-int8", action="store_true", help="no int8 engines")
    p.add_argument("--skip-bf16", action="store_true", help="no bfloat16 engines")
    p.add_argument("--workdir", type=Path, help="keep the generated checkpoints here (default: a temp dir)")
    p.add_argument("--output", type=Path, default=DOC, help=f"markdown file to update (default {DOC})")
    p.add_argument("--no-write", action="store_true", help="print only, leave the markdown file alone")
    p.add_argument(
        "--same-process",
        action="store_true",
        help="run every engine in this process (shows how CTranslate2's OpenMP runtime slows torch down)",
    )
    p.add_argument("--before", type=Path, help="ours against this checkout's engine only (prints, never writes)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def cell_sources(args: argparse.Namespace, sources: list[list[int]], batch: int) -> list[list[int]]:
    """The sentences a batch size runs (fewer at batch 1)."""
    return sources[: min(args.batch1_sentences, args.sentences) if batch == 1 else args.sentences]


def run(args: argparse.Namespace, hf_dir: Path, ct2_dir: Path, names: list[str]) -> tuple[dict, dict]:
    """Every (mode, batch) cell, engines interleaved: ({(mode, batch): {name: Cell}}, greedy agreement)."""
    if args.same_process and not args.before:  # the before engines import another `model`: their own processes
        runners = [Local(n, build_engine(n, hf_dir, ct2_dir, args.threads, args.before)) for n in names]
    else:
        runners = [Isolated(n, build_engine, (n, hf_dir, ct2_dir, args.threads, args.before), args.threads)
                   for n in names]  # fmt: skip
    sources = marian.sources(args.sentences, marian.CPU["vocab"], args.seed + 1)
    for r in runners:  # first touch: thread pools, allocators, oneDNN kernels
        r.run(sources[:16], 1, 8)
    agree = agreement(runners, sources[:16], args.new_tokens)
    results = {}
    for beam in args.beams:
        for batch in args.batch_sizes:
            mode, start = ("greedy" if beam == 1 else f"beam {beam}"), time.perf_counter()
            cells = results[(mode, batch)] = time_cell(
                runners, cell_sources(args, sources, batch), batch, beam, args.new_tokens
            )
            log(f"{mode:>7} batch {batch:>3} ({time.perf_counter() - start:5.1f}s): "
                + ", ".join(f"{k} {c.tps:.0f}" for k, c in cells.items()))  # fmt: skip
    for r in runners:
        r.close()
    return results, agree


def roofline(args: argparse.Namespace, hf_dir: Path, results: dict, names: list[str], rates: list) -> list[str]:
    """Markdown: the CPU's rates and every cell's step against its bound, ours split into GEMMs, attention and the
    rest by torch.profiler (in this process, at the same threads)."""
    from model.loading.checkpoint import load

    models = {OURS[n]: load(hf_dir, dtype=OURS[n]).model for n in names if n in OURS}
    cfg, best = models["float32"].cfg, rl.best_of(*rates)
    sources, lines = marian.sources(args.sentences, marian.CPU["vocab"], args.seed + 1), [*rl.TABLE_HEAD]
    for (mode, batch), cells in results.items():
        src, beam = cell_sources(args, sources, batch), 1 if mode == "greedy" else int(mode.split()[1])
        parts = [src[i : i + batch] for i in range(0, len(src), batch)]
        bounds, steps = {}, 1
        for precision in dict.fromkeys({**OURS, **CT2}[n] for n in names if n in OURS or n in CT2):
            bounds[precision], steps = rl.cell_bound(cfg, precision, parts, beam, args.new_tokens, best)
        ran = {n: (cells[n].cpu / args.threads / steps, cells[n].seconds / steps) for n in names}
        ours = {
            OURS[n]: (*ran[n], rl.profile_steps(models[OURS[n]], parts[0], beam, args.new_tokens))
            for n in names if n in OURS
        }  # fmt: skip
        ct2 = {CT2[n]: ran[n] for n in names if n in CT2}
        lines += rl.cell_rows(f"{mode} | {batch}", bounds, ours, ct2)
    return [
        "### Against the CPU's roofline (bench/roofline.py)", "",
        "Measured rates (best of three rounds each; GEMMs (1024 x 1024) x (1024 x 4096); copies count the bytes read "
        "and written; at one thread timed by the CPU time the process ran, at more by the wall clock, so on a shared "
        "machine the 2-thread rates can fall below the 1-thread ones):", "",
        rl.rates_table(rates), "",
        f"A cell's mean decode step ({args.new_tokens} steps per batch, prefill counted in): the time the engine's "
        f"process ran (its CPU seconds / {args.threads} threads: what other processes took from the shared cores is "
        "left out), its wall time beside it, against the bytes and FLOPs of that step (`bench.roofline`: decoder "
        "weights, K/V at the mean span and source length, logits; float32 weights and K/V; int8 weights 1 byte "
        "with float32 K/V; bfloat16 2 bytes), at the best rate measured at either thread count: bound = max(bytes "
        "from L3, FLOPs at the GEMM rate of that precision). Ours is split by torch.profiler's self CPU time over 8 "
        "decode steps in the middle of a decode (in this process, after the timed runs; its shares applied to the "
        "step; the profiler's per-op overhead inflates 'rest' at small batches). CTranslate2 does the same FLOPs and "
        "moves the same bytes, so it gets the same bound.", "",
        *lines, "",
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Build the checkpoint, time every engine, print (and write) the section."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="model_speed_") as tmp:
        work = args.workdir or Path(tmp)
        hf_dir = work / "marian"
        if not (hf_dir / "model.safetensors").exists():
            marian.write(hf_dir, marian.CPU, args.seed)
        ct2_dir = engines.ct2_convert(hf_dir, work / "ct2")
        names = engine_names(not args.skip_int8, not args.skip_bf16, args.before is not None)
        load_before = os.getloadavg()[0]
        rates = [rl.measure(n) for n in dict.fromkeys([1, args.threads])] if not args.before else []
        results, agree = run(args, hf_dir, ct2_dir, names)
        load_after = os.getloadavg()[0]
        bound = roofline(args, hf_dir, results, names, rates) if not args.before else []
    wrong = {(m, b, k): c.wrong_length for (m, b), cells in results.items() for k, c in cells.items() if c.wrong_length}
    notes = [
        f"Token-count check: every engine generated exactly {args.new_tokens} tokens for every sentence."
        if not wrong
        else f"Token-count check FAILED (rows marked (!)): {wrong}",
        "Greedy tokens equal to ours fp32 (16 sentences; random weights mostly repeat one token, so this is a "
        "weak check): " + ", ".join(f"{k} {v:.1%}" for k, v in agree.items()) + ".",
        f"The machine was shared (load average {load_before:.1f} before / {load_after:.1f} after on "
        f"{os.cpu_count()} cores): absolute numbers are noisy, the ratios of this one interleaved run are what counts.",
    ]
    info = machine_info("transformers", "ctranslate2")
    section = render(info, args, table(results, names), target_lines(results, names), notes) + "\n" + "\n".join(bound)
    print(section)
    if not args.no_write and not args.before:
        write_section(args.output, section)
        log(f"wrote {args.output}")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
