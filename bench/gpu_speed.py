"""GPU decoding speed against the roofline: our engine (the static-shape step replayed as CUDA graphs) and
`transformers` generate on one random model shape, and the step's bytes and FLOPs against the card's measured copy
bandwidth and matmul rate.

    python -m bench.gpu_speed --shape opus --out $OUT       # on a GPU: the OPUS-MT shape (a few minutes on an H100)
    python -m bench.gpu_speed --shape nllb600m --out $OUT   # NLLB-200-distilled-600M shape, batch 64
    python -m bench.gpu_speed --shape tiny --no-write       # anywhere, CPU too: the whole path in seconds

The shape is written as a random Hugging Face checkpoint (bench.marian / bench.nllb, tokenizer files included) and
loaded by ours through `model.loading.checkpoint.load` and by `transformers` through `from_pretrained`. Engines:
`ours DTYPE`
(what the server runs on CUDA: `StaticDecoder` with every (rows, span) captured, and the overlap scheduler; on CPU the
model itself), `ours seq` (no overlap; --compare-overlap), `ours eager` (the model's own step; --eager, CUDA only) and
`HF DTYPE` (`generate`). Every engine is forced to generate exactly --new-tokens tokens per sentence (checked); engines
take turns batch by batch; tokens/s = tokens of the best hypothesis / wall time (synchronised). Each beam cell is
followed by ours greedy at the rows it reaches (a beam row against a greedy row). --budget bounds the run:
cells that would start after it are skipped and listed.
"""

from __future__ import annotations

import argparse
import bisect
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

from bench import engines as eng
from bench import marian, nllb
from bench.engines import Engine
from bench.machine import machine_info
from bench.report import DOC, command, log, write_section
from bench.roofline import copy_bandwidth, device_seconds, kernel_kinds, kernels_of, matmul_rate, multiples, step_work
from bench.timing import Local, sync, time_cell

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
MAX_SOURCE = 40  # bench.marian.sources: at most 40 tokens


@dataclass(frozen=True)
class Spec:
    """A model shape: its family's builder module (bench.marian or bench.nllb), sizes, label and default work."""

    family: ModuleType
    shape: dict
    label: str
    batches: tuple[int, ...]
    sentences: int


SHAPES = {
    "opus": Spec(marian, marian.OPUS, "OPUS-MT shape", (1, 32, 64, 256), 256),
    "nllb600m": Spec(nllb, nllb.NLLB600M, "NLLB-200-distilled-600M shape", (64,), 128),
    "nllb1.3b": Spec(nllb, nllb.NLLB1_3B, "NLLB-200 1.3B shape", (64,), 128),
    "tiny": Spec(marian, marian.TINY, "tiny Marian shape", (1, 4), 4),
    "tiny-nllb": Spec(nllb, nllb.TINY, "tiny NLLB shape", (4,), 4),
}


@dataclass
class Built:
    """The engines of a run by name, ours' static decoders by dtype, and what starting each one cost."""

    runs: dict[str, Engine]
    statics: dict[str, object]
    startup: dict[str, dict[str, float]]


