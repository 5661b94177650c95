"""GPU decoding speed: our engine (the static-shape step replayed as CUDA graphs) against `transformers` generate.

    python -m bench.gpu_speed                     # on a GPU: OPUS-MT shape, writes its section of docs/benchmarks.md
    python -m bench.gpu_speed --tiny              # anywhere (CPU too): a tiny model, prints only: the benchmark runs
    python -m bench.gpu_speed --compare-overlap   # also `ours seq`: the same engine without the overlap scheduler

A random `MarianMTModel` of the OPUS-MT shape (d_model 512, 6+6 layers, 8 heads, ffn 2048, vocab 58101, swish) is
built in memory; ours gets the same weights through `model.checkpoint.hf_network`. Engines, each in float16 and
float32: `ours` (what the server runs on CUDA: `StaticDecoder` with every (rows, span) captured, and the overlap
scheduler: step t+1 launched before step t is read back; beam search runs step by step), `ours seq` (the same without
overlap; with --compare-overlap), `ours eager` (the model's own step, as before static shapes; CUDA only) and `HF`
(`MarianMTModel.generate`). Every engine is forced to
generate exactly --new-tokens tokens per sentence (checked), greedy and beam 4, at batch 1/32/64/256; engines take
turns batch by batch; tokens/s = tokens of the best hypothesis / wall time (synchronised). GPU busy is kernel time
(torch.profiler) / wall time of one run of each fp16 engine, greedy at batch 64.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from bench import engines as eng
from bench.engines import Engine
from bench.machine import machine_info
from bench.marian import OPUS, TINY, hf_model, ours_of, sources
from bench.report import DOC, command, write_section
from bench.timing import Local, sync, time_cell

SECTION = "## GPU decoding (bench/gpu_speed.py)"
DTYPES = {"fp16": torch.float16, "fp32": torch.float32}
METHOD = (
    "Model: random `MarianMTModel` (d_model 512, 6+6 layers, 8 heads, ffn 2048, vocab 58101, swish; `--tiny`: d_model "
    "64, 2+2 layers, vocab 1000), ours with the same weights. `ours`: `StaticDecoder` with its CUDA graphs and the "
    "overlap scheduler (the server's path on CUDA; beam search runs step by step); `ours seq`: the same without "
    "overlap; `ours eager`: the model's own step, as before static shapes; `HF`: `generate` with "
    "`bad_words_ids=[[pad]]`. Engines take turns batch by batch; tokens/s = tokens of the best hypothesis / wall time "
    "(synchronised), every sentence forced to the same length (checked). GPU busy: kernel time (torch.profiler) / "
    "wall time of one greedy run at batch 64."
)


def build(shape: dict, device: str) -> tuple[torch.nn.Module, torch.nn.Module]:
    """A random Marian model and ours with its weights, both float32 on `device`."""
    hf = hf_model(shape)
    return hf.to(device), ours_of(hf).to(device)


def engines(hf: torch.nn.Module, ours: torch.nn.Module, args: argparse.Namespace) -> dict[str, Engine]:
    """Every engine of the run by name, ours first."""
    from model.static import StaticDecoder

    out, cuda = {}, ours.device.type == "cuda"
    rows = max(args.batch_sizes) * max(args.beams)
    for name, dtype in DTYPES.items():
        model = ours.to(dtype) if dtype == torch.float32 else _copy(ours, dtype)
        if cuda:
            static = StaticDecoder(model, rows, args.new_tokens + 1, 40, max(args.beams))  # sources: at most 40 tokens
            start = time.perf_counter()
            count = static.capture()
            print(f"ours {name}: captured {count} graphs in {time.perf_counter() - start:.1f}s", file=sys.stderr)
            out[f"ours {name}"] = eng.ours(static, overlap=True)
            if args.compare_overlap:
                out[f"ours seq {name}"] = eng.ours(static)
            out[f"ours eager {name}"] = eng.ours(model)
        else:
            out[f"ours {name}"] = eng.ours(model, overlap=True)
            if args.compare_overlap:
                out[f"ours seq {name}"] = eng.ours(model)
        out[f"HF {name}"] = eng.hf(hf.to(dtype) if dtype == torch.float32 else _copy(hf, dtype))
    return out


def _copy(module: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """A copy of `module` in `dtype`."""
    import copy

    return copy.deepcopy(module).to(dtype)


def timed(runs: dict[str, Engine], src: list[list[int]], batch: int, beam: int, new: int) -> dict[str, float]:
    """Tokens/s of each engine on `src` in batches of `batch`, engines taking turns batch by batch (rotating)."""
    cells = time_cell([Local(name, run) for name, run in runs.items()], src, batch, beam, new)
    wrong = [name for name, c in cells.items() if c.wrong_length]
    assert not wrong, f"{wrong} did not generate {new} tokens per sentence"
    return {name: c.tps for name, c in cells.items()}


def busy(run: Engine, src: list[list[int]], new: int) -> tuple[float, float, float]:
    """(GPU busy share, wall ms per step, launches per step) of one greedy run: kernel time from torch.profiler over
    wall time; launches count kernel and graph launches (a graph replay is one)."""
    from torch.profiler import ProfilerActivity, profile

    run(src, 1, 4)
    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        run(src, 1, new)
        sync()
        wall = time.perf_counter() - start
    events = prof.key_averages()
    kernels = sum(e.self_device_time_total for e in events) / 1e6
    launches = sum(e.count for e in events if e.key.startswith(("cudaLaunchKernel", "cudaGraphLaunch")))
    return kernels / wall, 1000 * wall / new, launches / new


def targets(cells: dict[tuple[str, int], dict[str, float]], busy_share: float | None) -> list[tuple[str, str, bool]]:
    """(target, measured, met) for the issue's targets on the GPU."""
    out = []
    if busy_share is not None:
        out.append(("GPU busy, ours fp16 greedy batch 64 >= 70%", f"{busy_share:.0%}", busy_share >= 0.7))
    checks = [("beam 4", 32, "HF fp32", 10.0), ("greedy", 64, "HF fp16", 3.0), ("greedy", 256, "HF fp16", 3.0)]
    for mode, batch, other, want in checks:
        if (mode, batch) in cells:
            r = cells[(mode, batch)]["ours fp16"] / cells[(mode, batch)][other]
            out.append((f"ours fp16 / {other}, {mode} batch {batch} >= {want:.0f}x", f"{r:.2f}x", r >= want))
    if ("greedy", 1) in cells:
        ms = 1000 / cells[("greedy", 1)]["ours fp16"]
        out.append(("ours fp16 greedy batch 1 <= 1.5 ms/token", f"{ms:.2f} ms", ms <= 1.5))
    return out


