"""One short sentence's CPU latency on the built-in model against another model (the one it replaces), one greedy
request at a time on one thread, the models taking turns so that load on the shared machine hits both alike.

    python -m bench.builtin_latency --before training/work/baseline [--rounds 40]

Each model translates "Where is the station?" into Spanish (and a two-way model "¿Dónde está la estación?" into
English too) with the target's language token first, as the server asks; prints the median and p90 in ms."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from app.settings import BUILTIN
from model.loading.checkpoint import load
from model.runner.generate import generate
from model.runner.params import DecodeParams
from model.runner.search import Request

CASES = (("en", "es", "Where is the station?"), ("es", "en", "¿Dónde está la estación?"))


def main() -> None:
    """Interleaved rounds; one line per model and direction."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", type=Path, default=BUILTIN)
    p.add_argument("--before", type=Path, required=True, help="the model to compare with")
    p.add_argument("--rounds", type=int, default=40)
    args = p.parse_args()
    torch.set_num_threads(1)
    runs = []
    for label, path in (("before", args.before), ("after", args.model)):
        ck = load(path)
        for source, target, text in CASES:
            if ck.languages.serves(source, target):
                ids = ck.languages.prefix(source, target) + ck.tokenizer.encode(text)
                runs.append((f"{label} {source}->{target}", ck, ids, []))
    params = DecodeParams(max_new_tokens=64)
    with torch.inference_mode():
        for r in range(args.rounds + 3):
            for _, ck, ids, times in runs[r % len(runs) :] + runs[: r % len(runs)]:
                t0 = time.perf_counter()
                generate(ck.model, [Request(0, ids, params)])
                if r >= 3:  # warm-up rounds are not timed
                    times.append(1000 * (time.perf_counter() - t0))
    for label, ck, ids, times in runs:
        text = ck.tokenizer.decode(generate(ck.model, [Request(0, ids, params)])[0][0].tokens)
        p90 = sorted(times)[int(0.9 * len(times))]
        print(f"{label:16s} median {statistics.median(times):6.1f} ms  p90 {p90:6.1f} ms  ({text})")


if __name__ == "__main__":
    main()
