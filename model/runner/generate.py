"""Offline generation: the server's decode loop, for a fixed list of requests."""

from __future__ import annotations

import torch

from model.runner import Runner
from model.runner.constraints import Words
from model.runner.loop import DecodeLoop
from model.runner.search import Hypothesis, Request


@torch.inference_mode()
def generate(
    model: Runner, requests: list[Request], overlap: bool = False, words: Words | None = None
) -> list[list[Hypothesis]]:
    """Decode all requests as one batch until each finishes; n-best per request, in order. With `overlap`, one step
    is kept in flight: the same results, the host's bookkeeping hidden behind the device. `words`: the vocabulary's
    word starts, for glossary constraints (terms kept whole words)."""
    results: dict = {}
    loop = DecodeLoop(model, overlap, words)
    loop.join(loop.prefill(requests))
    while loop:
        results.update((o.id, o.hypotheses) for o in loop.step() if o.finished)
    return [results[r.id] for r in requests]