def build(path: Path, args: argparse.Namespace, device: torch.device) -> Built:
    """Ours (loaded by model.loading.checkpoint.load, graphs captured) and `transformers` in each dtype asked for."""
    from transformers import AutoModelForSeq2SeqLM
    from transformers.utils import logging as hf_logging

    from model.loading.checkpoint import load
    from model.runner.static import StaticDecoder

    hf_logging.set_verbosity_error()
    out, cuda = Built({}, {}, {}), device.type == "cuda"
    rows = max(args.batch_sizes) * max(args.beams)
    for name in args.ours:
        start = time.perf_counter()
        model = load(path, device=str(device), dtype=DTYPES[name]).model
        loaded = time.perf_counter() - start
        static = out.statics[name] = StaticDecoder(model, rows, args.new_tokens + 1, MAX_SOURCE, max(args.beams))
        start = time.perf_counter()
        graphs = static.capture()  # any compilation the step does happens here too
        out.startup[f"ours {name}"] = {"load_s": loaded, "capture_s": time.perf_counter() - start, "graphs": graphs}
        log(f"ours {name}: loaded in {loaded:.1f}s, {graphs} graphs captured in {time.perf_counter() - start:.1f}s")
        runner = static if cuda else model
        out.runs[f"ours {name}"] = eng.ours(runner, overlap=True)
        if args.compare_overlap:
            out.runs[f"ours seq {name}"] = eng.ours(runner)
        if args.eager and cuda:
            out.runs[f"ours eager {name}"] = eng.ours(model)
    for name in args.hf:
        start = time.perf_counter()
        model = AutoModelForSeq2SeqLM.from_pretrained(path).to(device=device, dtype=DTYPES[name]).eval()
        out.startup[f"HF {name}"] = {"load_s": time.perf_counter() - start}
        out.runs[f"HF {name}"] = eng.hf(model)
    return out


def mode_name(beam: int) -> str:
    """A cell's mode: greedy, or beam N."""
    return "greedy" if beam == 1 else f"beam {beam}"


def plan(args: argparse.Namespace) -> list[tuple[int, int, bool]]:
    """(beam, batch, ours only) per cell: every beam at every batch size, then ours greedy at the row counts the beam
    cells reach that no greedy cell has."""
    cells = [(beam, batch, False) for beam in args.beams for batch in args.batch_sizes]
    if 1 not in args.beams:
        return cells
    reached = {batch * beam for beam, batch, _ in cells if beam > 1} - set(args.batch_sizes)
    return cells + [(1, rows, True) for rows in sorted(reached)]


def run_cells(args, runs: dict[str, Engine], src: list[list[int]], start: float) -> tuple[dict, list[str]]:
    """{(mode, batch): {engine: tokens/s}} of every planned cell begun within --budget seconds; the skipped ones."""
    cells, skipped = {}, []
    for beam, batch, ours_only in plan(args):
        mode = mode_name(beam)
        if time.perf_counter() - start > args.budget:
            skipped.append(f"{mode} batch {batch}")
            continue
        chosen = {k: v for k, v in runs.items() if k.startswith("ours ") or not ours_only}
        n = args.batch1_sentences if batch == 1 else max(args.sentences, batch)
        found = time_cell([Local(k, v) for k, v in chosen.items()], src[:n], batch, beam, args.new_tokens)
        wrong = [k for k, c in found.items() if c.wrong_length]
        assert not wrong, f"{wrong} did not generate {args.new_tokens} tokens per sentence"
        cells[(mode, batch)] = {k: c.tps for k, c in found.items()}
        log(f"{mode} batch {batch}: " + ", ".join(f"{k} {v:.0f}" for k, v in cells[(mode, batch)].items()))
    return cells, skipped


def padded_step(static, rows: int, span: int, eager: bool = False) -> Callable[[], None]:
    """One padded step at (rows, span), as StaticDecoder.capture records it: its graph's replay where one was
    captured (unless `eager`), else the same device work run eagerly."""
    graph = static.graphs.get((rows, span, 1))  # greedy: row i reads slot i
    if graph is not None and not eager:
        return graph.replay

    def run() -> None:
        with torch.inference_mode(), static.attention():
            static._forward(static._inputs((rows, span, 1), None))

    return run


def card_rates(device: torch.device, dtype: torch.dtype) -> dict[str, float]:
    """The card's copy bandwidth (bytes/s, one 1 GiB device-to-device copy) and matmul rate (FLOP/s, 8192^3 in
    `dtype`); small sizes on a CPU."""
    cuda = device.type == "cuda"
    bandwidth = copy_bandwidth(device, (1 << 30) if cuda else (16 << 20), 20 if cuda else 3)
    rate = matmul_rate(device, dtype if cuda else torch.float32, 8192 if cuda else 256, 20 if cuda else 3)
    return {"bandwidth": bandwidth, "flop_rate": rate}


