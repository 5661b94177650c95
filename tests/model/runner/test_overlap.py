"""The overlap scheduler (the decode loop keeps step t+1 in flight while step t is read back) gives what the
sequential step gives: same tokens, finish reasons, scores and per-request token streams, nothing after a request
finished or left, joins and aborts while a step is in flight; exactly one wasted row-step per row that ends with EOS
(none at length limits); beam search and history-dependent processors overlap alike: random mixes of greedy, sampled
and beam requests joining and leaving at random rounds give what they give step by step and alone."""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field

import pytest
import torch

from model.loading.checkpoint import load
from model.network.transformer import Seq2SeqTransformer
from model.runner.eager import Eager
from model.runner.generate import generate
from model.runner.loop import DecodeLoop
from model.runner.params import DecodeParams
from model.runner.search import Request
from model.runner.transfer import start_fetch
from tests.model.runner import cache_oracle
from tests.model.runner.test_decoding import MIXED, _src, _tokens
from tests.model.runner.test_static import LANES, _on, _static

# one-row requests: greedy and seeded sampling, scores on and off, length limits, min lengths, forced tokens
ONE_ROW = [
    DecodeParams(max_new_tokens=36),
    DecodeParams(max_new_tokens=27, return_scores=False),
    DecodeParams(sampling=True, seed=7, top_k=10, temperature=0.8, max_new_tokens=36),
    DecodeParams(min_new_tokens=15, max_new_tokens=27),
    DecodeParams(sampling=True, seed=3, top_p=0.7, max_new_tokens=30, return_scores=False),
    DecodeParams(min_new_tokens=6, max_new_tokens=33, forced_bos_id=7),
    DecodeParams(min_new_tokens=23, max_new_tokens=24, forced_eos=True),
    DecodeParams(min_new_tokens=9, max_new_tokens=42, sampling=True, seed=11),
]


@pytest.fixture(scope="module")
def native(native_dir) -> Seq2SeqTransformer:
    """The tests' native checkpoint (random weights, 320 pieces): with ONE_ROW, rows end with EOS (which the host
    cannot know ahead) at many different steps, others at their length limits."""
    return load(native_dir).model


class Counting:
    """A runner that counts the rows of every decode step it runs."""

    def __init__(self, runner):
        self.runner, self.rows = Eager(runner) if isinstance(runner, torch.nn.Module) else runner, 0

    def __getattr__(self, name):
        return getattr(self.runner, name)

    def step_logits(self, state):
        self.rows += state.rows
        return self.runner.step_logits(state)


def _wasted(requests: list[Request], results: list) -> int:
    """Row-steps the overlap scheduler wastes: one per row that ended with EOS before its length limit."""
    return sum(h[0].finish_reason == "eos" and len(h[0].tokens) + 1 < r.params.max_new_tokens
               for r, h in zip(requests, results, strict=True))  # fmt: skip


@pytest.mark.parametrize("which", ["model", "native"])
@pytest.mark.parametrize(("device", "graphs"), LANES)
def test_overlap_equals_sequential(request, which, device, graphs):
    """One-row requests ending at different steps (EOS, length limit, forced EOS): the same hypotheses and scores,
    and the decode steps ran exactly one row more per row that ended with EOS before its limit."""
    model = _on(request.getfixturevalue(which), device)
    runner = _static(model, graphs, max_rows=16, max_positions=20, max_source=24) if device == "cuda" else model
    requests = [Request(i, _src(i), ONE_ROW[i % len(ONE_ROW)]) for i in range(12)]
    steps, ahead = Counting(runner), Counting(runner)
    sequential, overlapped = generate(steps, requests), generate(ahead, requests, overlap=True)
    for want, got in zip(sequential, overlapped, strict=True):
        assert _tokens(got) == _tokens(want)
        assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-5)
    wasted = _wasted(requests, sequential)
    assert wasted >= (5 if which == "native" else 0)
    assert ahead.rows == steps.rows + wasted


@dataclass
class Run:
    """What a running batch produced: every output's token (or stable tokens) by request (streams), results, aborted
    ids; per round whether it left a step in flight; joins made while a step was in flight."""

    streams: dict = field(default_factory=lambda: defaultdict(list))
    results: dict = field(default_factory=dict)
    aborted: set = field(default_factory=set)
    in_flight: list[bool] = field(default_factory=list)
    joined_in_flight: int = 0


