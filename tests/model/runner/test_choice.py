"""Token choice on the device: the beam merge orders as the flat sort did, sampling follows its distribution and
each row's own generator, and a step brings its choices to the host in one copy."""

import torch

import model.runner.beams as beams_module
import model.runner.loop as loop_module
from model.runner.choice import beam_candidates, sample
from model.runner.loop import DecodeLoop
from model.runner.params import DecodeParams
from model.runner.rows import RowTable
from model.runner.search import Request, Seq
from model.runner.transfer import start_fetch
from tests.model.runner.test_decoding import MIXED, _src

GREEDY, BEAM2, BEAM4 = DecodeParams(), DecodeParams(beam_size=2), DecodeParams(beam_size=4)


def table_of(layout: list[tuple[DecodeParams, int]], vocab: int) -> RowTable:
    """The row table of groups of (parameters, width), in row order."""
    groups = [Seq(Request(i, [1], p), 0, w, 1) for i, (p, w) in enumerate(layout)]
    return RowTable.of(groups, max(p.beam_size for p, _ in layout), vocab, torch.device("cpu"))


def flat_sort(scores: torch.Tensor, cum, ranks, table: RowTable) -> dict[int, list[tuple[float, int, int]]]:
    """The host merge the step used before: every beam row's top 2*beam candidates of one group, sorted by
    (-cumulative score, parent rank * V + token), the group's first min(2B, width * V)."""
    vocab, beam = scores.shape[1], max(table.params[first].beam_size for first, _ in table.beams)
    out = {}
    for first, width in table.beams:
        pool = []
        for j in range(first, first + width):
            top, idx = scores[j].topk(min(2 * beam, vocab))
            for s, t in zip((top + cum[j]).tolist(), idx.tolist(), strict=True):
                pool.append((s, ranks[j].item() * vocab + t, j - first, t))
        pool.sort(key=lambda c: (-c[0], c[1]))
        out[first] = [(s, j, t) for s, _, j, t in pool[: min(2 * table.params[first].beam_size, width * vocab)]]
    return out


def candidates(scores: torch.Tensor, cum, ranks, table: RowTable) -> dict[int, list[tuple[float, int, int]]]:
    """The device merge's candidates (cumulative score, parent, token) of each group, its first min(2B, width * V)."""
    best, parents, tokens = (x.tolist() for x in beam_candidates(scores, cum, ranks, table.beam))
    out = {}
    for i, (first, width) in enumerate(table.beams):
        keep = min(2 * table.params[first].beam_size, width * scores.shape[1])
        out[first] = list(zip(best[i][:keep], parents[i][:keep], tokens[i][:keep], strict=True))
    return out


def test_beam_merge_orders_as_the_flat_sort():
    """Groups of widths 1, 3, 4 and beam sizes 2 and 4 between greedy rows; scores and cumulative scores with many
    exact ties, so the order rests on the parents' ranks and the token ids."""
    g = torch.Generator().manual_seed(0)
    layout = [(GREEDY, 1), (BEAM2, 1), (GREEDY, 1), (BEAM4, 3), (BEAM4, 4), (GREEDY, 1)]
    for trial in range(20):
        vocab = 5 if trial % 2 else 40  # 5: the grid holds fewer than 2*beam candidates per row
        table = table_of(layout, vocab)
        assert table.beams == [(1, 1), (3, 3), (6, 4)]
        scores = torch.randint(-3, 1, (len(table.params), vocab), generator=g).float()
        scores[trial % len(table.params), :2] = float("-inf")
        cum = torch.randint(-2, 1, (len(table.params),), generator=g).float()  # greedy rows' entries unused
        zero = torch.zeros(3, dtype=torch.long)
        ranks = torch.cat([zero, torch.randperm(3, generator=g), torch.randperm(4, generator=g), zero[:1]])
        assert candidates(scores, cum, ranks, table) == flat_sort(scores, cum, ranks, table), trial


def knobs_of(params: list[DecodeParams]) -> torch.Tensor:
    """The rows' temperature, top-k and top-p (S, 3), as a row table keeps them."""
    return torch.tensor([[p.temperature, p.top_k, p.top_p] for p in params])