def render(args, info: str, cells, busy_rows, goals) -> str:
    """The markdown section."""
    names = list(next(iter(cells.values())))
    others = [o for o in ("HF fp16", "HF fp32", "ours seq fp16") if o in names]  # overlap on / off: --compare-overlap
    head = ["mode", "batch", *names, *(f"ours fp16 / {o}" for o in others)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (mode, batch), tps in cells.items():
        ratios = [f"{tps['ours fp16'] / tps[o]:.2f}x" for o in others]
        lines.append("| " + " | ".join([mode, str(batch), *(f"{tps[n]:.0f}" for n in names), *ratios]) + " |")
    busy_table = ["| fp16, greedy, batch 64 | GPU busy | ms per step | launches per step |", "|---|---|---|---|"]
    busy_table += [f"| {n} | {b:.0%} | {ms:.2f} | {k:.1f} |" for n, (b, ms, k) in busy_rows.items()] + [""]
    goal_table = ["| target | measured | met |", "|---|---|---|"]
    goal_table += [f"| {t} | {m} | {'yes' if ok else '**no**'} |" for t, m, ok in goals]
    cmd = command("bench.gpu_speed")
    return "\n".join([
        SECTION, "", f"Generated by `{cmd}` on {info['date']}.", "",
        f"- Machine: {info['gpu']} ({info['cpu']}), torch {info['torch']}.", f"- {METHOD}",
        f"- Work: {args.sentences} random sources of 10-40 tokens per cell ({args.batch1_sentences} at batch 1), "
        f"{args.new_tokens} new tokens forced per sentence.", "", "Tokens/s (higher is better):", "",
        *lines, "", *(busy_table if busy_rows else []), *goal_table, "",
    ])  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.gpu_speed", description=__doc__.split("\n\n")[0])
    ints = lambda s: [int(x) for x in s.split(",") if x]
    p.add_argument("--tiny", action="store_true", help="a tiny model, short runs, print only (checks the benchmark)")
    p.add_argument("--batch-sizes", type=ints, default=[1, 32, 64, 256])
    p.add_argument("--beams", type=ints, default=[1, 4])
    p.add_argument("--sentences", type=int, help="sentences per cell (default 256; --tiny: the batch size)")
    p.add_argument("--batch1-sentences", type=int, default=16)
    p.add_argument("--new-tokens", type=int, help="tokens forced per sentence (default 64; --tiny: 8)")
    p.add_argument("--output", type=Path, default=DOC, help=f"markdown file to update (default {DOC})")
    p.add_argument("--no-write", action="store_true", help="print only")
    p.add_argument(
        "--compare-overlap", action="store_true", help="also `ours seq`: our engine without the overlap scheduler"
    )
    args = p.parse_args(argv)
    args.new_tokens = args.new_tokens or (8 if args.tiny else 64)
    args.sentences = args.sentences or (max(args.batch_sizes) if args.tiny else 256)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    hf, ours = build(TINY if args.tiny else OPUS, device)
    runs = engines(hf, ours, args)
    src = sources(args.sentences, (TINY if args.tiny else OPUS)["vocab"])
    cells = {}
    for beam in args.beams:
        for batch in args.batch_sizes:
            mode, n = ("greedy" if beam == 1 else f"beam {beam}"), (args.batch1_sentences if batch == 1 else None)
            cells[(mode, batch)] = timed(runs, src[: n or args.sentences], batch, beam, args.new_tokens)
            print(f"{mode} batch {batch}: " + ", ".join(f"{k} {v:.0f}" for k, v in cells[(mode, batch)].items()))
    busy_rows = {}
    if device == "cuda":
        for name in [n for n in runs if n.endswith("fp16")]:
            busy_rows[name] = busy(runs[name], src[:64], args.new_tokens)
    goals = targets(cells, busy_rows.get("ours fp16", (None,))[0])
    info = machine_info()
    section = render(args, info, cells, busy_rows, goals)
    print(section)
    if not (args.no_write or args.tiny):
        write_section(args.output, section, SECTION)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
