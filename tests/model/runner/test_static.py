"""The static-shape decode step equals the dynamic one: padded rows, fixed buffers and spans change nothing; on a
GPU its CUDA graphs equal the eager step (token for token in float32, within tolerance in half precision)."""

import copy
import warnings
from pathlib import Path

import pytest
import torch

from model.network.transformer import Seq2SeqTransformer
from model.runner.eager import Eager
from model.runner.generate import generate
from model.runner.loop import DecodeLoop
from model.runner.params import DecodeParams
from model.runner.search import Request
from model.runner.state import DecodeState, Encoded
from model.runner.static import StaticDecoder, row_sizes, span_sizes
from model.runner.transfer import Readback
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


def _join(runner, state: DecodeState | None, seed: int, widths: list[int], length: int) -> DecodeState:
    """Requests of `widths` rows (beams) for random sources of different lengths (at most `length`) joined to
    `state` (a new one from the runner's pool when None)."""
    g = torch.Generator().manual_seed(seed)
    n = len(widths)
    src = torch.randint(3, 60, (n, length), generator=g).to(runner.device)
    mask = (torch.arange(length)[None, :] < torch.tensor([length - 2 * i for i in range(n)])[:, None]).to(src.device)
    ck, cv = runner.cross_kv(runner.encode(src, mask))
    state = state or DecodeState(runner.pool(ck), runner.cfg)
    requests = [Request((seed, i), [], DecodeParams(beam_size=w)) for i, w in enumerate(widths)]
    state.add(Encoded(requests, ck, cv, mask))
    return state


def _steps(model, static: StaticDecoder, events: dict, steps: int, seed: int):
    """An eager and a static state side by side through `events` (step -> ("join", widths), ("keep", seq indices),
    ("shorter", positions) or ("reorder", parents within the requests)): each step's logits within 1e-5 and the
    same argmax; yields (step, static state) after each."""
    eager = Eager(model)
    states = [_join(eager, None, 0, [1, 1, 1], 9), _join(static, None, 0, [1, 1, 1], 9)]
    g = torch.Generator().manual_seed(seed)
    for step in range(steps):
        kind, arg = events.get(step, (None, None))
        for i, (runner, state) in enumerate(zip((eager, static), states, strict=True)):
            if kind == "join":
                states[i] = _join(runner, state, step, arg, 13)
            elif kind == "keep":
                state.narrow([(state.seqs[j], state.seqs[j].width) for j in arg])
            elif kind == "shorter":  # the rows that have written `arg` positions leave
                state.narrow([(s, s.width) for s in state.seqs if s.steps < arg])
            elif kind == "reorder":
                moved = [r for r, p in enumerate(arg) if p != r]
                at = torch.tensor([moved, [arg[r] for r in moved]], device=model.device)
                state.prepare()
                state.pool.reorder(at[0], at[1], state.max_length)
        tokens = torch.randint(3, 60, (states[0].rows,), generator=g).to(model.device)
        want, got = (_teacher_step(r, state, tokens) for r, state in zip((eager, static), states, strict=True))
        torch.testing.assert_close(got, want, atol=1e-5 if model.device.type == "cpu" else 1e-4, rtol=1e-5)
        assert got.argmax(-1).equal(want.argmax(-1))
        assert states[1].row_slots == states[0].row_slots
        yield step, states[1]


def _teacher_step(runner, state: DecodeState, tokens: torch.Tensor) -> torch.Tensor:
    """One step of `state`'s rows with the given inputs: logits (N, V)."""
    state.prepare()
    state.tokens = tokens
    logits = runner.step_logits(state).clone()
    state.count_step()
    return logits


@pytest.mark.parametrize("max_width", [2, 8])
@pytest.mark.parametrize(("device", "graphs"), LANES)
@torch.inference_mode()
def test_static_step_equals_eager_step(model, device, graphs, max_width):
    """Step by step, logits within 1e-5 and the same argmax, while requests join (one row or beams of 2 and 3 rows
    that reorder on the device), leave (rows and slots move in place) and outgrow the span sizes (rows padded 3 -> 4
    and 7 -> 8, spans 32 -> 40; rows share slots: eager above max_width), a row leaves at full capacity while padded
    steps go on, and a join past the 8 rows grows the pool: eager from then on."""
    model = _on(model, device)
    static = _static(model, graphs, max_rows=8, max_positions=40, max_source=24, max_width=max_width)
    events = {3: ("keep", [0, 2]), 6: ("join", [2, 1]), 8: ("reorder", [0, 1, 3, 2]), 12: ("join", [3])}
    events |= {14: ("reorder", [0, 1, 2, 3, 4, 6, 6, 5]), 20: ("keep", [0, 1, 3]), 25: ("keep", [2, 1])}
    events |= {30: ("join", [1, 1]), 40: ("shorter", 40), 41: ("join", [3, 3])}  # full rows leave; 9 rows
    for step, state in _steps(model, static, events, 44, 5):
        held = state.pool.k is static.home.k
        assert held == (step < 41), step
        assert state.pool.positions[: state.rows].tolist() == state.row_steps()  # host and device agree
        padded = (state.layout is None or state.layout.width <= max_width) and state.max_length + 1 <= 40
        assert (static._key(state) is not None) == (held and padded), step
        assert state.max_length == 40 or step != 39


