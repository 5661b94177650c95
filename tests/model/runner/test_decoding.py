"""Decoding: batched equals alone, n-best order, seeded sampling, limits, penalties."""

import dataclasses

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from bench.harness.fixtures import tiny_config
from model.network.transformer import Seq2SeqTransformer
from model.runner.choice import warp
from model.runner.eager import Eager
from model.runner.generate import generate
from model.runner.loop import DecodeLoop
from model.runner.params import DecodeParams
from model.runner.search import Request
from model.runner.state import place
from tests.model.runner import cache_oracle


def _src(i: int) -> list[int]:
    g = torch.Generator().manual_seed(i)
    return torch.randint(3, 60, (3 + (i * 7) % 11,), generator=g).tolist() + [1]


MIXED = [
    DecodeParams(max_new_tokens=12),
    DecodeParams(beam_size=4, num_hypotheses=3, max_new_tokens=12),
    DecodeParams(sampling=True, seed=7, top_k=10, temperature=0.8, max_new_tokens=12),
    DecodeParams(min_new_tokens=5, max_new_tokens=9, repetition_penalty=1.3),
    DecodeParams(no_repeat_ngram_size=2, max_new_tokens=15),
    DecodeParams(beam_size=3, length_penalty=0.6, max_new_tokens=10),
    DecodeParams(sampling=True, seed=3, top_p=0.7, max_new_tokens=12),
]


def _tokens(hyps):
    return [(h.tokens, h.finish_reason) for h in hyps]


def test_batched_equals_alone(model):
    requests = [Request(i, _src(i), p) for i, p in enumerate(MIXED)]
    together = generate(model, requests)
    for req, hyps in zip(requests, together, strict=True):
        alone = generate(model, [req])[0]
        assert _tokens(alone) == _tokens(hyps)
        assert [h.score for h in alone] == pytest.approx([h.score for h in hyps], abs=1e-4)


def test_a_runner_keeps_its_pool_for_the_next_batch(model):
    # catches: every batch growing and faulting in a pool afresh (the last batch's buffers unused), or the last
    # batch's positions or K/V read by the next (its outputs would then differ from alone)
    runner = Eager(model)
    first = [Request(i, _src(i), p) for i, p in enumerate(MIXED)]
    second = [Request(i, _src(20 + i), MIXED[(i + 3) % len(MIXED)]) for i in range(4)]
    generate(runner, first)
    kept = runner.spare
    assert kept is not None and kept.k.shape[1] >= 4
    buffer, loop, got = kept.k, DecodeLoop(runner), {}
    with torch.inference_mode():
        loop.join(loop.prefill(second))
        assert loop.state.pool.k is buffer  # the first batch's self-attention buffers, not grown again
        while loop:
            got.update((o.id, o.hypotheses) for o in loop.step() if o.finished)
    for req in second:
        assert _tokens(got[req.id]) == _tokens(generate(model, [req])[0])
    assert runner.spare.k is buffer


def test_scores_are_optional_for_greedy_and_sampling(model):
    """return_scores=False skips the log-softmax (when no row needs it): same tokens, no score; rows that ask for
    scores beside them get the score they get alone."""
    silent = [dataclasses.replace(p, return_scores=False) for p in (MIXED[0], MIXED[2], MIXED[3])]
    quiet = generate(model, [Request(i, _src(i), p) for i, p in enumerate(silent)])  # no row needs log-probs
    loud = generate(model, [Request(i, _src(i), p) for i, p in enumerate((MIXED[0], MIXED[2], MIXED[3]))])
    assert [_tokens(h) for h in quiet] == [_tokens(h) for h in loud]
    assert all(h.score is None for hyps in quiet for h in hyps)
    assert all(h.score is not None and h.score < 0 for hyps in loud for h in hyps)
    mixed = generate(model, [Request(0, _src(0), silent[0]), Request(1, _src(1), MIXED[0])])
    assert mixed[0][0].score is None
    assert mixed[1][0].score == pytest.approx(generate(model, [Request(1, _src(1), MIXED[0])])[0][0].score, abs=1e-5)


def test_nbest_sorted_and_distinct(model):
    hyps = generate(model, [Request(0, _src(3), DecodeParams(beam_size=5, num_hypotheses=5, max_new_tokens=8))])[0]
    assert len(hyps) == 5
    scores = [h.score for h in hyps]
    assert scores == sorted(scores, reverse=True)
    assert len({tuple(h.tokens) for h in hyps}) == 5


