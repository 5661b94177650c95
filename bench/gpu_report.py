"""bench.gpu_speed's report: the markdown section (tokens/s and ratios, the roofline, start-up, targets met or not)
from the JSON-able result of one run."""

from __future__ import annotations

from bench.report import command

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
    """Issues 21 and 26 (and the earlier GPU issues) on the OPUS-MT shape."""
    s64 = _step(result, 64)
    out = [(f"{main} step at 64 rows (us), issue 21", s64 and s64["step_s"] * 1e6, 250.0, "max")]
    out += [(f"{main} step at 64 rows / memory bound, issue 21", s64 and s64["x_memory"], 4.0, "max")]
    for batch, want in ((64, 150_000), (256, 250_000)):
        out.append((f"{main} greedy batch {batch} tokens/s, issue 21", _tps(cells, "greedy", batch, main), want, "min"))
    for batch in (32, 64, 256):
        beam, greedy = _tps(cells, "beam 4", batch, main), _tps(cells, "greedy", 4 * batch, main)
        value = 4 * beam / greedy if beam and greedy else None
        out.append((f"beam 4 batch {batch} row-tokens/s / greedy at {4 * batch} rows, issue 26", value, 0.9, "min"))
    for other, want in (("HF fp32", 10.0), ("HF fp16", 5.0)):
        value = _ratio(cells, "beam 4", 32, main, other)
        out.append((f"{main} / {other}, beam 4 batch 32, issue 26", value, want, "min"))
    for batch in (64, 256):
        out.append(
            (f"{main} / HF fp16, greedy batch {batch}", _ratio(cells, "greedy", batch, main, "HF fp16"), 3.0, "min")
        )
    one = _tps(cells, "greedy", 1, main)
    out.append((f"{main} greedy batch 1 ms per token", one and 1000 / one, 1.5, "max"))
    share = result["busy"].get(main, {}).get("share")
    out.append((f"GPU busy, {main} greedy batch 64 (%), issues 14 and 26", share and 100 * share, 70.0, "min"))
    return out + [_startup_goal(result, main)]


def _startup_goal(result: dict, main: str) -> Goal:
    """Issue 21: loading and capturing (compiling) every graph size within 90 s."""
    s = result["startup"].get(main, {})
    value = s["load_s"] + s["capture_s"] if s.get("graphs") else None  # no graphs (CPU): not measured
    return (f"{main} start-up: load + capture of every graph size (s), issue 21", value, 90.0, "max")


def _nllb_targets(result: dict, cells: dict, main: str) -> list[Goal]:
    """Issue 21 on the NLLB shapes."""
    s64 = _step(result, 64)
    out = [(f"{main} greedy step at 64 rows / memory bound, issue 21", s64 and s64["x_memory"], 2.0, "max")]
    for mode in ("greedy", "beam 4"):
        out.append(
            (f"{main} / HF fp16, {mode} batch 64, issue 21", _ratio(cells, mode, 64, main, "HF fp16"), 5.0, "min")
        )
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
        "it with `model.checkpoint.load`, `transformers` with `from_pretrained`.",
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
        *(busy + [""] if result["busy"] else []), *goals, "",
    ])  # fmt: skip