@pytest.mark.parametrize(("device", "graphs"), LANES)
@torch.inference_mode()
def test_static_rows_cover_beams_of_max_slots_requests(model, device, graphs):
    """max_rows = 3 requests x 4 beams over 3 source slots (padded to 4): beam rows of every request run padded in
    the buffers, reordering within their slots; a fifth slot grows the pool and runs eagerly."""
    model = _on(model, device)
    static = _static(model, graphs, max_rows=12, max_positions=24, max_source=16, max_width=4, max_slots=3)
    assert static.slots == 4 and static.home.ck.shape[1] == 4 and static.home.k.shape[1] == 12
    assert len(static.keys()) == (3 + 5) * len(static.spans)  # width 1 up to 4 rows; width 4 at every row size
    events = {1: ("keep", [0]), 2: ("join", [4, 4]), 4: ("reorder", [0, 2, 1, 1, 4, 8, 7, 5, 5])}
    events |= {7: ("keep", [1, 2]), 9: ("join", [4]), 12: ("join", [1, 1])}  # 12 rows in 3 slots; then 5 slots
    for step, state in _steps(model, static, events, 16, 7):
        assert (static._key(state) is not None) == (step < 12) and (state.rows == 12) == (9 <= step < 12), step


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
    """While one batch holds the buffers, another decoding with the same decoder runs eagerly; both stay exact, and
    once the first is done the buffers go to the next batch."""
    static = StaticDecoder(model, max_rows=8, max_positions=20, max_source=16)
    first = [Request(i, _src(i), MIXED[i]) for i in range(3)]
    second = [Request(i, _src(10 + i), MIXED[3 + i]) for i in range(3)]
    loops = {"a": DecodeLoop(static), "b": DecodeLoop(static)}
    results = {}
    with torch.inference_mode():
        for name, requests in (("a", first), ("b", second)):
            loops[name].join(loops[name].prefill(requests))
        assert loops["a"].state.pool.k is static.home.k and loops["b"].state.pool.k is not static.home.k
        while any(loops.values()):
            for name, loop in loops.items():
                if loop:
                    results.update(((name, o.id), o.hypotheses) for o in loop.step() if o.finished)
        third = DecodeLoop(static)
        third.join(third.prefill(first[:1]))
        assert third.state.pool.k is static.home.k
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
    runners = [Eager(model), _static(model, True, **sizes), _static(model, False, **sizes)]
    states = [_join(runner, None, 0, [1] * 5, 9) for runner in runners]
    for _ in range(4):
        for state in states:
            _teacher_step(runners[0], state, torch.full((state.rows,), 5, device="cuda"))  # rows at position 4
    states = [_join(runner, state, 1, [1, 1], 13) for runner, state in zip(runners, states, strict=True)]
    g = torch.Generator().manual_seed(3)
    for _ in range(20):
        tokens = torch.randint(3, 60, (7,), generator=g).cuda()
        want, *got = (_teacher_step(r, s, tokens).float() for r, s in zip(runners, states, strict=True))
        for logits in got:
            assert (logits - want).abs().max() <= 0.02 * want.abs().max()


@CUDA
def test_a_graphed_step_synchronises_once(model, monkeypatch):
    """Greedy, beams, sampling and penalties, rows leaving: each step waits for the device once, for its one copy to
    the host (the readback's event), and once more where beam requests finish (their hypotheses, one copy), and runs
    nothing else that synchronises, as torch's sync debug mode sees it."""
    static = _static(_on(model, "cuda"), True, max_rows=16, max_positions=20, max_source=16)
    loop = DecodeLoop(static)
    waits, steps = [], []
    real_wait = Readback.wait
    monkeypatch.setattr(Readback, "wait", lambda self: waits.append(1) or real_wait(self))
    with torch.inference_mode():
        loop.join(loop.prefill([Request(i, _src(i), p) for i, p in enumerate(MIXED)]))
        while loop:
            torch.cuda.set_sync_debug_mode("warn")
            waits.clear()
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    outputs = loop.step()
            finally:
                torch.cuda.set_sync_debug_mode("default")
            syncs = [f"{Path(w.filename).name}:{w.lineno}" for w in caught if "synchroniz" in str(w.message)]
            beams_done = any(o.finished and MIXED[o.id].beam_size > 1 for o in outputs)
            steps.append((len(waits) - beams_done, syncs))
    assert steps and all(step == (1, []) for step in steps), steps  # (the readback waits, where else it synced)
