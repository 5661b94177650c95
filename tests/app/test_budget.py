"""Default budgets fit a load of default-parameter beam requests (OPUS-MT asks for beam 4, max_length 512): on CPU
they are admitted together; on CUDA rows stay within what the static buffers hold (no model, no HTTP)."""

from __future__ import annotations

from app.engine.budget import batch_budget, row_tokens, token_bytes
from app.engine.request import EngineRequest
from app.engine.scheduler import Limits, Scheduler
from app.settings import Settings
from model.config import ModelConfig
from model.params import DecodeParams

OPUS = ModelConfig(8000, 8000, d_model=256, n_heads=4, encoder_layers=3, decoder_layers=3, max_positions=512)
GIB = 2**30


def admitted(s: Settings, cuda: bool, memory: int | None = 16 * GIB, texts: int = 64) -> int:
    """How many of `texts` default beam-4 requests (30 source tokens, max_new_tokens 512) start together."""
    b = batch_budget(s, OPUS, cuda, 4, memory)
    sched = Scheduler(Limits(s.max_batch_size, b.rows, b.tokens, s.max_prefill_tokens))
    for _ in range(texts):
        sched.add(EngineRequest(list(range(30)), DecodeParams(beam_size=4, max_new_tokens=512)))
    return len(sched.plan(0, 0, 0).admit)


def test_cpu_admits_64_default_beam_requests_together():
    """Default settings on CPU: one POST of 64 beam-4 texts runs as one batch of 256 rows, not waves of 16."""
    assert admitted(Settings(), cuda=False) == 64
    assert admitted(Settings(), cuda=False, texts=100) == 64  # max_batch_size counts requests
    b = batch_budget(Settings(), OPUS, False, 4, 16 * GIB)
    assert (b.rows, b.tokens) == (64 * 8, 64 * 8 * (256 + 512))  # max_beam_size 8: any 64 requests fit


def test_cuda_rows_stay_within_the_static_buffers():
    """On CUDA the row budget is what StaticDecoder allocates, max(max_batch_size, max_beam_size), and the token budget
    what those rows hold: it never splits a batch the buffers could run."""
    b = batch_budget(Settings(), OPUS, True, 2, None)
    assert (b.rows, b.tokens) == (64, 64 * row_tokens(Settings(), OPUS))
    assert admitted(Settings(), cuda=True) == 16
    assert admitted(Settings(max_batch_rows=256), cuda=True) == 64


def test_settings_win_and_memory_caps_the_cpu_cache():
    """Set budgets are kept; on CPU the default token budget stays within half the available memory."""
    b = batch_budget(Settings(max_batch_rows=10, max_batch_tokens=999), OPUS, False, 4, 16 * GIB)
    assert (b.rows, b.tokens, b.reason) == (10, 999, "as set")
    small = 100 * 2**20
    b = batch_budget(Settings(), OPUS, False, 4, small)
    assert b.tokens == small // 2 // token_bytes(OPUS, 4) < 64 * 8 * (256 + 512)
    assert admitted(Settings(), cuda=False, memory=small) == b.tokens // (4 * (30 + 512))
    assert batch_budget(Settings(), OPUS, False, 4, None).tokens == 64 * 8 * (256 + 512)  # memory unknown
