"""Tokenized parallel data and length-bucketed batches for training."""

from __future__ import annotations

import random
from pathlib import Path

import sentencepiece as spm
import torch


def split_code(line: str) -> tuple[str, str]:
    """A leading `>>xx<< ` target-language code and the text after it ("" and the line when it has none)."""
    if line.startswith(">>") and (end := line.find("<< ")) != -1:
        return line[2:end], line[end + 3 :]
    return "", line


def encode_corpus(
    src: Path, tgt: Path, spm_path: Path, cache: Path, max_len: int = 128, codes: dict[str, int] | None = None
) -> list[tuple[list[int], list[int]]]:
    """Encode a parallel corpus with the shared SentencePiece model (cached as a .pt file). With `codes`, a source
    line's leading `>>xx<< ` becomes the token id `codes[xx]` before its pieces (as the server prepends it)."""
    if cache.exists():
        return torch.load(cache)
    sp = spm.SentencePieceProcessor(model_file=str(spm_path))
    en = src.read_text(encoding="utf-8").splitlines()
    es = tgt.read_text(encoding="utf-8").splitlines()
    split = [split_code(line) if codes else ("", line) for line in en]
    prefix = [[codes[c]] if c else [] for c, _ in split] if codes else [[] for _ in split]
    pairs = [
        (p + a, b)
        for p, a, b in zip(prefix, sp.encode([t for _, t in split]), sp.encode(es), strict=True)
        if 0 < len(a) < max_len and 0 < len(b) < max_len
    ]
    torch.save(pairs, cache)
    return pairs


def make_batches(pairs: list[tuple[list[int], list[int]]], max_tokens: int, seed: int) -> list[list[int]]:
    """Indices grouped by similar length so that each batch holds about `max_tokens` target tokens."""
    rng = random.Random(seed)
    order = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][1]) + rng.random(), len(pairs[i][0])))
    batches, current, longest = [], [], 0
    for i in order:
        longest_next = max(longest, len(pairs[i][1]) + 1, len(pairs[i][0]) + 1)
        if current and longest_next * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, longest_next = [], max(len(pairs[i][1]), len(pairs[i][0])) + 1
        current.append(i)
        longest = longest_next
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches


def collate(
    pairs: list[tuple[list[int], list[int]]], pad: int, eos: int, start: int, device: str = "cpu"
) -> dict[str, torch.Tensor]:
    """src + EOS, decoder input (start + tgt) and labels (tgt + EOS, padding = -100), on `device`."""
    b = len(pairs)
    s = max(len(p[0]) for p in pairs) + 1
    t = max(len(p[1]) for p in pairs) + 1
    src = torch.full((b, s), pad, dtype=torch.long)
    tgt_in = torch.full((b, t), pad, dtype=torch.long)
    labels = torch.full((b, t), -100, dtype=torch.long)
    for i, (a, y) in enumerate(pairs):
        src[i, : len(a) + 1] = torch.tensor(a + [eos])
        tgt_in[i, : len(y) + 1] = torch.tensor([start] + y)
        labels[i, : len(y) + 1] = torch.tensor(y + [eos])
    src, tgt_in, labels = src.to(device), tgt_in.to(device), labels.to(device)
    return {"src": src, "src_mask": src != pad, "tgt_in": tgt_in, "labels": labels}