def test_sampling_follows_the_warped_distribution():
    """4000 draws of one row: frequencies within 0.03 of softmax(logits / T) over the top-k tokens, renormalised,
    then cut to the smallest prefix reaching top_p; never a filtered token."""
    logits = torch.tensor([2.0, 1.5, 1.0, 0.5, 0.0, -1.0])
    params = DecodeParams(sampling=True, temperature=0.8, top_k=5, top_p=0.9)
    probs = (logits[:5] / 0.8).softmax(-1)
    keep = (probs.cumsum(-1) - probs < 0.9).sum()  # 4 tokens: 0.345 + 0.26 + 0.2 + 0.15 first reach 0.9
    expected = torch.zeros(6)
    expected[:keep] = probs[:keep] / probs[:keep].sum()
    n = 4000  # rows of different seeds, at different steps
    drawn = sample(logits.repeat(n, 1), knobs_of([params] * n), torch.arange(n) * 7919, torch.arange(n) % 13)
    freq = torch.bincount(drawn, minlength=6).float() / n
    assert keep == 4 and freq[4:].sum() == 0
    assert torch.allclose(freq, expected, atol=0.03), (freq, expected)


def test_a_seeded_row_draws_the_same_whatever_its_neighbours():
    """Each seeded row's noise comes from its seed and step: row 1 alone or between two others (another seed, and an
    unseeded row on the default generator) draws the same tokens, step by step, and another seed draws others."""
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(3, 50, generator=g)
    knobs = ((0, 0.5, 2.0), (20, 0.95, 2.0), (3, 1.0, 1.0))
    params = [DecodeParams(sampling=True, top_k=k, top_p=p, temperature=t) for k, p, t in knobs]
    one, three, other = [], [], []
    for step in range(20):
        steps = torch.tensor([4, step, 2])
        one.append(sample(logits[1:2], knobs_of(params[1:2]), torch.tensor([9]), steps[1:2]).item())
        three.append(sample(logits, knobs_of(params), torch.tensor([3, 9, -1]), steps)[1].item())
        other.append(sample(logits[1:2], knobs_of(params[1:2]), torch.tensor([10]), steps[1:2]).item())
    assert one == three and one != other and len(set(one)) > 3


def test_a_step_copies_to_the_host_once(model, monkeypatch):
    """Greedy, beams, sampling, penalties and rows leaving: one device-to-host fetch per step, and one more at each
    step where beam requests end (their hypotheses)."""
    fetched, ended = [], []
    monkeypatch.setattr(loop_module, "start_fetch", lambda x: fetched.append(x) or start_fetch(x))
    monkeypatch.setattr(beams_module, "fetch", lambda x: ended.append(x) or x)
    loop = DecodeLoop(model)
    steps, beam_ends = 0, 0
    with torch.inference_mode():
        loop.join(loop.prefill([Request(i, _src(i), p) for i, p in enumerate(MIXED)]))
        while loop:
            outputs = loop.step()
            steps += 1
            beam_ends += any(o.finished and o.token is None for o in outputs)
    assert len(fetched) == steps > 10 and len(ended) == beam_ends >= 1


def test_log_probabilities_written_over_the_logits_only_when_every_row_is_a_beam_row():
    """Beam rows rank log-softmax scores, greedy rows their logits, and a scored greedy row reads the log-softmax of
    the unprocessed logits, bit for bit, whether the log-probabilities overwrite the logits (every row a beam row)
    or not (mixed): overwriting them in a mixed batch, or processing before the log-softmax, fails it."""
    from types import SimpleNamespace

    cfg = SimpleNamespace(pad_id=1, decoder_start_id=2, eos_id=2)
    scored = DecodeParams(return_scores=True, repetition_penalty=1.5)
    g = torch.Generator().manual_seed(0)
    for layout in ([(BEAM2, 2), (BEAM4, 4)], [(scored, 1), (BEAM2, 2), (GREEDY, 1)]):
        table = table_of(layout, 300)
        n = len(table.params)
        logits = torch.randn(n, 300, generator=g) * 4
        history, steps = torch.randint(4, 300, (n, 6), generator=g), torch.full((n,), 3)
        want = logits.log_softmax(-1)
        scores, logprobs, _ = loop_module._process(logits.clone(), cfg, table, steps, history, None)
        beam = torch.tensor([p.beam_size > 1 for p in table.params])
        assert logprobs[~beam].equal(want[~beam])  # what a scored greedy row books
        expected = torch.where(beam[:, None], want, logits)
        loop_module.process(expected, cfg, table, steps, history, None)
        assert scores.equal(expected)