def test_seeded_sampling_is_reproducible_and_seed_dependent(model):
    run = lambda seed: generate(model, [Request(0, _src(2), DecodeParams(sampling=True, seed=seed, max_new_tokens=20))])
    assert _tokens(run(5)[0]) == _tokens(run(5)[0])
    assert len({tuple(run(s)[0][0].tokens) for s in range(40)}) > 1  # its first token: 37 at 0.94, else 8


def test_length_limits(model):
    out = generate(model, [Request(0, _src(4), DecodeParams(min_new_tokens=7, max_new_tokens=7))])[0][0]
    assert len(out.tokens) == 7 and out.finish_reason == "length"
    for i in range(8):
        hyp = generate(model, [Request(0, _src(i), DecodeParams(max_new_tokens=30))])[0][0]
        assert len(hyp.tokens) <= 30
        assert 1 not in hyp.tokens  # generation stops at the first EOS, which is not part of the output
        assert 0 not in hyp.tokens  # padding / decoder start never generated
        assert (hyp.finish_reason == "length") == (len(hyp.tokens) == 30)


def test_eos_reached_when_it_is_the_only_choice():
    torch.manual_seed(0)
    model = Seq2SeqTransformer(tiny_config(60, final_logits_bias=True)).eval()
    model.final_logits_bias[1] = 100.0  # EOS wins every step unless suppressed
    hyp = generate(model, [Request(0, _src(0), DecodeParams(max_new_tokens=10))])[0][0]
    assert hyp.tokens == [] and hyp.finish_reason == "eos"
    hyp = generate(model, [Request(0, _src(0), DecodeParams(min_new_tokens=3, max_new_tokens=10))])[0][0]
    assert len(hyp.tokens) == 3 and hyp.finish_reason == "eos"
    beams = generate(model, [Request(0, _src(0), DecodeParams(beam_size=2, min_new_tokens=2, max_new_tokens=10))])[0]
    assert len(beams[0].tokens) == 2 and beams[0].finish_reason == "eos"


def test_no_repeat_ngram_blocks_repeats(model):
    hyp = generate(model, [Request(0, _src(1), DecodeParams(no_repeat_ngram_size=2, max_new_tokens=25))])[0][0]
    seq = [0, *hyp.tokens]
    bigrams = list(zip(seq, seq[1:], strict=False))
    assert len(bigrams) == len(set(bigrams))


def test_repetition_penalty_changes_repetitive_output(model):
    base = generate(model, [Request(0, _src(6), DecodeParams(max_new_tokens=20))])[0][0].tokens
    pen = generate(model, [Request(0, _src(6), DecodeParams(repetition_penalty=5.0, max_new_tokens=20))])[0][0].tokens
    assert len(set(pen)) >= len(set(base))
    assert len(pen) == len(set(pen)) or pen != base


def test_warp_top_k_and_top_p_per_row():
    """Each row keeps its own top-k (ties with the k-th stay) and nucleus; rows without filters keep everything."""
    logits = torch.tensor([[3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 2.0, 3.0], [1.0, 2.0, 2.0, 0.0], [3.0, 2.0, 1.0, 0.0]])
    top_k, top_p = torch.tensor([2, 0, 2, 0]), torch.tensor([1.0, 0.7, 1.0, 1.0])
    kept = torch.isfinite(warp(logits, torch.ones(4), top_k, top_p))
    assert kept.tolist() == [[1, 1, 0, 0], [0, 0, 1, 1], [0, 1, 1, 0], [1, 1, 1, 1]]
    assert warp(logits, torch.full((4,), 2.0), top_k, top_p)[0, 0] == 1.5  # temperature first


def test_parameters_are_validated():
    with pytest.raises(ValueError, match="num_hypotheses"):
        DecodeParams(beam_size=2, num_hypotheses=3)
    with pytest.raises(ValueError, match="top_p"):
        DecodeParams(top_p=0.0)


def continuous(runner, requests: list[Request]) -> dict:
    """Decode `requests` as a running batch: joins every step, request 1 (beams) aborted at step 3, finishes at
    different steps; results by id. Each step the batch's token count is checked against its cache."""
    loop = DecodeLoop(runner)
    pending, results, step = requests, {}, 0
    with torch.inference_mode():
        while loop or pending:
            if pending:
                n = 3 if not step else 1 + step % 2
                joining, pending = pending[:n], pending[n:]
                loop.join(loop.prefill(joining))
            if step == 3:
                loop.retain([i for i in loop.ids if i != 1])
            outputs = loop.step()
            assert loop.cache_tokens() == (cache_oracle.tokens(loop.state) if loop else 0)
            results.update((o.id, o.hypotheses) for o in outputs if o.finished)
            step += 1
    return results


