"""How well `details.confidence` predicts quality, and what it costs.

    python -m bench.confidence fit     # fit the built-in model on its dev sets -> model/builtin/en-es/confidence.json
    python -m bench.confidence         # quality per set, the OPUS-MT-shaped mechanics, the throughput cost
    python -m bench.confidence speed   # the throughput cost alone

Sets, all held out of training: the fit reads the Handbook dev pairs and everyday2 (dev); the report adds the
Handbook test pairs (a seeded sample), the everyday phrases and the phrases people type first
(bench/data/confidence_first.tsv, with alternative references; and issue 43's larger set, training/first_phrases.tsv),
never fitted on. Per set: Spearman between
confidence and sentence chrF, AUROC for finding the sentences below 40 chrF, expected calibration error (10 bins;
acceptable: chrF >= the calibration's threshold, 40), beside today's `details.score` (mean log-probability).
Needs training/work/{dev,test}.{en,es} (python -m training.handbook)."""

from __future__ import annotations

import argparse
import math
import random
import time
from pathlib import Path

import torch

from bench.machine import cpu_kind, machine_info
from model.calibrate import Scored, decode, fit, read_pairs
from model.confidence import FILE, Calibration, Scorer, dumps, for_checkpoint, source_table
from model.loading.checkpoint import load
from model.runner.generate import generate
from model.runner.params import DecodeParams
from model.runner.search import Request
from training.common import first_phrases

ROOT = Path(__file__).resolve().parent.parent
BUILTIN = ROOT / "model" / "builtin" / "en-es"
WORK = ROOT / "training" / "work"
FIRST = Path(__file__).resolve().parent / "data" / "confidence_first.tsv"
LOW = 40.0  # the chrF below which a sentence is one to find (the AUROC)


def _lines(name: str) -> list[str]:
    return (WORK / name).read_text(encoding="utf-8").splitlines()


def sets(test: int = 400, seed: int = 7) -> dict[str, list[tuple[str, list[str]]]]:
    """Every set by name, dev ones first: (source, references)."""
    handbook = lambda split: [(en, [es]) for en, es in zip(_lines(f"{split}.en"), _lines(f"{split}.es"), strict=True)]  # noqa: E731
    tests = handbook("test")
    random.Random(seed).shuffle(tests)
    return {
        "handbook-dev": handbook("dev"),
        "everyday2": read_pairs(ROOT / "training" / "everyday2.tsv"),
        "handbook-test": tests[:test],
        "everyday": read_pairs(ROOT / "training" / "everyday.tsv"),
        "first": read_pairs(FIRST),
        "first-244": [(en[0], es) for en, es in zip(*first_phrases(), strict=True)],
    }


DEV = ("handbook-dev", "everyday2")
SHARES = (0.7, 0.3)  # each dev set's share of the fit: the short phrases count for more than their 79 of 579 pairs


