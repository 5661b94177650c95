"""The static-shape decode step equals the dynamic one: padded rows, fixed buffers and spans change nothing; on a
GPU its CUDA graphs equal the eager step (token for token in float32, within tolerance in half precision)."""

import copy
import warnings
from pathlib import Path

import pytest
import torch

from model.generate import generate
from model.runner.batch import DecodeBatch
from model.runner.eager import Eager
from model.runner.static import StaticDecoder, row_sizes, span_sizes
from model.search import Request
from model.transformer import Seq2SeqTransformer
from tests.model.runner.test_decoding import MIXED, _src, _tokens, continuous

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
# exact comparisons put both sides on one device, in float32; graphs: the static step captured as CUDA graphs
LANES = [
    pytest.param("cpu", False, id="cpu"),
    pytest.param("cuda", False, id="cuda-eager", marks=CUDA),
    pytest.param("cuda", True, id="cuda-graphs", marks=CUDA),
]


def _on(model: Seq2SeqTransformer, device: str, dtype: torch.dtype = torch.float32) -> Seq2SeqTransformer:
    """The model on `device` in `dtype` (itself on the CPU in float32)."""
    return model if device == "cpu" and dtype == torch.float32 else copy.deepcopy(model).to(device, dtype)


def _static(model: Seq2SeqTransformer, graphs: bool, **sizes) -> StaticDecoder:
    """A StaticDecoder, its every (rows, span) captured when `graphs`."""
    static = StaticDecoder(model, **sizes)
    if graphs:
        assert static.capture() == len(static.keys())
    return static


def test_sizes():
    assert row_sizes(256) == [1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 160, 192, 224, 256]
    assert row_sizes(5) == [1, 2, 4, 5] and row_sizes(1) == [1]
    assert span_sizes(512) == [32, 64, 128, 256, 512]
    assert span_sizes(40) == [32, 40] and span_sizes(20) == [20]


def _encoded(model, seed: int, rows: int, length: int):
    """A fresh cache for `rows` random sources of different lengths (at most `length`)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 60, (rows, length), generator=g)
    mask = torch.arange(length)[None, :] < torch.tensor([length - 2 * i for i in range(rows)])[:, None]
    src, mask = src.to(model.device), mask.to(model.device)
    return Eager(model).start_cache(model.encode(src, mask), mask)


def _steps(model, static: StaticDecoder, events: dict, steps: int, seed: int):
    """Run a dynamic and a static cache side by side through `events` (step -> ("take", parents) or ("join", rows)):
    each step's logits within 1e-5 and the same argmax; yields (step, padded cache, dynamic cache) after each."""
    device = static.buffer.device
    dynamic, padded = _encoded(model, 0, 3, 9), _encoded(model, 0, 3, 9)
    g = torch.Generator().manual_seed(seed)
    for step in range(steps):
        kind, arg = events.get(step, (None, None))
        for cache in (dynamic, padded):
            if kind == "take":
                cache.take_(arg)
            elif kind == "join":
                cache.append_(_encoded(model, step, arg, 13))
        tokens = torch.randint(3, 60, (dynamic.rows,), generator=g).to(device)
        want = Eager(model).decode_step(tokens, dynamic)
        got = static.decode_step(tokens, padded)
        torch.testing.assert_close(got, want, atol=1e-5 if device.type == "cpu" else 1e-4, rtol=1e-5)
        assert got.argmax(-1).equal(want.argmax(-1))
        assert padded.row_slots == dynamic.row_slots
        yield step, padded, dynamic


@pytest.mark.parametrize("max_width", [2, 8])
@pytest.mark.parametrize(("device", "graphs"), LANES)
@torch.inference_mode()
def test_static_step_equals_dynamic_step(model, device, graphs, max_width):
    """Step by step, logits within 1e-5 and the same argmax, while rows join, leave, reorder like beams, outgrow the
    row and span sizes and come back (rows padded 3 -> 4 and 5 -> 8, spans 32 -> 40, eager above 8 rows), rows
    share slots (2 or 3 rows per slot: eager above max_width, then blocks of 2), and a row leaves at full capacity
    (40 positions) while padded steps go on."""
    model = _on(model, device)
    static = _static(model, graphs, max_rows=8, max_positions=40, max_source=24, max_width=max_width)
    events = {3: ("take", [1, 1, 0]), 6: ("join", 2), 9: ("take", [4, 0, 3, 2]), 12: ("join", 6)}
    events |= {14: ("take", [8, 7, 6, 1]), 20: ("take", [0, 0, 0, 1]), 25: ("take", [3, 3, 1, 0])}
    events |= {40: ("take", [0, 1, 2])}  # the last row leaves at length 40: padding
    for step, padded, dynamic in _steps(model, static, events, 44, 5):
        assert (padded.k_buf is static.buffer) == (padded.rows <= 8), step
        assert padded.lengths.equal(dynamic.lengths) and padded.max_length == dynamic.max_length
        assert padded.max_length == int(padded.lengths.max())  # the python copies agree with the device
        assert padded.src_len == int(padded.mask_buf[: padded.slots].sum(1).max())


