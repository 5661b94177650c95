"""Score a checkpoint against the held-out human pairs, side by side with the Apertium teacher."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import sacrebleu
import torch

from model.loading.checkpoint import load
from model.loading.tokenizer import Tokenizer
from model.network.transformer import Seq2SeqTransformer
from model.runner.generate import generate
from model.runner.params import DecodeParams
from model.runner.search import Request
from training.common import EVERYDAY, WORK, read_lines, read_tsv, write_lines
from training.distill import MARK, apertium


def translate(
    model: Seq2SeqTransformer, tokenizer: Tokenizer, lines: list[str], beam: int, batch=64, prefix: list[int] = ()
) -> list[str]:
    """Translate lines with the project's own decoder, in length-sorted batches; `prefix`: language tokens before
    each source (a two-way model's target token)."""
    order = sorted(range(len(lines)), key=lambda i: len(lines[i]))
    out = [""] * len(lines)
    params = DecodeParams(beam_size=beam, max_new_tokens=200)
    for start in range(0, len(order), batch):
        idx = order[start : start + batch]
        reqs = [Request(i, (list(prefix) + tokenizer.encode(lines[i]))[:250], params) for i in idx]
        for i, hyps in zip(idx, generate(model, reqs), strict=True):
            out[i] = tokenizer.decode(hyps[0].tokens)
    return out


def scores(hyps: list[str], refs: list[str]) -> dict[str, float]:
    """Corpus BLEU and chrF."""
    return {
        "bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2),
        "chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2),
    }


def human_sets(limit: int = 0) -> dict[str, tuple[list[str], list[str]]]:
    """(English, human Spanish) of the Handbook test pairs (built by training.handbook) and of the everyday phrases."""
    everyday = read_tsv(EVERYDAY)
    return {
        "handbook": tuple(read_lines(WORK / f"test.{ext}")[: limit or None] for ext in ("en", "es")),
        "everyday": ([en for en, _ in everyday], [es for _, es in everyday]),
    }


def eval_sets(limit: int) -> dict[str, tuple[list[str], list[str], list[str]]]:
    """(English, human Spanish, teacher Spanish) of the Handbook test pairs and of the everyday phrases."""
    sets = human_sets(limit)
    teacher = {
        "handbook": read_lines(WORK / "test.apertium.es")[: limit or None],
        "everyday": [MARK.sub("", h) for h in apertium(sets["everyday"][0])],
    }
    return {name: (src, ref, teacher[name]) for name, (src, ref) in sets.items()}


def main() -> None:
    """Print and save the student's and the teacher's scores on the same sentences, set by set."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", type=Path, default=Path("model/builtin/en-es"))
    p.add_argument("--limit", type=int, default=0, help="first N Handbook test sentences (0 = all)")
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--out", type=Path, help="JSON file (default work/scores.beamN.json)")
    args = p.parse_args()
    out = args.out or WORK / f"scores.beam{args.beam}.json"
    torch.set_grad_enabled(False)
    ck = load(args.model)
    result: dict = {"model": str(args.model), "beam": args.beam}
    for name, (src, ref, teacher) in eval_sets(args.limit).items():
        t0 = time.time()
        hyps = translate(ck.model, ck.tokenizer, src, args.beam, prefix=ck.languages.prefix("en", "es"))
        student = scores(hyps, ref)
        result[name] = {"sentences": len(src), "student": student, "teacher": scores(teacher, ref)}
        result[name]["seconds"] = round(time.time() - t0, 1)
        write_lines(out.with_suffix(f".{name}.es"), hyps)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