def step_rows(static, cells: dict) -> list[int]:
    """The captured row counts the measured cells ran at (rows padded up as the decoder pads them)."""
    wanted = {batch * beam_of(mode) for mode, batch in cells}
    return sorted({static.rows[bisect.bisect_left(static.rows, r)] for r in wanted if r <= static.rows[-1]})


def roofline(static, args, cells: dict, card: dict[str, float], main: str) -> list[dict]:
    """One row per row count: the step's bytes and FLOPs at the largest span, its measured time (graph replays timed
    with CUDA events), kernels per step, the multiples of its bounds, and the wall time per step of the cells."""
    device, dtype = static.device, static.model.out_proj.weight.dtype
    span = static.spans[-1]
    self_span, source = min(span, static.positions), min(span, static.source)
    out = []
    for rows in step_rows(static, cells):
        step = padded_step(static, rows, span)
        seconds = device_seconds(step, args.step_iters, device)
        work = step_work(static.cfg, rows, self_span, source, dtype.itemsize, 4)
        row = {"rows": rows, "span": self_span, "source": source, "bytes": work.bytes, "weights": work.weights}
        row |= {"kv": work.kv, "logits": work.logits, "flops": work.flops, "step_s": seconds}
        row |= {"memory_s": work.bytes / card["bandwidth"], "compute_s": work.flops / card["flop_rate"]}
        row |= {f"x_{k}": v for k, v in multiples(seconds, work, card["bandwidth"], card["flop_rate"]).items()}
        kernels = kernels_of(step, device) or kernels_of(padded_step(static, rows, span, True), device)
        row["kernels"], row["kinds"] = len(kernels), kernel_kinds(kernels)
        for (mode, batch), tps in cells.items():
            if batch * beam_of(mode) == rows and tps.get(main):
                row[f"wall_s {mode}"] = batch / tps[main]
        out.append(row)
    return out


def busy(run: Engine, src: list[list[int]], new: int) -> tuple[float, float, float]:
    """(GPU busy share, wall ms per step, launches per step) of one greedy run: kernel time from torch.profiler over
    the wall time of the same run unprofiled (the profiler slows the host down); launches count kernel and graph
    launches (a graph replay is one)."""
    from torch.profiler import ProfilerActivity, profile

    run(src, 1, 4)
    sync()
    start = time.perf_counter()
    run(src, 1, new)
    sync()
    wall = time.perf_counter() - start
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run(src, 1, new)
        sync()
    events = prof.key_averages()
    kernels = sum(e.self_device_time_total for e in events) / 1e6
    launches = sum(e.count for e in events if e.key.startswith(("cudaLaunchKernel", "cudaGraphLaunch")))
    return kernels / wall, 1000 * wall / new, launches / new


# The report: the markdown section from the JSON-able result of one run.

HEADING = "## GPU decoding: {label} (bench/gpu_speed.py)"
METHOD = (
    "Engines take turns batch by batch; tokens/s = tokens of the best hypothesis / wall time (synchronised), every "
    "sentence forced to the same length (checked); row-tokens/s = tokens/s x beam (every beam row decodes a token "
    "per step). Roofline: a step at R rows must read the decoder's weights once (self-attention Q/K/V/O, "
    "cross-attention Q/O, FFN, norms, output projection), the self-attention K/V of every row at the span and the "
    "cross-attention K/V at the source length, and write float32 logits (R x vocab); FLOPs are 2 x the matmuls' "
    "multiply-adds plus attention's QK^T and AV. Bounds: bytes / the card's copy bandwidth (one 1 GiB "
    "device-to-device copy, read + write, CUDA events) and FLOPs / its matmul rate (8192^3 GEMM in the step's "
    "dtype); the step: graph replays of the captured (R, largest span) step timed back to back with CUDA events; "
    "kernels: torch.profiler's device kernels in one replay (in the step run eagerly if it sees none there); "
    "wall: the cell's wall time per step (host work included, spans growing over the decode). On a CPU the same "
    "with the wall clock, small sizes and the eager step."
)


