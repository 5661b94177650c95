"""`python -m model translate --model DIR "text" ...`: quick checks without the server."""

from __future__ import annotations

import argparse
import sys
import time

import torch

from model.loading.checkpoint import load
from model.runner.generate import generate
from model.runner.params import DecodeParams
from model.runner.search import Request


def main(argv: list[str] | None = None) -> None:
    """Translate the given texts (or stdin lines) and print one line each."""
    p = argparse.ArgumentParser(prog="python -m model", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("translate", help="translate texts with a checkpoint")
    t.add_argument("--model", required=True, help="native or Marian directory, or a hub id")
    t.add_argument("--beam", type=int, default=1)
    t.add_argument("--n-best", type=int, default=1)
    t.add_argument("--max-new-tokens", type=int, default=256)
    t.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    t.add_argument("--source", help="source language of a multi-language model (NLLB, M2M100, mBART-50)")
    t.add_argument("--target", help="target language of a multi-language or multi-target model")
    t.add_argument("texts", nargs="*", help="texts (default: lines of stdin)")
    args = p.parse_args(argv)
    ck = load(args.model, device=args.device)
    texts = args.texts or [line.rstrip("\n") for line in sys.stdin]
    source, target = args.source or ck.languages.sources[0], args.target or ck.languages.targets[0]
    params = DecodeParams(
        beam_size=max(args.beam, args.n_best),
        num_hypotheses=args.n_best,
        max_new_tokens=args.max_new_tokens,
        forced_bos_id=ck.languages.forced_bos(target),
        forced_eos=ck.defaults.forced_eos,
        bad_words_ids=ck.defaults.bad_words_ids,
    )
    prefix = ck.languages.prefix(source, target)
    t0 = time.perf_counter()
    results = generate(ck.model, [Request(i, prefix + ck.tokenizer.encode(x), params) for i, x in enumerate(texts)])
    for hyps in results:
        print(
            " ||| ".join(ck.tokenizer.decode(h.tokens) for h in hyps)
            if args.n_best > 1
            else ck.tokenizer.decode(hyps[0].tokens)
        )
    print(f"[{ck.name}: {len(texts)} texts in {time.perf_counter() - t0:.2f}s]", file=sys.stderr)


if __name__ == "__main__":
    main()