@pytest.mark.parametrize(("device", "graphs"), LANES)
@torch.inference_mode()
def test_static_rows_cover_beams_of_max_slots_requests(model, device, graphs):
    """max_rows = 3 requests x 4 beams over 3 source slots (padded to 4): beam rows of every request run padded in
    the buffers, rows reorder within and across slots; 5 slots run eagerly and move back in once they fit again."""
    model = _on(model, device)
    static = _static(model, graphs, max_rows=12, max_positions=24, max_source=16, max_width=4, max_slots=3)
    assert static.slots == 4 and static.home.ck_buf.shape[1] == 4 and static.home.k_buf.shape[1] == 12
    assert len(static.keys()) == (3 + 5) * len(static.spans)  # width 1 up to 4 rows; width 4 at every row size
    events = {1: ("take", [0] * 4 + [1] * 4 + [2] * 4), 4: ("take", [1, 0, 0, 3, 4, 4, 6, 7, 11, 8, 9, 10])}
    events |= {7: ("take", [0, 1, 4, 5]), 9: ("join", 3), 12: ("take", [0, 2, 4, 5]), 15: ("take", [3, 3, 3, 2])}
    for step, padded, _ in _steps(model, static, events, 20, 7):
        held = padded.k_buf is static.buffer and padded.ck_buf is static.home.ck_buf
        assert held == (padded.slots <= 4), step


@pytest.mark.parametrize(("device", "graphs"), LANES)
def test_static_decoding_equals_dynamic_decoding(model, device, graphs):
    """Greedy, beams, sampling and penalties under continuous batching: the same tokens and scores."""
    model = _on(model, device)
    requests = [Request(i, _src(i), MIXED[i % len(MIXED)]) for i in range(12)]
    want = continuous(model, requests)
    got = continuous(_static(model, graphs, max_rows=16, max_positions=20, max_source=16), requests)
    assert want.keys() == got.keys()
    for rid, hyps in want.items():
        assert _tokens(got[rid]) == _tokens(hyps), rid
        assert [h.score for h in got[rid]] == pytest.approx([h.score for h in hyps], abs=1e-4)


def test_two_batches_do_not_share_the_static_buffers(model):
    """While one batch holds the buffers, another decoding with the same decoder runs eagerly; both stay exact."""
    static = StaticDecoder(model, max_rows=8, max_positions=20, max_source=16)
    first = [Request(i, _src(i), MIXED[i]) for i in range(3)]
    second = [Request(i, _src(10 + i), MIXED[3 + i]) for i in range(3)]
    batches = {"a": DecodeBatch.prefill(static, first), "b": DecodeBatch.prefill(static, second)}
    results = {}
    with torch.inference_mode():
        while any(len(batch) for batch in batches.values()):
            for name, batch in list(batches.items()):
                if len(batch):
                    batches[name], outputs = batch.step(static)
                    results.update(((name, o.id), o.hypotheses) for o in outputs if o.finished)
    assert batches["a"].cache.k_buf is static.buffer and batches["b"].cache.k_buf is not static.buffer
    for name, requests in (("a", first), ("b", second)):
        for req, hyps in zip(requests, generate(model, requests), strict=True):
            assert _tokens(results[(name, req.id)]) == _tokens(hyps)


@CUDA
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@torch.inference_mode()
def test_graph_step_is_close_to_the_eager_step_in_half_precision(model, dtype):
    """Teacher-forced steps of rows at different positions: the graphs' logits within 2% (of the largest logit) of
    the eager static step's and of the dynamic step's."""
    model = _on(model, "cuda", dtype)
    sizes = {"max_rows": 8, "max_positions": 40, "max_source": 24}
    graphed, eager = _static(model, True, **sizes), _static(model, False, **sizes)
    caches = [_encoded(model, 0, 5, 9) for _ in range(3)]
    for cache in caches:
        cache.append_(_encoded(model, 1, 2, 13))
    g = torch.Generator().manual_seed(3)
    for _ in range(20):
        tokens = torch.randint(3, 60, (7,), generator=g).cuda()
        want = Eager(model).decode_step(tokens, caches[0]).float()
        for runner, cache in ((graphed, caches[1]), (eager, caches[2])):
            got = runner.decode_step(tokens, cache).float()
            assert (got - want).abs().max() <= 0.02 * want.abs().max()


@CUDA
def test_a_graphed_step_synchronises_once(model):
    """Greedy, beams, sampling and penalties, rows leaving: each step waits for the device once (its one copy to the
    host), as torch's sync debug mode counts."""
    static = _static(_on(model, "cuda"), True, max_rows=16, max_positions=20, max_source=16)
    batch = DecodeBatch.prefill(static, [Request(i, _src(i), p) for i, p in enumerate(MIXED)])
    steps = []
    with torch.inference_mode():
        while len(batch):
            torch.cuda.set_sync_debug_mode("warn")
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    batch, _ = batch.step(static)
            finally:
                torch.cuda.set_sync_debug_mode("default")
            steps.append([f"{Path(w.filename).name}:{w.lineno}" for w in caught if "synchroniz" in str(w.message)])
    assert all(len(where) == 1 for where in steps), steps  # where each step waited