def heading(result: dict) -> str:
    """The section's heading (one section per shape)."""
    return HEADING.format(label=result["label"])


def _cells(result: dict) -> dict[tuple[str, int], dict[str, float]]:
    """{(mode, batch): {engine: tokens/s}}."""
    return {(c["mode"], c["batch"]): c["tps"] for c in result["cells"]}


def beam_of(mode: str) -> int:
    """The beam width of a cell's mode ("greedy": 1, "beam N": N)."""
    return 1 if mode == "greedy" else int(mode.split()[1])


def tps_table(result: dict) -> list[str]:
    """Tokens/s per engine per cell, row-tokens/s against greedy at the same rows, ours against `transformers`."""
    cells, main = _cells(result), result["main"]
    names = list(dict.fromkeys(n for tps in cells.values() for n in tps))
    others = [n for n in names if n.startswith("HF ") or n.startswith("ours seq ")]
    head = ["mode", "batch", "rows", *names, f"{main} row-tokens/s", "/ greedy at the same rows"]
    head += [f"{main} / {o}" for o in others]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (mode, batch), tps in cells.items():
        rows, ours = batch * beam_of(mode), tps.get(main, 0.0)
        greedy = cells.get(("greedy", rows), {}).get(main)
        same = f"{ours * beam_of(mode) / greedy:.2f}x" if greedy and mode != "greedy" else "-"
        row = [mode, str(batch), str(rows), *(f"{tps[n]:,.0f}" if n in tps else "-" for n in names)]
        row += [f"{ours * beam_of(mode):,.0f}", same]
        row += [f"{ours / tps[o]:.2f}x" if tps.get(o) else "-" for o in others]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def kinds_table(result: dict) -> list[str]:
    """The step's kernels by kind at each row count: how many, and their time (us) in one step."""
    steps = [s for s in result["steps"] if s.get("kinds")]
    if not steps:
        return []
    kinds = list(dict.fromkeys(k for s in steps for k in s["kinds"]))
    lines = ["| kind | " + " | ".join(f"{s['rows']} rows: kernels, us" for s in steps) + " |"]
    lines.append("|---|" + "---|" * len(steps))
    for kind in kinds:
        cells = [s["kinds"].get(kind, (0, 0.0)) for s in steps]
        lines.append(f"| {kind} | " + " | ".join(f"{n}, {t * 1e6:.0f}" for n, t in cells) + " |")
    return ["The step's kernels by kind (torch.profiler, one replay; on a CPU its top-level ops):", "", *lines, ""]


def roofline_table(result: dict) -> list[str]:
    """The step at each row count against its memory and compute bounds."""
    modes = list(dict.fromkeys(k.removeprefix("wall_s ") for s in result["steps"] for k in s if k.startswith("wall_")))
    head = ["rows", "span / source", "MB read+written", "GFLOP", "memory bound (us)", "compute bound (us)"]
    head += ["step (us)", "x memory", "x compute", "x roofline", "kernels / step"]
    head += [f"wall / step, {m} (us)" for m in modes] + [f"wall x roofline, {m}" for m in modes]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in result["steps"]:
        bound = max(s["memory_s"], s["compute_s"])
        walls = [s.get(f"wall_s {m}") for m in modes]
        row = [str(s["rows"]), f"{s['span']} / {s['source']}", f"{s['bytes'] / 1e6:,.1f}", f"{s['flops'] / 1e9:.2f}"]
        row += [f"{s['memory_s'] * 1e6:.1f}", f"{s['compute_s'] * 1e6:.1f}", f"{s['step_s'] * 1e6:.1f}"]
        row += [f"{s['x_memory']:.2f}", f"{s['x_compute']:.2f}", f"{s['x_roofline']:.2f}", str(s["kernels"])]
        row += [f"{w * 1e6:.0f}" if w else "-" for w in walls] + [f"{w / bound:.2f}" if w else "-" for w in walls]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _step(result: dict, rows: int) -> dict | None:
    """The roofline row at `rows` rows, if measured."""
    return next((s for s in result["steps"] if s["rows"] == rows), None)


