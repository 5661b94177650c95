"""Score a checkpoint against the held-out human pairs, side by side with the Apertium teacher."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import sacrebleu
import torch

from model.checkpoint import load
from model.generate import generate
from model.params import DecodeParams
from model.search import Request

WORK = Path("training/work")


def translate(model_dir: Path, lines: list[str], beam: int, batch: int = 64) -> list[str]:
    """Translate lines with the project's own decoder, in length-sorted batches."""
    ck = load(model_dir)
    order = sorted(range(len(lines)), key=lambda i: len(lines[i]))
    out = [""] * len(lines)
    params = DecodeParams(beam_size=beam, max_new_tokens=200)
    for start in range(0, len(order), batch):
        idx = order[start : start + batch]
        reqs = [Request(i, ck.tokenizer.encode(lines[i])[:250], params) for i in idx]
        for i, hyps in zip(idx, generate(ck.model, reqs), strict=True):
            out[i] = ck.tokenizer.decode(hyps[0].tokens)
    return out


def scores(hyps: list[str], refs: list[str]) -> dict[str, float]:
    """Corpus BLEU and chrF."""
    return {
        "bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2),
        "chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2),
    }


def main() -> None:
    """Print and save the student's and the teacher's scores on the same sentences."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", type=Path, default=Path("model/builtin/en-es"))
    p.add_argument("--limit", type=int, default=0, help="first N test sentences (0 = all)")
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--out", type=Path, default=WORK / "student_scores.json")
    args = p.parse_args()
    torch.set_grad_enabled(False)
    src = (WORK / "test.en").read_text(encoding="utf-8").splitlines()
    ref = (WORK / "test.es").read_text(encoding="utf-8").splitlines()
    teacher = (WORK / "test.apertium.es").read_text(encoding="utf-8").splitlines()
    n = args.limit or len(src)
    src, ref, teacher = src[:n], ref[:n], teacher[:n]
    t0 = time.time()
    hyps = translate(args.model, src, args.beam)
    result = {
        "sentences": n,
        "beam": args.beam,
        "student": scores(hyps, ref),
        "teacher": scores(teacher, ref),
        "seconds": round(time.time() - t0, 1),
    }
    result["chrf_ratio"] = round(result["student"]["chrf"] / result["teacher"]["chrf"], 3)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    (args.out.with_suffix(".hyp.es")).write_text("\n".join(hyps) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
