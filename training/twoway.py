"""Score a model both ways (en->es and es->en) on the phrases people type first (`first_phrases.tsv`, with the
alternatives a translator accepts), the everyday phrases (`everyday.tsv`), the independent everyday set
(`everyday2.tsv`) and the Handbook dev pairs: corpus chrF/BLEU against every reference and the share of phrases below
40 sentence chrF, and those phrases listed (the model card's "still wrong"). A one-way model is scored on the
direction it serves; a model that reads sentence case is given each phrase as the server gives it (app.casing: "HELLO
WORLD" read as "Hello world", its translation given back in capitals)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import sacrebleu
import torch

from app.casing import Casing
from model.loading.checkpoint import load
from training.common import EVERYDAY, EVERYDAY2, WORK, first_phrases, read_lines, read_tsv, write_lines
from training.evaluate import translate

LOW = 40.0  # a phrase below this sentence chrF reads as wrong


Refs = list[list[str]]  # per sentence, its references (the first is the source of the other direction)


def sets() -> dict[str, tuple[Refs, Refs]]:
    """(English, Spanish) of each held-out set, every sentence with its references."""
    out = {"first": first_phrases()}
    for name, path in (("everyday", EVERYDAY), ("everyday2", EVERYDAY2)):
        out[name] = tuple([[x] for x in side] for side in zip(*read_tsv(path), strict=True))
    out["handbook-dev"] = ([[x] for x in read_lines(WORK / "dev.en")], [[x] for x in read_lines(WORK / "dev.es")])
    return out


def score(hyps: list[str], refs: Refs) -> dict:
    """Corpus chrF and BLEU against every sentence's references, the share of sentences under LOW chrF (percent), and
    those sentences (their index, output and sentence chrF)."""
    streams = [[r[k] if k < len(r) else r[0] for r in refs] for k in range(max(map(len, refs)))]
    chrf = [sacrebleu.sentence_chrf(h, r).score for h, r in zip(hyps, refs, strict=True)]
    low = [(i, h, round(c, 1)) for i, (h, c) in enumerate(zip(hyps, chrf, strict=True)) if c < LOW]
    return {
        "chrf": round(sacrebleu.corpus_chrf(hyps, streams).score, 2),
        "bleu": round(sacrebleu.corpus_bleu(hyps, streams).score, 2),
        "below40": round(100 * len(low) / len(refs), 1),
        "low": low,
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
            casings = [Casing.of(s[0], ck.casing.get(source, "")) for s in src]
            read = [c.model_text(s[0]) for c, s in zip(casings, src, strict=True)]
            hyps = translate(ck.model, ck.tokenizer, read, args.beam, prefix=prefix)
            hyps = [c.restore(h) for c, h in zip(casings, hyps, strict=True)]
            got = {**score(hyps, ref), "n": len(src), "s": round(time.time() - t0, 1)}
            got["low"] = [(src[i][0], h, ref[i][0], c) for i, h, c in got["low"]]  # the phrases still wrong
            result[f"{name} {source}-{target}"] = got
            write_lines(out.with_suffix(f".{name}.{source}-{target}.txt"), hyps)
            shown = {k: v for k, v in got.items() if k != "low"}
            print(f"{name} {source}-{target}: {shown}", flush=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
