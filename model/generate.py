"""Offline generation: the same batch step the server runs, for a fixed list of requests."""

from __future__ import annotations

import torch

from model.batch import DecodeBatch
from model.search import Hypothesis, Request
from model.transformer import Seq2SeqTransformer


@torch.inference_mode()
def generate(model: Seq2SeqTransformer, requests: list[Request]) -> list[list[Hypothesis]]:
    """Decode all requests as one batch until each finishes; n-best per request, in order."""
    results: dict = {}
    batch = DecodeBatch.prefill(model, requests)
    while len(batch):
        batch, outputs = batch.step(model)
        results.update((o.id, o.hypotheses) for o in outputs if o.finished)
    return [results[r.id] for r in requests]
