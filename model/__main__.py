"""`python -m model translate --model DIR "text" ...`: quick checks without the server."""

from __future__ import annotations

import argparse
import sys
import time

import torch

from model.checkpoint import load
from model.generate import generate
from model.params import DecodeParams
from model.search import Request


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
    t.add_argument("texts", nargs="*", help="texts (default: lines of stdin)")
    args = p.parse_args(argv)
    ck = load(args.model, device=args.device)
    texts = args.texts or [line.rstrip("\n") for line in sys.stdin]
    params = DecodeParams(
        beam_size=max(args.beam, args.n_best), num_hypotheses=args.n_best, max_new_tokens=args.max_new_tokens
    )
    t0 = time.perf_counter()
    results = generate(ck.model, [Request(i, ck.tokenizer.encode(x), params) for i, x in enumerate(texts)])
    for hyps in results:
        print(
            " ||| ".join(ck.tokenizer.decode(h.tokens) for h in hyps)
            if args.n_best > 1
            else ck.tokenizer.decode(hyps[0].tokens)
        )
    print(f"[{ck.name}: {len(texts)} texts in {time.perf_counter() - t0:.2f}s]", file=sys.stderr)


if __name__ == "__main__":
    main()
