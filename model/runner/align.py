"""Each output token's place in its source: the decoder's alignment (`ModelConfig.alignment`) recomputed over finished
outputs in one teacher-forced pass, for what is put back by position (markup around the words it enclosed)."""

from __future__ import annotations

import torch

from model.runner import Runner
from model.runner.loop import pad_batch


@torch.inference_mode()
def alignments(runner: Runner, pairs: list[tuple[list[int], list[int]]]) -> list[list[int]]:
    """For each (source ids, output ids, EOS excluded): the source position each output token aligns to, the argmax of
    the alignment while the decoder predicted it."""
    cfg, device = runner.cfg, runner.device
    src, src_mask = pad_batch([s for s, _ in pairs], cfg.pad_id, device)
    tgt, _ = pad_batch([[cfg.decoder_start_id, *t] for _, t in pairs], cfg.pad_id, device)  # (B, T + 1)
    probs = runner.cross_attention(runner.encode(src, src_mask), src_mask, tgt)  # (B, T + 1, S)
    at = probs.argmax(-1).tolist()
    return [row[: len(out)] for row, (_, out) in zip(at, pairs, strict=True)]
