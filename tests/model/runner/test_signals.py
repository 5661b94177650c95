"""The confidence signals the decode step records: equal to a teacher-forced pass over the output (catches a signal
read from another row, or from scores of another step), the same in a batch as alone and with overlap as without
(catches signals that depend on the neighbours or on the step in flight), and they never change what is decoded
(catches a choice made from the signals' tensors)."""

import dataclasses
import math

import pytest
import torch

from model.runner.eager import Eager
from model.runner.generate import generate
from model.runner.loop import pad_batch
from model.runner.search import Hypothesis, Request
from tests.model.runner.test_decoding import MIXED, _src, _tokens

CONFIDENT = [dataclasses.replace(p, confidence=True) for p in MIXED]


def _signals(h: Hypothesis) -> list[float]:
    s = h.signals
    return [s.count, s.logprob, s.least, s.entropy, s.most]


def test_signals_equal_a_teacher_forced_pass(model):
    """Greedy rows: each token's log-probability and entropy, as the full decoder computes them over the
    scores the choice ranks (the pad token banned, as the step's processing does)."""
    params = dataclasses.replace(CONFIDENT[0], max_new_tokens=16)
    requests = [Request(i, _src(i), params) for i in range(6)]
    hyps = [h[0] for h in generate(model, requests)]
    cfg = model.cfg
    runner = Eager(model)
    with torch.inference_mode():
        for req, h in zip(requests, hyps, strict=True):
            out = h.tokens + ([cfg.eos_id] if h.finish_reason == "eos" else [])
            src, mask = pad_batch([req.src], cfg.pad_id, runner.device)
            tgt = torch.tensor([[cfg.decoder_start_id, *out[:-1]]])
            logits = runner.decode(runner.encode(src, mask), mask, tgt)[0].float()  # (T, V)
            lp = logits.index_fill(1, torch.tensor([cfg.pad_id]), float("-inf")).log_softmax(-1)
            chosen = lp.gather(1, torch.tensor(out)[:, None])[:, 0]
            entropy = torch.special.entr(lp.exp()).sum(-1)
            want = [len(out), chosen.sum().item(), chosen.min().item(), entropy.sum().item(), entropy.max().item()]
            assert _signals(h) == pytest.approx(want, abs=1e-3)


@pytest.mark.parametrize("overlap", [False, True])
def test_signals_batched_equal_alone_and_decode_nothing_else(model, overlap):
    requests = [Request(i, _src(i), p) for i, p in enumerate(CONFIDENT)]
    together = generate(model, requests, overlap)
    plain = generate(model, [dataclasses.replace(r, params=MIXED[r.id]) for r in requests], overlap)
    for req, hyps, before in zip(requests, together, plain, strict=True):
        assert _tokens(hyps) == _tokens(before)  # confidence on: the same outputs, the same scores
        assert [h.score for h in hyps] == [h.score for h in before]
        assert before[0].signals is None
        if req.params.beam_size > 1:  # a beam's output is rated by its score
            assert hyps[0].signals is None
            continue
        assert all(math.isfinite(v) for v in _signals(hyps[0]))
        if not overlap:
            alone = generate(model, [req])[0]
            assert _tokens(alone) == _tokens(hyps)
            assert _signals(alone[0]) == pytest.approx(_signals(hyps[0]), abs=1e-4)
        else:
            assert _signals(hyps[0]) == pytest.approx(_signals(generate(model, [req], overlap=False)[0][0]), abs=1e-4)
