"""`python -m model.calibrate --model DIR --pairs FILE.tsv --out confidence.json`: fit a model's confidence on reference
pairs (a TSV of source, reference[, more references]): each pair decoded greedy (the one-row head) and with beam 4 (the
beam head), scored by sentence chrF (sacrebleu), and a logistic fit of "chrF >= --acceptable" on the features of
`model.confidence`. Serve the file with MT_CONFIDENCE_FILE, or put it beside the weights as confidence.json."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import torch

from model.confidence import BEAM, ONE_ROW, Calibration, Head, dumps, features, source_table
from model.loading.checkpoint import Checkpoint, load
from model.runner.generate import generate
from model.runner.params import DecodeParams
from model.runner.search import Request

ONE_ROW_FIT = tuple(f for f in ONE_ROW if f != "most")  # chosen by the measurements in docs/benchmarks.md
STACK = 10.0  # chrF between the threshold and the two that share its fit's weights
BATCH = 64


@dataclass
class Scored:
    """One decoded pair: its features, its output's text and its sentence chrF against the references."""

    x: dict[str, float]
    text: str
    chrf: float


def read_pairs(path: str | Path) -> list[tuple[str, list[str]]]:
    """(source, references) of a TSV: one pair a line, `#` lines skipped."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        cols = [c.strip() for c in line.split("\t")]
        if line.strip() and not line.startswith("#") and len(cols) >= 2:
            out.append((cols[0], [c for c in cols[1:] if c]))
    return out


@torch.inference_mode()
def decode(ck: Checkpoint, pairs: list[tuple[str, list[str]]], beam: int = 1, pair: tuple[str, str] | None = None,
           max_new_tokens: int = 256) -> list[Scored]:  # fmt: skip
    """Every pair decoded as the server decodes it (greedy with confidence signals, or a beam), scored."""
    try:
        import sacrebleu  # the fit's dependency only (the test extras have it)
    except ImportError:
        raise SystemExit("python -m model.calibrate needs sacrebleu: pip install 'sacrebleu>=2.4'") from None

    prefix = ck.languages.prefix(*(pair or (ck.source_lang, ck.target_lang)))
    starts = source_table(ck.tokenizer.source_pieces(ck.config.src_vocab_size))
    limit = min(max_new_tokens, ck.config.max_positions - 1)
    params = DecodeParams(beam_size=beam, max_new_tokens=limit, confidence=beam == 1, return_scores=beam > 1)
    out = []
    for at in range(0, len(pairs), BATCH):
        chunk = pairs[at : at + BATCH]
        srcs = [prefix + ck.tokenizer.encode(src) for src, _ in chunk]
        hyps = generate(ck.model, [Request(i, s, params) for i, s in enumerate(srcs)])
        for (_, refs), src, (best, *_) in zip(chunk, srcs, hyps, strict=True):
            text = ck.tokenizer.decode(best.tokens)
            out.append(Scored(features(best, params, src, starts), text, sacrebleu.sentence_chrf(text, refs).score))
    return out


def fit_head(rows: list[Scored], names: tuple[str, ...], acceptable: float, weights: list[float] | None = None,
             l2: float = 0.01) -> Head:  # fmt: skip
    """A logistic fit of "chrF >= acceptable" on the standardised features `names` (L2-regularised), its weights
    shared with the fits of the thresholds STACK points on either side (one bias each): the ranking learns from the
    whole range of quality, the bias of `acceptable` calibrates. `weights`: each row's share of the loss."""
    x = torch.tensor([[r.x[f] for f in names] for r in rows], dtype=torch.float64)  # (R, F)
    mean, scale = x.mean(0), x.std(0).clamp_min(1e-6)
    z = (x - mean) / scale
    cuts = [acceptable + d for d in (-STACK, 0.0, STACK)]
    y = torch.tensor([[float(r.chrf >= c) for c in cuts] for r in rows], dtype=torch.float64)  # (R, 3)
    share = torch.tensor(weights or [1.0] * len(rows), dtype=torch.float64)[:, None]
    share = share / share.sum() / len(cuts)
    w = torch.zeros(len(names), dtype=torch.float64, requires_grad=True)
    b = torch.zeros(len(cuts), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=500, line_search_fn="strong_wolfe")

    def loss() -> torch.Tensor:
        opt.zero_grad()
        logits = (z @ w)[:, None] + b  # (R, 3)
        bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, y, reduction="none")
        value = (bce * share).sum() + l2 * (w * w).sum()
        value.backward()
        return value

    with torch.enable_grad():
        opt.step(loss)
    return Head(names, *(tuple(t.tolist()) for t in (mean, scale, w.detach())), float(b[1].item()))


def fit(one_row: list[Scored], beam: list[Scored], acceptable: float = 40.0, fitted_on: str = "",
        weights: list[float] | None = None) -> Calibration:  # fmt: skip
    """A calibration from pairs decoded greedy (`one_row`) and with a beam (`beam`), the same pairs in the same order
    (`weights`: each pair's share of the fit, default equal)."""
    if len({r.chrf >= acceptable for r in one_row}) < 2:
        raise ValueError(f"every pair is on one side of chrF {acceptable}: nothing to fit (add harder pairs)")
    heads = fit_head(one_row, ONE_ROW_FIT, acceptable, weights), fit_head(beam, BEAM, acceptable, weights)
    return Calibration(acceptable, *heads, fitted_on)


def main(argv: list[str] | None = None) -> None:
    """Decode the pairs, fit, write the calibration."""
    p = argparse.ArgumentParser(prog="python -m model.calibrate", description=__doc__)
    p.add_argument("--model", required=True, help="native or Marian directory, or a hub id")
    p.add_argument("--pairs", required=True, help="TSV: source, reference[, more references]")
    p.add_argument("--out", required=True, help="the calibration file to write")
    p.add_argument("--acceptable", type=float, default=40.0, help="the sentence chrF called acceptable")
    p.add_argument("--beam", type=int, default=4, help="the beam the beam head is fitted with")
    p.add_argument("--max-new-tokens", type=int, default=256, help="as the server's default_max_new_tokens")
    p.add_argument("--source", help="source language of a multi-language model")
    p.add_argument("--target", help="target language of a multi-language model")
    args = p.parse_args(argv)
    pair = (args.source, args.target) if args.source and args.target else None
    ck = load(args.model, pair=pair)
    pairs = read_pairs(args.pairs)
    if len(pairs) < 50:
        p.error(f"--pairs: {len(pairs)} pairs; a fit needs at least 50 (a few hundred is better)")
    greedy = decode(ck, pairs, 1, pair, args.max_new_tokens)
    beam = decode(ck, pairs, args.beam, pair, args.max_new_tokens)
    cal = fit(greedy, beam, args.acceptable, Path(args.pairs).name)
    Path(args.out).write_text(dumps(cal), encoding="utf-8")
    share = sum(r.chrf >= args.acceptable for r in greedy) / len(greedy)
    print(f"{args.out}: fitted on {len(pairs)} pairs, {share:.0%} acceptable (greedy chrF >= {args.acceptable:g})")


if __name__ == "__main__":
    main()
