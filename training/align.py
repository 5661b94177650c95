"""Which decoder layer's cross-attention (and which heads) aligns best (`ModelConfig.align_layer`/`align_heads`,
read to place glossary terms and inline tags): over the greedy translations of the Handbook dev sentences, each
output word linked to a source word by the dictionary (FreeDict and the one-word catalog messages; both words once
in their sentence) counts as right when the attention that predicts its first token has its argmax on one of the
source word's tokens. Prints the accuracy of every layer (heads averaged) and of every single head.

    python -m training.align --model model/builtin/en-es [--limit 500]
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import torch

from model.loading.checkpoint import load
from model.loading.tokenizer import SPIECE_UNDERLINE
from training.common import WORK, read_lines
from training.evaluate import translate

WORD = re.compile(r"\w+")


def lexicon() -> set[tuple[str, str]]:
    """(English, Spanish) one-word pairs, lowercase: FreeDict's first senses and the one-word catalog messages."""
    pairs = set()
    for name in ("dictionary", "catalogs"):
        for en, es in zip(read_lines(WORK / f"{name}.en"), read_lines(WORK / f"{name}.es"), strict=True):
            if WORD.fullmatch(en) and WORD.fullmatch(es):
                pairs.add((en.lower(), es.lower()))
    return pairs


def word_tokens(pieces: list[str]) -> list[tuple[str, list[int]]]:
    """(word, its token indices) for the words of a piece sequence (a word starts at a piece with '▁')."""
    words: list[tuple[str, list[int]]] = []
    for i, piece in enumerate(pieces):
        if piece.startswith(SPIECE_UNDERLINE) or not words:
            words.append((piece.lstrip(SPIECE_UNDERLINE), [i]))
        else:
            words[-1] = (words[-1][0] + piece, words[-1][1] + [i])
    return [(WORD.search(w).group().lower(), ids) for w, ids in words if WORD.search(w)]


def links(src: list[tuple[str, list[int]]], out: list[tuple[str, list[int]]], pairs: set) -> list[tuple[list, int]]:
    """(source token indices, first output token index) of each dictionary link between words seen once."""
    src_once = {w: ids for w, ids in src if sum(v == w for v, _ in src) == 1}
    out_once = {w: ids for w, ids in out if sum(v == w for v, _ in out) == 1}
    return [(src_once[a], out_once[b][0]) for a in src_once for b in out_once if (a, b) in pairs]


def main() -> None:
    """Translate, link, and score every layer and head."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", type=Path, default=Path("model/builtin/en-es"))
    p.add_argument("--limit", type=int, default=500)
    p.add_argument("--source", default="en", help="en: English dev -> Spanish; es: Spanish dev -> English")
    args = p.parse_args()
    torch.set_grad_enabled(False)
    ck = load(args.model)
    model, tok, cfg = ck.model, ck.tokenizer, ck.model.cfg
    target = "es" if args.source == "en" else "en"
    pairs = lexicon() if args.source == "en" else {(b, a) for a, b in lexicon()}
    lines = read_lines(WORK / f"dev.{args.source}")[: args.limit]
    prefix = ck.languages.prefix(args.source, target)
    outs = translate(model, tok, lines, 1, prefix=prefix)
    heads = [(layer, tuple(range(cfg.n_heads))) for layer in range(cfg.decoder_layers)]
    heads += [(layer, (h,)) for layer in range(cfg.decoder_layers) for h in range(cfg.n_heads)]
    right, total = dict.fromkeys(heads, 0), 0
    for line, out in zip(lines, outs, strict=True):
        src_ids = prefix + tok.encode(line)
        out_ids = tok.target.encode(out)
        src_pieces = [""] * len(prefix) + tok.source.encode(line, out_type=str)
        found = links(word_tokens(src_pieces), word_tokens(tok.target.encode(out, out_type=str)), pairs)
        if not found:
            continue
        total += len(found)
        src = torch.tensor([src_ids])
        mask = torch.ones_like(src, dtype=torch.bool)
        memory = model.encode(src, mask)
        tgt_in = torch.tensor([[cfg.decoder_start_id] + out_ids])
        for align in heads:
            att = model.cross_attention(memory, mask, tgt_in, align)[0]  # (T, S)
            right[align] += sum(int(att[k].argmax()) in ids for ids, k in found)
    print(f"{total} dictionary-linked word pairs in {len(lines)} sentences ({args.source}->{target})")
    for (layer, hs), n in sorted(right.items(), key=lambda kv: -kv[1]):
        label = "heads averaged" if len(hs) > 1 else f"head {hs[0]}"
        print(f"layer {layer} {label:15s} {100 * n / max(total, 1):5.1f}%")


if __name__ == "__main__":
    main()
