"""Default budgets fit a load of default-parameter beam requests (OPUS-MT asks for beam 4, max_length 512): a request
reserves its source once and max_new_tokens per beam; on CPU 64 of them are admitted together; on CUDA the static rows
come from the memory left after the weights, capped by the settings (no model, no HTTP)."""

from __future__ import annotations

import dataclasses
import time

import pytest

from app.engine.budget import (
    LOGIT_BYTES,
    batch_budget,
    cache_tokens,
    cuda_cache_memory,
    cuda_rows,
    target_positions,
    token_bytes,
)
from app.engine.request import EngineRequest
from app.engine.scheduler import Limits, Scheduler
from app.settings import Settings
from model.network.config import ModelConfig
from model.runner.params import DecodeParams

OPUS = ModelConfig(8000, 8000, d_model=256, n_heads=4, encoder_layers=3, decoder_layers=3, max_positions=512)
GIB = 2**30


def admitted(s: Settings, cuda: bool, memory: int | None = 16 * GIB, texts: int = 64) -> int:
    """How many of `texts` default beam-4 requests (30 source tokens, max_new_tokens 511) start together (float32 on
    CPU, 16-bit on CUDA)."""
    b = batch_budget(s, OPUS, cuda, 2 if cuda else 4, memory)
    sched = Scheduler(Limits(s.max_batch_size, b.rows, b.tokens, s.max_prefill_tokens))
    for _ in range(texts):
        sched.add(EngineRequest(list(range(30)), DecodeParams(beam_size=4, max_new_tokens=511)))
    return len(sched.plan(0, 0, 0).admit)


def test_a_request_reserves_its_source_once_and_its_target_per_beam():
    """Source slots: the source is held once whatever the beam; each beam row holds up to max_new_tokens."""
    greedy = EngineRequest(list(range(30)), DecodeParams(max_new_tokens=100))
    beam4 = EngineRequest(list(range(30)), DecodeParams(beam_size=4, max_new_tokens=511))
    assert (greedy.reserved_tokens, beam4.reserved_tokens) == (130, 30 + 4 * 511)


def test_cpu_admits_64_default_beam_requests_together():
    """Default settings on CPU: one POST of 64 beam-4 texts runs as one batch of 256 rows, not waves of 16; the token
    budget is 64 source slots of max_input_tokens plus 512 rows of max_new_tokens (the model's 512 positions)."""
    assert admitted(Settings(), cuda=False) == 64
    assert admitted(Settings(), cuda=False, texts=100) == 64  # max_batch_size counts requests
    b = batch_budget(Settings(), OPUS, False, 4, 16 * GIB)
    assert (b.rows, b.tokens) == (64 * 8, 64 * 256 + 64 * 8 * 512)
    assert "within 50% of available memory" in b.reason
    short = ModelConfig(8000, 8000, d_model=256, n_heads=4, max_positions=128)  # max_new_tokens within the positions
    assert target_positions(Settings(), short) == 128
    assert batch_budget(Settings(), short, False, 4, 16 * GIB).tokens == 64 * 256 + 512 * 128


def test_cuda_rows_come_from_the_memory_left_and_are_capped_by_the_settings():
    """On CUDA: as many static rows as the memory gpu_memory_utilization leaves after the weights holds, once the
    64 source slots are taken, at most max_batch_size x max_beam_size; tokens are what those buffers hold."""
    assert cuda_cache_memory(free=70 * GIB, total=80 * GIB, utilization=0.9) == 62 * GIB
    assert cuda_cache_memory(free=5 * GIB, total=80 * GIB, utilization=0.9) == 0
    s, tb = Settings(), token_bytes(OPUS, 2)
    per_row = 512 * tb + 8000 * LOGIT_BYTES
    slots = 64 * 256 * tb
    assert cuda_rows(s, OPUS, 2, 62 * GIB)[0] == 512  # plenty: the settings cap
    rows, why = cuda_rows(s, OPUS, 2, slots + 300 * per_row + 5)
    assert rows == 300 and why.startswith("rows that fit")
    assert cuda_rows(s, OPUS, 2, 0)[0] == 1
    b = batch_budget(s, OPUS, True, 2, slots + 300 * per_row)
    assert (b.rows, b.tokens) == (300, cache_tokens(s, OPUS, 300)) and "static buffers" in b.reason
    assert admitted(s, cuda=True, memory=62 * GIB) == 64  # 256 rows: one wave
    assert admitted(s, cuda=True, memory=slots + 100 * per_row) == 25  # memory, not the accounting, splits it


def test_settings_win_and_memory_caps_the_cpu_cache():
    """Set budgets are kept; on CPU the default token budget stays within half the available memory."""
    b = batch_budget(Settings(max_batch_rows=10, max_batch_tokens=999), OPUS, False, 4, 16 * GIB)
    assert (b.rows, b.tokens, b.reason) == (10, 999, "rows as set; tokens as set")
    assert batch_budget(Settings(max_batch_rows=10), OPUS, True, 2, 62 * GIB).rows == 10
    small = 100 * 2**20
    b = batch_budget(Settings(), OPUS, False, 4, small)
    assert b.tokens == small // 2 // token_bytes(OPUS, 4) < 64 * 256 + 64 * 8 * 512
    assert admitted(Settings(), cuda=False, memory=small) == b.tokens // (30 + 4 * 511)
    assert batch_budget(Settings(), OPUS, False, 4, None).tokens == 64 * 256 + 64 * 8 * 512  # memory unknown


def test_64_default_requests_of_a_beam_4_checkpoint_start_in_one_wave(tmp_path):
    """A tiny OPUS-MT (its config asks num_beams 4, max_length 512; 512 positions), the engine core with default
    settings on CPU: 64 requests with no parameters (beam 4, max_new_tokens 511 as /translate resolves them) are all
    admitted by the first round, and the next step runs their 256 beam rows together."""
    pytest.importorskip("transformers")
    from app.engine.build import make_core
    from app.planner import Ask, decode_params
    from bench.harness.fixtures import make_marian
    from model.loading.checkpoint import load
    from tests.app.inprocess import submit

    opus = {"num_beams": 4, "max_length": 512, "bad_words_ids": "pad"}
    ck = load(make_marian(tmp_path / "opus-mt-en-fr", generation=opus, byte_fallback=False, positions=512))
    params = decode_params(Ask("en", "fr"), Settings(), ck)
    assert (params.beam_size, params.max_new_tokens) == (4, 511)
    core = make_core(ck.name, ck.model, Settings())
    texts = [f"the cat {i} sleeps in the big house near the river" for i in range(64)]
    submit(core, ck, texts, 0, **dataclasses.asdict(params))
    time.sleep(core.wait_s() or 0)
    core.run_round()
    assert core.load == (0, 64)
    core.run_round()
    assert core.loop.rows == 256
    assert core.reserved == sum(len(ck.tokenizer.encode(t)) + 4 * 511 for t in texts)
    core.fail_all("done")
