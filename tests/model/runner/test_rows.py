"""The batch's per-row constants (model.runner.rows) stay in step with its rows: requests whose temperatures, top-k,
top-p, beam sizes, length penalties and minimum lengths all differ join and leave a running batch and each one's result
equals the request decoded alone, sequential and overlapped; a step whose rows stay uploads nothing."""

from __future__ import annotations

import dataclasses
import sys

import pytest
import torch

import model.runner.transfer as transfer_module
from model.runner.generate import generate
from model.runner.loop import DecodeLoop
from model.runner.params import DecodeParams
from model.runner.search import Request
from tests.model.runner.test_decoding import _src, _tokens
from tests.model.runner.test_overlap import drive

# every constant differs from row to row: a table out of step with the rows would give some request another's
PARAMS = [
    DecodeParams(sampling=True, seed=1, temperature=0.7, top_k=5, max_new_tokens=14),
    DecodeParams(beam_size=2, length_penalty=0.5, max_new_tokens=9, min_new_tokens=3),
    DecodeParams(sampling=True, seed=2, temperature=1.3, top_p=0.8, max_new_tokens=11, return_scores=False),
    DecodeParams(beam_size=4, num_hypotheses=2, length_penalty=1.5, max_new_tokens=13),
    DecodeParams(min_new_tokens=6, max_new_tokens=10, repetition_penalty=1.4),
    DecodeParams(beam_size=3, length_penalty=2.0, early_stopping=True, max_new_tokens=8, no_repeat_ngram_size=2),
    DecodeParams(sampling=True, seed=3, temperature=0.5, top_k=20, top_p=0.9, max_new_tokens=12, min_new_tokens=4),
    DecodeParams(beam_size=2, length_penalty=1.0, max_new_tokens=15, forced_bos_id=7, forced_eos=True),
    DecodeParams(max_new_tokens=7, no_repeat_ngram_size=3, bad_words_ids=((5,), (7, 9))),
]


def test_rows_joining_and_leaving_keep_their_own_constants(model):
    """Requests join every other round; twice one leaves (aborted) as others of as many rows in all join, so the
    batch keeps its row count with other constants: every result equals the request alone, sequential and
    overlapped."""
    requests = [Request(i, _src(i + 20), PARAMS[i % len(PARAMS)]) for i in range(14)]
    alone = {r.id: generate(model, [r])[0] for r in requests}
    joins = {0: [0, 1, 2, 3], 2: [4, 6], 4: [5, 7, 8], 6: [9, 10], 8: [11, 12, 13]}  # 1 (2 beams): 4 and 6 (1 row each)
    schedule = {k: [("join", [requests[i] for i in ids])] for k, ids in joins.items()}
    schedule[2].insert(0, ("abort", [1]))
    schedule[6].insert(0, ("abort", [5]))  # 3 beams: 9 (1 row) and 10 (2 beams)
    for overlap in (False, True):
        run = drive(model, schedule, overlap)
        assert set(run.results) == {r.id for r in requests} - {1, 5}
        for i, hyps in run.results.items():
            assert _tokens(hyps) == _tokens(alone[i]), (overlap, i)
            assert [h.score for h in hyps] == pytest.approx([h.score for h in alone[i]], abs=1e-4)


def _count_uploads(monkeypatch) -> list:
    """Every host-to-device upload of the decode runtime, counted: `upload` patched wherever a module of
    model.runner holds it (a module that imports it later is covered without naming it here)."""
    uploads, upload = [], transfer_module.upload
    counting = lambda *args: uploads.append(args) or upload(*args)  # noqa: E731
    for name, module in list(sys.modules.items()):
        if name.startswith("model.runner") and getattr(module, "upload", None) is upload:
            monkeypatch.setattr(module, "upload", counting)
    return uploads


@pytest.mark.parametrize("overlap", [False, True])
def test_a_step_whose_rows_stay_uploads_nothing(model, monkeypatch, overlap):
    """Greedy, sampled, penalised and beam rows in one batch: a step that builds no row table and after which the
    same requests go on with the same widths makes no upload; while none can end (a minimum length), every step but
    the first is such."""
    uploads = _count_uploads(monkeypatch)
    forced = [p for p in PARAMS if p.forced_bos_id is None and not p.forced_eos]  # a forced token is an upload
    params = [dataclasses.replace(p, min_new_tokens=16, max_new_tokens=20) for p in forced]  # long together
    loop = DecodeLoop(model, overlap)
    quiet, steps = 0, 0
    with torch.inference_mode():
        loop.join(loop.prefill([Request(i, _src(i), p) for i, p in enumerate(params)]))
        while loop:
            state = loop.state
            table = None if state.stale else state.table
            uploads[:] = []
            loop.step()
            steps += 1
            if table is not None and loop.state is state and not state.stale and state.table is table:
                assert uploads == [], steps
                quiet += 1
    assert quiet >= 14 and steps == 20 + overlap  # overlapped: one more round books the last step


def test_the_upload_counter_sees_every_runtime_upload(model, monkeypatch):
    """The counter is no decoration: a join, which uploads the new rows' columns, is seen."""
    uploads = _count_uploads(monkeypatch)
    loop = DecodeLoop(model)
    with torch.inference_mode():
        loop.join(loop.prefill([Request(0, _src(0), PARAMS[1])]))
    assert uploads