Goal = tuple[str, float | None, float, str]  # (target, measured or None, limit, "min" or "max")


def _tps(cells: dict, mode: str, batch: int, engine: str) -> float | None:
    """tokens/s of an engine in one cell, or None."""
    return cells.get((mode, batch), {}).get(engine)


def _ratio(cells: dict, mode: str, batch: int, a: str, b: str) -> float | None:
    """tokens/s of a / b in one cell, or None."""
    x, y = _tps(cells, mode, batch, a), _tps(cells, mode, batch, b)
    return x / y if x and y else None


def _opus_targets(result: dict, cells: dict, main: str) -> list[Goal]:
    """The targets on the OPUS-MT shape (docs/benchmarks.md: Targets)."""
    s64 = _step(result, 64)
    out = [(f"{main} step at 64 rows (us)", s64 and s64["step_s"] * 1e6, 250.0, "max")]
    out += [(f"{main} step at 64 rows / memory bound", s64 and s64["x_memory"], 4.0, "max")]
    for batch, want in ((64, 150_000), (256, 250_000)):
        out.append((f"{main} greedy batch {batch} tokens/s", _tps(cells, "greedy", batch, main), want, "min"))
    for batch in (32, 64, 256):
        beam, greedy = _tps(cells, "beam 4", batch, main), _tps(cells, "greedy", 4 * batch, main)
        value = 4 * beam / greedy if beam and greedy else None
        out.append((f"beam 4 batch {batch} row-tokens/s / greedy at {4 * batch} rows", value, 0.9, "min"))
    for other, want in (("HF fp32", 10.0), ("HF fp16", 5.0)):
        value = _ratio(cells, "beam 4", 32, main, other)
        out.append((f"{main} / {other}, beam 4 batch 32", value, want, "min"))
    for batch in (64, 256):
        out.append(
            (f"{main} / HF fp16, greedy batch {batch}", _ratio(cells, "greedy", batch, main, "HF fp16"), 3.0, "min")
        )
    one = _tps(cells, "greedy", 1, main)
    out.append((f"{main} greedy batch 1 ms per token", one and 1000 / one, 1.5, "max"))
    share = result["busy"].get(main, {}).get("share")
    out.append((f"GPU busy, {main} greedy batch 64 (%)", share and 100 * share, 70.0, "min"))
    return out + [_startup_goal(result, main)]


def _startup_goal(result: dict, main: str) -> Goal:
    """Start-up: loading and capturing (compiling) every graph size within 90 s."""
    s = result["startup"].get(main, {})
    value = s["load_s"] + s["capture_s"] if s.get("graphs") else None  # no graphs (CPU): not measured
    return (f"{main} start-up: load + capture of every graph size (s)", value, 90.0, "max")


def _nllb_targets(result: dict, cells: dict, main: str) -> list[Goal]:
    """The targets on the NLLB shapes."""
    s64 = _step(result, 64)
    out = [(f"{main} greedy step at 64 rows / memory bound", s64 and s64["x_memory"], 2.0, "max")]
    for mode in ("greedy", "beam 4"):
        out.append((f"{main} / HF fp16, {mode} batch 64", _ratio(cells, mode, 64, main, "HF fp16"), 5.0, "min"))
    return out + [_startup_goal(result, main)]


def targets(result: dict) -> list[tuple[str, str, str]]:
    """(target, measured, met) rows of the shape's family; "not measured" where the run lacks the cell."""
    cells, main = _cells(result), result["main"]
    pick = _nllb_targets if result["family"] == "nllb" else _opus_targets
    out = []
    for name, value, limit, kind in pick(result, cells, main):
        goal = f"{name} {'>=' if kind == 'min' else '<='} {limit:g}"
        if value is None:
            out.append((goal, "not measured", "-"))
        else:
            met = value >= limit if kind == "min" else value <= limit
            out.append((goal, f"{value:,.2f}", "yes" if met else "**no**"))
    return out