def drive(runner, schedule: dict[int, list[tuple[str, list]]], overlap: bool) -> Run:
    """Decode as a server does: at round k the requests of ("join", requests) join and the ids of ("abort", ids)
    leave, then one step of the decode loop (overlap: keeping one in flight). Nothing may come for a request after its
    result or its abort."""
    run, loop, k = Run(), DecodeLoop(runner, overlap), 0
    with torch.inference_mode():
        while k <= max(schedule) or loop:
            for kind, arg in schedule.get(k, []):
                if kind == "join":
                    run.joined_in_flight += loop.pending is not None
                    loop.join(loop.prefill(arg))
                else:
                    run.aborted |= set(arg)
                    loop.retain([i for i in loop.ids if i not in arg])
            if loop:
                outputs = loop.step()
                assert loop.cache_tokens() == (cache_oracle.tokens(loop.state) if loop else 0)
                for o in outputs:
                    assert o.id not in run.results and o.id not in run.aborted, o.id
                    run.streams[o.id] += [o.token] if o.token is not None else o.stable
                    if o.finished:
                        run.results[o.id] = o.hypotheses
                run.in_flight.append(loop.pending is not None)
            if not loop:
                loop.clear()
            k += 1
    return run


def _schedule(params: list[DecodeParams], n: int, abort: tuple[int, int]) -> dict:
    """Two requests at round 0, then one or two joining every round; at round abort[0] request abort[1] leaves."""
    requests = [Request(i, _src(i), params[i % len(params)]) for i in range(n)]
    schedule, k, rest = {0: [("join", requests[:2])]}, 1, requests[2:]
    while rest:
        schedule[k] = [("join", rest[: 1 + k % 2])]
        rest, k = rest[1 + k % 2 :], k + 1
    schedule.setdefault(abort[0], []).insert(0, ("abort", [abort[1]]))
    return schedule


def _same_runs(sequential: Run, overlapped: Run, aborted: int) -> None:
    """Equal results, scores and streams; the aborted request streamed a prefix of what it streams step by step."""
    assert set(overlapped.results) == set(sequential.results) and aborted not in overlapped.results
    for i, want in sequential.results.items():
        assert _tokens(overlapped.results[i]) == _tokens(want), i
        assert [h.score for h in overlapped.results[i]] == pytest.approx([h.score for h in want], abs=1e-5)
        assert overlapped.streams[i] == sequential.streams[i], i
    cut = overlapped.streams[aborted]
    assert cut == sequential.streams[aborted][: len(cut)]


@pytest.mark.parametrize("which", ["model", "native"])
def test_joins_and_aborts_while_a_step_is_in_flight(request, which):
    """Continuous batching with a step always in flight: requests join every round, one leaves (aborted) while its
    step is in flight, rows end at different steps; everything equals the sequential run, every finished request
    streamed its tokens in order, ending with its last one (EOS included), and nothing after."""
    model = request.getfixturevalue(which)
    schedule = _schedule(ONE_ROW, 14, abort=(3, 1))
    sequential, overlapped = drive(model, schedule, False), drive(model, schedule, True)
    _same_runs(sequential, overlapped, aborted=1)
    for i, hyps in overlapped.results.items():  # EOS (1) ends the stream unless the length limit came first
        tokens = hyps[0].tokens
        assert overlapped.streams[i][: len(tokens)] == tokens and overlapped.streams[i][len(tokens) :] in ([], [1]), i
    assert overlapped.joined_in_flight >= 5 and all(overlapped.in_flight[:-1])
    assert not any(sequential.in_flight)


def test_beam_and_history_rows_overlap_too(model):
    """A beam request and one with history-dependent processors join greedy rows whose step is in flight: every
    round keeps a step in flight, and everything equals the sequential run."""
    beam = DecodeParams(beam_size=3, num_hypotheses=2, max_new_tokens=4)
    history = DecodeParams(no_repeat_ngram_size=2, repetition_penalty=1.3, max_new_tokens=6)
    long = DecodeParams(max_new_tokens=16)
    requests = [Request(i, _src(i), p) for i, p in enumerate([long, ONE_ROW[2], beam, history, long, MIXED[5]])]
    schedule = {0: [("join", requests[:2])], 2: [("join", requests[2:4])], 12: [("join", requests[4:])]}
    schedule[13] = [("abort", [0])]
    sequential, overlapped = drive(model, schedule, False), drive(model, schedule, True)
    _same_runs(sequential, overlapped, aborted=0)
    assert all(overlapped.in_flight[:-1]) and overlapped.joined_in_flight == 2


