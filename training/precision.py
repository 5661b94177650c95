"""Quality of the built-in model in a lower precision against float32, on the held-out sets (greedy):

    python -m training.precision --dtype int8-ffn --dtype int8   # needs work/test.{en,es} (training.handbook)

chrF of each precision and the share of sentences whose output equals float32's, per set."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from model.loading.checkpoint import load
from training.evaluate import human_sets, scores, translate


def compare(model_dir: Path, precisions: list[str], limit: int = 0, beam: int = 1) -> dict:
    """{set: {precision: {chrf, bleu, identical, seconds}}}; float32 first, the others against it."""
    result: dict = {}
    outputs: dict[str, dict[str, list[str]]] = {}
    for precision in ["float32", *precisions]:
        ck = load(model_dir, dtype=precision)
        for name, (src, ref) in human_sets(limit).items():
            start = time.perf_counter()
            hyps = translate(ck.model, ck.tokenizer, src, beam)
            outputs.setdefault(name, {})[precision] = hyps
            base = outputs[name]["float32"]
            same = sum(a == b for a, b in zip(hyps, base, strict=True)) / len(src)
            row = {**scores(hyps, ref), "identical": round(same, 4), "seconds": round(time.perf_counter() - start, 1)}
            result.setdefault(name, {"sentences": len(src)})[precision] = row
    return result


def main() -> None:
    """Print the comparison as JSON."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, default=Path("model/builtin/en-es"))
    p.add_argument("--dtype", action="append", default=[], help="precision to compare (repeatable)")
    p.add_argument("--limit", type=int, default=0, help="first N Handbook test sentences (0 = all)")
    p.add_argument("--beam", type=int, default=1)
    args = p.parse_args()
    torch.set_grad_enabled(False)
    print(
        json.dumps(compare(args.model, args.dtype or ["int8-ffn", "int8", "bfloat16"], args.limit, args.beam), indent=2)
    )


if __name__ == "__main__":
    main()
