"""Score a model both ways (en->es and es->en) on the everyday phrases (`everyday.tsv`), the independent everyday
set (`everyday2.tsv`) and the Handbook dev pairs: corpus chrF/BLEU and the share of phrases below 40 sentence chrF.
A one-way model is scored on the direction it serves."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import sacrebleu
import torch

from model.loading.checkpoint import load
from training.common import EVERYDAY, EVERYDAY2, WORK, read_lines, read_tsv, write_lines
from training.evaluate import translate

LOW = 40.0  # a phrase below this sentence chrF reads as wrong


def sets() -> dict[str, tuple[list[str], list[str]]]:
    """(English, Spanish) of each held-out set."""
    out = {name: tuple(map(list, zip(*read_tsv(path), strict=True))) for name, path in
           (("everyday", EVERYDAY), ("everyday2", EVERYDAY2))}  # fmt: skip
    out["handbook-dev"] = (read_lines(WORK / "dev.en"), read_lines(WORK / "dev.es"))
    return out


def score(hyps: list[str], refs: list[str]) -> dict[str, float]:
    """Corpus chrF and BLEU, and the share of sentences under LOW chrF (percent)."""
    low = sum(sacrebleu.sentence_chrf(h, [r]).score < LOW for h, r in zip(hyps, refs, strict=True))
    return {
        "chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2),
        "bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2),
        "below40": round(100 * low / len(refs), 1),
    }


def main() -> None:
    """Print and save the scores (and write the translations beside the JSON)."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", type=Path, default=Path("model/builtin/en-es"))
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--skip", default="", help="comma-separated set names to leave out (e.g. handbook-dev)")
    p.add_argument("--out", type=Path, help="JSON file (default work/twoway.<model dir>.beamN.json)")
    args = p.parse_args()
    out = args.out or WORK / f"twoway.{args.model.name}.beam{args.beam}.json"
    torch.set_grad_enabled(False)
    torch.set_num_threads(1)
    ck = load(args.model)
    result: dict = {"model": str(args.model), "beam": args.beam}
    for name, (en, es) in sets().items():
        if name in args.skip.split(","):
            continue
        for source, target, src, ref in (("en", "es", en, es), ("es", "en", es, en)):
            if not ck.languages.serves(source, target):
                continue
            t0 = time.time()
            prefix = ck.languages.prefix(source, target)
            hyps = translate(ck.model, ck.tokenizer, src, args.beam, prefix=prefix)
            result[f"{name} {source}-{target}"] = {**score(hyps, ref), "n": len(src), "s": round(time.time() - t0, 1)}
            write_lines(out.with_suffix(f".{name}.{source}-{target}.txt"), hyps)
            print(f"{name} {source}-{target}: {result[f'{name} {source}-{target}']}", flush=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