def _startup(result: dict) -> str:
    """What starting each engine cost."""
    parts = []
    for name, s in result["startup"].items():
        graphs = f", {s['graphs']} graphs captured in {s['capture_s']:.1f} s" if "capture_s" in s else ""
        parts.append(f"{name}: load {s['load_s']:.1f} s{graphs}")
    return "; ".join(parts) + " (capture includes any compilation of the step)"


def _facts(result: dict) -> list[str]:
    """The bullets: machine, model, work, card, start-up, method, skipped cells."""
    m, card, args = result["machine"], result["card"], result["args"]
    where = m["gpu"] if m["gpu"] != "none" else f"{m['cpu']} (no GPU)"
    work = f"{args['sentences']} random sources of 10-40 tokens per cell (more where a cell's batch is larger)"
    work += f", {args['batch1_sentences']} at batch 1" if 1 in args["batch_sizes"] else ""
    out = [
        f"- Machine: {where}, torch {m['torch']}, transformers {m['transformers']}.",
        f"- Model: random {result['label']} ({result['describe']}), saved as a Hugging Face checkpoint; ours loads "
        "it with `model.loading.checkpoint.load`, `transformers` with `from_pretrained`.",
        f"- Work: {work}, {args['new_tokens']} new tokens forced per sentence.",
        f"- Card: copy bandwidth {card['bandwidth'] / 1e9:,.0f} GB/s, matmul {card['flop_rate'] / 1e12:.3g} TFLOP/s "
        f"({args['ours'][0]}).",
        f"- Start-up: {_startup(result)}.",
        f"- {METHOD}",
    ]
    if result["skipped"]:
        out.append(f"- Skipped (past --budget {args['budget']:g} s): {', '.join(result['skipped'])}.")
    return out


