"""Where our decoder spends its time: a wall-clock breakdown by stage plus torch.profiler's operator table.

    python -m bench.profile_decoder                       # batch 64, greedy and beam 4, 64 new tokens
    python -m bench.profile_decoder --beams 4 --ops 30 --workdir /tmp/model_speed

Uses the same random Marian checkpoint as bench.model_speed (built in --workdir when missing). The breakdown wraps
the functions of model/ with timers (CPU only, so no device sync is needed); the operator table comes from
torch.profiler over one more run. The machine is shared, so the table also gives thread CPU time
(time.thread_time), which descheduling does not inflate: with --threads 1 it is the compute time of each stage.
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
import tempfile
import time
from pathlib import Path

import torch

from bench.marian import CPU, sources, write

STAGES = [  # (label, module, owner attribute path, function name)
    ("decode_step (model forward)", "model.transformer", "Seq2SeqTransformer", "decode_step"),
    ("  decoder layers", "model.transformer", "DecoderLayer", "step"),
    ("    cache.write (K/V index_put)", "model.runner.cache", "DecoderCache", "write"),
    ("    cache.self_mask", "model.runner.cache", "DecoderCache", "self_mask"),
    ("  _logits (out_proj + bias)", "model.transformer", "Seq2SeqTransformer", "_logits"),
    ("  cache.ensure_capacity", "model.runner.cache", "DecoderCache", "ensure_capacity"),
    ("batch.step total", "model.runner.batch", "DecodeBatch", "step"),
    ("  Group.advance (search)", "model.search", "Group", "advance"),
    ("  DecodeBatch._rearrange (cache moves)", "model.runner.batch", "DecodeBatch", "_rearrange"),
    ("    DecoderCache.take_", "model.runner.cache", "DecoderCache", "take_"),
    ("prefill (encode + cross K/V)", "model.runner.batch", "DecodeBatch", "prefill"),
]


def instrument() -> tuple[dict[str, float], dict[str, float], dict[str, int], callable]:
    """Wrap the stage functions with timers; returns wall totals, thread CPU totals, counts and an undo function."""
    import importlib

    totals: dict[str, float] = collections.defaultdict(float)
    cpu: dict[str, float] = collections.defaultdict(float)
    counts: dict[str, int] = collections.defaultdict(int)
    undo = []
    for label, module, owner, name in STAGES:
        cls = getattr(importlib.import_module(module), owner)
        raw = cls.__dict__[name]
        is_cm = isinstance(raw, classmethod)
        fn = raw.__func__ if is_cm else raw

        def wrap(fn=fn, label=label):
            @functools.wraps(fn)
            def timed(*a, **k):
                start, start_cpu = time.perf_counter(), time.thread_time()
                try:
                    return fn(*a, **k)
                finally:
                    totals[label] += time.perf_counter() - start
                    cpu[label] += time.thread_time() - start_cpu
                    counts[label] += 1

            return timed

        setattr(cls, name, classmethod(wrap()) if is_cm else wrap())
        undo.append((cls, name, raw))

    def restore() -> None:
        for cls, name, raw in undo:
            setattr(cls, name, raw)

    return totals, cpu, counts, restore


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile_decoder", description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--beams", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4])
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ops", type=int, default=25, help="rows of the operator table (0: skip torch.profiler)")
    p.add_argument("--dtype", choices=["fp32", "bf16", "int8"], default="fp32")
    p.add_argument("--workdir", type=Path)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)

    from model.checkpoint import load
    from model.generate import generate
    from model.params import DecodeParams
    from model.search import Request

    with tempfile.TemporaryDirectory(prefix="profile_decoder_") as tmp:
        hf_dir = (args.workdir or Path(tmp)) / "marian"
        if not (hf_dir / "model.safetensors").exists():
            write(hf_dir, CPU)
        model = load(hf_dir, dtype={"fp32": "float32", "bf16": "bfloat16", "int8": "int8"}[args.dtype]).model
    src = sources(args.batch, CPU["vocab"])
    for beam in args.beams:
        new = args.new_tokens  # no greedy scores, as in bench.model_speed
        params = DecodeParams(beam_size=beam, max_new_tokens=new, min_new_tokens=new, return_scores=False)
        requests = [Request(i, s, params) for i, s in enumerate(src)]
        generate(model, requests)  # warm-up
        totals, cpu, counts, restore = instrument()
        start, start_cpu = time.perf_counter(), time.thread_time()
        try:
            out = generate(model, requests)
        finally:
            restore()
        wall, wall_cpu = time.perf_counter() - start, time.thread_time() - start_cpu
        tokens = sum(len(h[0].tokens) for h in out)
        mode = "greedy" if beam == 1 else f"beam {beam}"
        print(
            f"\n## {args.dtype} {mode}, batch {args.batch}, {args.threads} thread(s): {wall:.2f}s wall "
            f"({tokens / wall:.0f} tokens/s), {wall_cpu:.2f}s main-thread CPU ({tokens / wall_cpu:.0f} tokens/s)\n"
        )
        print("| stage | calls | wall ms | % wall | CPU ms | % CPU |\n|---|---|---|---|---|---|")
        for label, *_ in STAGES:
            if counts.get(label):
                print(
                    f"| {label} | {counts[label]} | {totals[label] * 1e3:.0f} | {100 * totals[label] / wall:.1f} "
                    f"| {cpu[label] * 1e3:.0f} | {100 * cpu[label] / wall_cpu:.1f} |"
                )
        if args.ops:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                generate(model, requests)
            print()
            averages = prof.key_averages()
            print(averages.table(sort_by="self_cpu_time_total", row_limit=args.ops, max_name_column_width=48))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