@pytest.fixture(scope="module")
def flat(tmp_path_factory) -> Seq2SeqTransformer:
    """A tiny Marian with flat next-token distributions: its beams overtake each other and change rows."""
    from bench.harness.fixtures import make_marian

    return load(make_marian(tmp_path_factory.mktemp("flat") / "opus-mt-en-es", seed=3, embed_std=0.1)).model


@pytest.mark.parametrize(("device", "graphs"), LANES)
def test_beams_overlap_through_the_static_buffers(flat, device, graphs):
    """The CUDA path's logic on every lane, the CPU's included: beam requests whose beams change rows (reordered in
    the static buffers by device index), with greedy, sampled and penalised ones, decoded overlapped through a
    StaticDecoder equal the plain model's sequential run, at a query width of 1 and of the widest beam."""
    model = _on(flat, device)
    beams = [DecodeParams(beam_size=b, num_hypotheses=b, max_new_tokens=12, length_penalty=lp)
             for b, lp in ((2, 1.0), (3, 0.6), (4, 1.3))]  # fmt: skip
    params = [*beams, *MIXED]
    requests = [Request(i, _src(i), params[i % len(params)]) for i in range(12)]
    want = generate(model, requests)
    for width in (1, 4):
        static = _static(model, graphs, max_rows=32, max_positions=20, max_source=16, max_width=width, max_slots=12)
        for got, expected in zip(generate(static, requests, overlap=True), want, strict=True):
            assert _tokens(got) == _tokens(expected)
            assert [h.score for h in got] == pytest.approx([h.score for h in expected], abs=1e-4)


MIXES = [
    *ONE_ROW,
    DecodeParams(beam_size=2, max_new_tokens=9),
    DecodeParams(beam_size=4, num_hypotheses=3, max_new_tokens=14, length_penalty=0.6),
    DecodeParams(beam_size=3, max_new_tokens=12, early_stopping=True, no_repeat_ngram_size=2),
    DecodeParams(beam_size=2, max_new_tokens=7, repetition_penalty=1.5, bad_words_ids=((5,), (7, 9))),
    DecodeParams(repetition_penalty=1.5, max_new_tokens=11, no_repeat_ngram_size=3),
]


@pytest.mark.parametrize("seed", range(4))
def test_random_mixes_overlapped_equal_sequential_and_alone(native, seed):
    """Greedy, sampled and beam requests (some with history processors) join in random numbers at random rounds and
    one leaves at a random round: overlapped equals sequential (results, scores, streams) and every result equals
    the request decoded alone."""
    rng = random.Random(seed)
    requests = [Request(i, _src(i + 50 * seed), rng.choice(MIXES)) for i in range(rng.randint(6, 14))]
    alone = {r.id: generate(native, [r])[0] for r in requests}
    schedule, joined, k, rest = {}, {}, 0, list(requests)
    while rest:
        take = rng.randint(0 if k else 1, 3)
        if take:
            schedule[k] = [("join", rest[:take])]
            joined.update((r.id, k) for r in rest[:take])
        rest, k = rest[take:], k + rng.randint(1, 3)
    aborted = rng.choice([r.id for r in requests if len(alone[r.id][0].tokens) > 5])  # leaves before it finishes
    schedule.setdefault(joined[aborted] + rng.randint(1, 4), []).append(("abort", [aborted]))
    sequential, overlapped = drive(native, schedule, False), drive(native, schedule, True)
    _same_runs(sequential, overlapped, aborted=aborted)
    assert len(sequential.results) == len(requests) - 1
    for i, hyps in sequential.results.items():
        assert _tokens(hyps) == _tokens(alone[i]), i
        assert [h.score for h in hyps] == pytest.approx([h.score for h in alone[i]], abs=1e-4)


def test_readback_is_the_tensor_itself_without_cuda():
    """On CPU nothing runs asynchronously: the readback is the tensor itself, no copy and no event."""
    x = torch.arange(4)
    back = start_fetch(x)
    assert back.event is None and back.wait() is x


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_readback_waits_for_its_copy_only_on_cuda():
    """A readback started before more work was queued gives the values of its moment, in pinned memory."""
    x = torch.arange(1 << 20, device="cuda")
    back = start_fetch(x[:8])
    for _ in range(20):  # queued after the copy: the readback must not see it
        x.mul_(3)
    assert back.event is not None and back.host.is_pinned()
    assert back.wait().tolist() == list(range(8))
