"""Offline generation: the same batch step the server runs, for a fixed list of requests."""

from __future__ import annotations

import torch

from model.batch import DecodeBatch
from model.search import Hypothesis, Request
from model.transformer import Seq2SeqTransformer


@torch.inference_mode()
def generate(model: Seq2SeqTransformer, requests: list[Request], overlap: bool = False) -> list[list[Hypothesis]]:
    """Decode all requests as one batch until each finishes; n-best per request, in order. With `overlap`, one step
    is kept in flight (`DecodeBatch.step_ahead`): the same results, the host's bookkeeping hidden behind the device."""
    results: dict = {}
    batch, pending = DecodeBatch.prefill(model, requests), None
    while len(batch):
        batch, outputs, pending = batch.round(model, pending, overlap)
        results.update((o.id, o.hypotheses) for o in outputs if o.finished)
    return [results[r.id] for r in requests]