def render(result: dict) -> str:
    """The markdown section."""
    busy = ["| greedy, batch 64 | GPU busy (kernel time / unprofiled wall) | wall ms per step | launches per step |"]
    busy.append("|---|---|---|---|")
    for name, b in result["busy"].items():
        busy.append(f"| {name} | {b['share']:.0%} | {b['ms_per_step']:.2f} | {b['launches']:.1f} |")
    goals = ["| target | measured | met |", "|---|---|---|"] + [f"| {t} | {v} | {ok} |" for t, v, ok in targets(result)]
    made = f"Generated by `{command('bench.gpu_speed')}` on {result['machine']['date']} in {result['seconds']:.0f} s."
    return "\n".join([
        heading(result), "", made, "", *_facts(result), "", "Tokens/s (higher is better):", "", *tps_table(result),
        "", f"The step of {result['main']} against its roofline:", "", *roofline_table(result), "",
        *kinds_table(result),
        *(busy + [""] if result["busy"] else []), *goals, "",
    ])  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags; batch sizes and sentences default per shape."""
    p = argparse.ArgumentParser(prog="python -m bench.gpu_speed", description=__doc__.split("\n\n")[0])
    ints = lambda s: [int(x) for x in s.split(",") if x]
    names = lambda s: [x for x in s.split(",") if x]
    p.add_argument("--shape", choices=list(SHAPES), default="opus", help="model shape (default opus)")
    p.add_argument("--batch-sizes", type=ints, help="comma list (default: opus 1,32,64,256; nllb 64)")
    p.add_argument("--beams", type=ints, default=[1, 4], help="beam sizes, 1 = greedy (default 1,4)")
    p.add_argument("--sentences", type=int, help="sentences per cell (default: opus 256, nllb 128)")
    p.add_argument("--batch1-sentences", type=int, default=16, help="sentences at batch 1 (default 16)")
    p.add_argument("--new-tokens", type=int, help="tokens forced per sentence (default 64; tiny shapes 8)")
    p.add_argument("--ours", type=names, default=["fp16"], help="our engine's dtypes: fp16,bf16,fp32 (default fp16)")
    p.add_argument("--hf", type=names, default=["fp16", "fp32"], help="transformers' dtypes (default fp16,fp32)")
    p.add_argument("--eager", action="store_true", help="also `ours eager`: the model's own step (CUDA only)")
    p.add_argument("--compare-overlap", action="store_true", help="also `ours seq`: no overlap scheduler")
    p.add_argument("--step-iters", type=int, help="graph replays timed per row count (default 100; CPU 2)")
    p.add_argument("--budget", type=float, default=400.0, help="no cell starts after this many seconds (400)")
    p.add_argument("--workdir", type=Path, help="write the checkpoint here and keep it (default: a temp dir)")
    p.add_argument("--out", type=Path, help="also write gpu_speed-SHAPE.md and .json into this directory")
    p.add_argument("--doc", type=Path, default=DOC, help=f"markdown file whose section is replaced (default {DOC})")
    p.add_argument("--no-write", action="store_true", help="leave --doc alone")
    args = p.parse_args(argv)
    spec, tiny = SHAPES[args.shape], args.shape.startswith("tiny")
    args.batch_sizes = args.batch_sizes or list(spec.batches)
    args.sentences = args.sentences or spec.sentences
    args.new_tokens = args.new_tokens or (8 if tiny else 64)
    args.step_iters = args.step_iters or (100 if torch.cuda.is_available() else 2)
    unknown = [d for d in args.ours + args.hf if d not in DTYPES]
    if unknown or not args.ours:
        p.error(f"--ours needs one or more of {list(DTYPES)}; got {args.ours}, --hf {args.hf}")
    return args


def measure(args: argparse.Namespace, path: Path, start: float) -> dict:
    """Every measurement of a run, as the JSON report holds it."""
    spec, device = SHAPES[args.shape], torch.device("cuda" if torch.cuda.is_available() else "cpu")
    built = build(path, args, device)
    most = max(args.sentences, max(args.batch_sizes) * max(args.beams))
    src = marian.sources(most, spec.shape["vocab"], 1, spec.family.EOS, spec.family.FIRST)
    cells, skipped = run_cells(args, built.runs, src, start)
    main = f"ours {args.ours[0]}"
    static = built.statics[args.ours[0]]
    card = card_rates(device, DTYPES[args.ours[0]])
    steps = roofline(static, args, cells, card, main)
    busy_rows = {}
    if device.type == "cuda" and 64 <= len(src):
        busy_rows = {n: busy(r, src[:64], args.new_tokens) for n, r in built.runs.items() if n.startswith("ours ")}
    family = spec.family.__name__.rsplit(".")[-1]
    return {
        "shape": args.shape, "family": family, "label": spec.label, "describe": spec.family.describe(spec.shape),
        "config": spec.shape, "main": main, "startup": built.startup, "card": card, "skipped": skipped,
        "cells": [{"mode": m, "batch": b, "tps": tps} for (m, b), tps in cells.items()], "steps": steps,
        "busy": {n: dict(zip(("share", "ms_per_step", "launches"), v, strict=True)) for n, v in busy_rows.items()},
        "machine": machine_info("transformers"), "seconds": time.perf_counter() - start,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Build the shape, measure, print the section; write it (and the JSON) where asked."""
    import tempfile

    args, start = parse_args(argv), time.perf_counter()
    spec = SHAPES[args.shape]
    with tempfile.TemporaryDirectory(prefix="gpu_speed_") as tmp:
        path = (args.workdir or Path(tmp)) / args.shape
        if not (path / "config.json").exists():
            spec.family.write(path, spec.shape)
        result = measure(args, path, start)
    result["args"] = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    section = render(result)
    print(section)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"gpu_speed-{args.shape}.md").write_text(section + "\n", encoding="utf-8")
        (args.out / f"gpu_speed-{args.shape}.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if not args.no_write:
        write_section(args.doc, section)
    log(f"bench.gpu_speed --shape {args.shape}: {time.perf_counter() - start:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