def test_requests_joining_and_leaving_a_running_batch_equal_alone(model):
    """Continuous batching in place: joins every step, an abort, finishes at different steps."""
    requests = [Request(i, _src(i), MIXED[i % len(MIXED)]) for i in range(12)]
    results = continuous(model, requests)
    assert 1 not in results and len(results) == len(requests) - 1
    for req in requests:
        if req.id != 1:
            alone = generate(model, [req])[0]
            assert _tokens(results[req.id]) == _tokens(alone), req.id
            assert [h.score for h in results[req.id]] == pytest.approx([h.score for h in alone], abs=1e-4)


def test_place_moves_as_few_rows_as_possible():
    # rows 0 and 2 left: the two one-row requests at the end fill their places; the others stay
    assert place([(1, 1, 1), (3, 1, 1), (4, 1, 1), (5, 1, 1)]) == [1, 3, 0, 2]
    # a beam request keeps its four rows; one that grew from 1 to 4 rows moves to the gap left behind
    assert place([(0, 4, 4), (8, 1, 4), (9, 1, 1)]) == [0, 4, 8]
    # a beam request past the end fits no gap: it takes the last rows, and the one-row request there fills the gap
    # (packing in order moved every request after the gap: 7 rows and 3 slots, now 5 rows and 2 slots)
    assert place([(0, 1, 1), (2, 1, 1), (3, 1, 1), (4, 1, 1), (5, 4, 4)]) == [0, 2, 3, 1, 4]
    assert place([(0, 1, 1), (2, 1, 1), (3, 4, 4)]) == [0, 1, 2]
    # no window holds only narrower requests (a beam request of as many rows stays in the way): packed in order
    assert place([(0, 1, 1), (2, 4, 4), (7, 4, 4)]) == [0, 1, 5]


@given(st.lists(st.tuples(st.integers(1, 5), st.integers(0, 5), st.integers(0, 2)), min_size=1, max_size=24))
def test_place_tiles_the_rows_that_stay(requests):
    # catches: an evicted request left where the wide one now is (two requests on one row), or a row past the end
    spans, first = [], 0
    for width, new, gap in requests:  # (rows, rows after the step: 0 leaves, gap rows left before it)
        first += gap
        if new:
            spans.append((first, width, min(new, width)))
        first += width
    starts = place(spans)
    rows = sorted(r for (_, _, new), at in zip(spans, starts, strict=True) for r in range(at, at + new))
    assert rows == list(range(sum(new for _, _, new in spans)))


def test_bad_words_and_forced_tokens(model):
    """bad_words_ids: a one-token word never appears, a two-token word never completes; forced_bos_id comes first
    and forced_eos ends the output at the limit, as transformers' processors do."""
    src = _src(4)
    free = generate(model, [Request(0, src, DecodeParams(max_new_tokens=12))])[0][0].tokens
    one, pair = free[2], (free[0], free[1])
    params = DecodeParams(max_new_tokens=12, bad_words_ids=((one,), pair))
    banned = generate(model, [Request(0, src, params)])[0][0].tokens
    assert one not in banned and all(tuple(banned[i : i + 2]) != pair for i in range(len(banned) - 1))
    forced = DecodeParams(beam_size=2, max_new_tokens=5, forced_bos_id=7, forced_eos=True)
    hyp = generate(model, [Request(0, src, forced)])[0][0]
    assert hyp.tokens[0] == 7 and len(hyp.tokens) <= 4 and hyp.finish_reason in ("eos", "length")


def test_a_stream_ends_with_eos_also_when_it_is_forced_at_the_limit(model):
    """forced_eos: the last step's token is EOS (the output does not keep it, its reason is "length"), not the
    previous token a second time."""
    loop = DecodeLoop(model)
    streamed = []
    with torch.inference_mode():
        loop.join(loop.prefill([Request(0, _src(4), DecodeParams(max_new_tokens=5, forced_eos=True))]))
        while loop:
            (out,) = loop.step()
            streamed.append(out.token)
    (hyp,) = out.hypotheses
    assert streamed == [*hyp.tokens, 1] and len(hyp.tokens) == 4 and hyp.finish_reason == "length"