def ranks(x: list[float]) -> list[float]:
    """Ranks from 0, ties averaged."""
    order, out, i = sorted(range(len(x)), key=x.__getitem__), [0.0] * len(x), 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and x[order[j + 1]] == x[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2
        i = j + 1
    return out


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation."""
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    var = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return cov / var if var else 0.0


def auroc(score: list[float], bad: list[bool]) -> float:
    """The chance that a good item scores above a bad one (ties: half)."""
    r, nb = ranks(score), sum(bad)
    ng = len(bad) - nb
    if not nb or not ng:
        return math.nan
    return (sum(x for x, b in zip(r, bad, strict=True) if not b) - ng * (ng - 1) / 2) / (ng * nb)


def ece(p: list[float], ok: list[bool], bins: int = 10) -> float:
    """Expected calibration error: the share-weighted gap between mean confidence and accuracy per bin."""
    total = 0.0
    for k in range(bins):
        at = [i for i, x in enumerate(p) if min(int(x * bins), bins - 1) == k]
        if at:
            total += len(at) / len(p) * abs(sum(p[i] for i in at) / len(at) - sum(ok[i] for i in at) / len(at))
    return total


def quality(rows: list[Scored], conf: list[float], acceptable: float) -> str:
    """Spearman / AUROC / ECE of `conf` on the rows, and today's score's Spearman / AUROC."""
    chrf, bad = [r.chrf for r in rows], [r.chrf < LOW for r in rows]
    today = [r.x["logprob"] for r in rows]
    cells = [spearman(conf, chrf), auroc(conf, bad), ece(conf, [c >= acceptable for c in chrf])]
    return (f"{len(rows)} | {sum(bad)} | " + " | ".join(f"{v:.3f}" for v in cells)
            + f" | {spearman(today, chrf):.2f} / {auroc(today, bad):.2f}")  # fmt: skip


def report(cal: Calibration, ck, named: dict) -> None:
    """The quality table of the greedy (one-row) and beam-4 heads."""
    print(f"\nCalibration: {cal.fitted_on}; acceptable = chrF >= {cal.acceptable:g}")
    print("| head | set | sentences | below 40 | Spearman | AUROC (<40) | ECE | today's score: Spearman / AUROC |")
    print("|---|---|---|---|---|---|---|---|")
    for head, beam in (("greedy", 1), ("beam 4", 4)):
        fn = cal.one_row if beam == 1 else cal.beam
        pooled: list[Scored] = []
        for name, pairs in named.items():
            rows = decode(ck, pairs, beam)
            tag = "dev" if name in DEV else "held out"
            pooled += [] if name in DEV else rows
            print(f"| {head} | {name} ({tag}) | {quality(rows, [fn(r.x) for r in rows], cal.acceptable)} |", flush=True)
        together = quality(pooled, [fn(r.x) for r in pooled], cal.acceptable)
        print(f"| {head} | the held-out sets together | {together} |", flush=True)


def mechanics() -> None:
    """An OPUS-MT-shaped random model (no quality to predict): confidence is in [0, 1], finite, and deterministic."""
    import tempfile

    from bench.marian import OPUS, sources, write

    with tempfile.TemporaryDirectory() as tmp:
        ck = load(write(Path(tmp) / "opus-mt-en-es", OPUS))
        cal = for_checkpoint(ck.path)
        starts = source_table(ck.tokenizer.source_pieces(ck.config.src_vocab_size))
        srcs = sources(64, ck.config.src_vocab_size)
        for beam in (1, 4):
            params = DecodeParams(beam_size=beam, max_new_tokens=32, confidence=True)
            got = [[cal.confidence(h[0], params, s, starts) for h, s in
                    zip(generate(ck.model, [Request(i, s, params) for i, s in enumerate(srcs)]), srcs, strict=True)]
                   for _ in range(2)]  # fmt: skip
            c, inside = got[0], all(0 <= x <= 1 for x in got[0])
            print(f"- OPUS-MT shape, random weights, beam {beam}: {len(c)} outputs, confidence "
                  f"{min(c):.3g} to {max(c):.3g}, mean {sum(c) / len(c):.3g}, all in [0, 1]: {inside}, "
                  f"the same twice: {got[0] == got[1]} ({cal.fitted_on})")  # fmt: skip


def throughput(ck, rounds: int = 9) -> None:
    """Translated tokens per second at batch 64, confidence on (the step's signals and the engine core's scoring of
    each output) vs off, interleaved; greedy and beam 4."""
    pairs = [p for p in sets()["handbook-test"]][:64]
    srcs = [ck.tokenizer.encode(src) for src, _ in pairs]
    scorer = Scorer(for_checkpoint(BUILTIN), tuple(source_table(ck.tokenizer.source_pieces(ck.config.src_vocab_size))))
    print(f"\nThroughput, batch 64 Handbook test sentences, {cpu_kind()}, {torch.get_num_threads()} threads:")
    for beam in (1, 4):
        times: dict[bool, list[float]] = {False: [], True: []}
        for r in range(rounds + 1):
            for on in (False, True) if r % 2 else (True, False):
                params = DecodeParams(beam_size=beam, max_new_tokens=128, return_scores=False, confidence=on)
                start = time.perf_counter()
                out = generate(ck.model, [Request(i, s, params) for i, s in enumerate(srcs)])
                if on:
                    [scorer(h[0], params, s) for h, s in zip(out, srcs, strict=True)]
                if r:  # the first round warms up
                    times[on].append(time.perf_counter() - start)
                tokens = sum(len(h[0].tokens) for h in out)
        best = {on: tokens / min(t) for on, t in times.items()}
        print(f"- beam {beam}: off {best[False]:.0f} tok/s, on {best[True]:.0f} tok/s: "
              f"{best[True] / best[False]:.3f}x (best of {rounds}; medians {_median(times[False]):.3f} s / "
              f"{_median(times[True]):.3f} s)")  # fmt: skip


def _median(x: list[float]) -> float:
    return sorted(x)[len(x) // 2]


def main(argv: list[str] | None = None) -> None:
    """Fit, or report."""
    p = argparse.ArgumentParser(prog="python -m bench.confidence", description=__doc__)
    p.add_argument("command", nargs="?", default="report", choices=("report", "fit", "speed"))
    p.add_argument("--skip-speed", action="store_true")
    args = p.parse_args(argv)
    torch.set_grad_enabled(False)
    ck, named = load(BUILTIN), sets()
    if args.command == "fit":
        dev = [pair for name in DEV for pair in named[name]]
        weights = [share / len(named[name]) for name, share in zip(DEV, SHARES, strict=True) for _ in named[name]]
        fitted_on = "the Handbook dev pairs (70%) and everyday2 (30%) (bench.confidence)"
        cal = fit(decode(ck, dev, 1), decode(ck, dev, 4), LOW, fitted_on, weights)
        (BUILTIN / FILE).write_text(dumps(cal), encoding="utf-8")
        print(f"wrote {BUILTIN / FILE} from {len(dev)} pairs")
        return
    if args.command == "speed":
        return throughput(ck)
    info = machine_info("sacrebleu")
    print(f"- Machine: {info['cpu']} ({info['cores']}; {info['isa']}), torch {info['torch']}, load {info['load']}")
    report(for_checkpoint(BUILTIN), ck, named)
    print()
    mechanics()
    if not args.skip_speed:
        throughput(ck)


if __name__ == "__main__":
    main()
