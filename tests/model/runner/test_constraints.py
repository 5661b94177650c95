"""Lexically constrained beam search: every constraint appears in every finished output (EOS waits for them); a
constrained request decodes the same alone, batched beside other requests, sequential and overlapped, and streams a
prefix of its result; requests without constraints beside it are untouched; the progress columns and the bank
allocation on hand-made cases."""

import copy
import dataclasses

import pytest
import torch

from model.runner import constraints
from model.runner.constraints import AFTER_WORDS, WINDOW_WORDS, Constraints, Words, allocate, extra_candidates
from model.runner.generate import generate
from model.runner.loop import DecodeLoop
from model.runner.params import PARKED, DecodeParams, constrained_beam
from model.runner.search import Request
from tests.model.runner.test_decoding import MIXED, _src, _tokens
from tests.model.runner.test_overlap import drive

CONSTRAINTS = [((5, 6), (9,)), ((7, 8, 9),), ((11,), (12, 13), (14,))]


def _contains(tokens: list[int], seq: tuple[int, ...]) -> bool:
    return any(tuple(tokens[i : i + len(seq)]) == seq for i in range(len(tokens) - len(seq) + 1))


def test_progress_through_constraints():
    """A row matches a constraint token by token, starts again when a token breaks the match (a token that starts it
    anew counts as its first), and a met constraint stays met."""
    cons = Constraints.start([((5, 6, 7), (9,)), ()], torch.device("cpu"))
    assert cons.tokens.shape == (2, 2, 3) and cons.length.tolist() == [[3, 1], [0, 0]]
    assert cons.unmet().tolist() == [True, False]
    rows = torch.tensor([0, 1])
    for token, matched, met in ((5, [1, 0], [False, False]), (5, [1, 0], [False, False]), (6, [2, 0], [False, False]),
                                (9, [0, 0], [False, True]), (5, [1, 0], [False, True]), (6, [2, 0], [False, True]),
                                (7, [0, 0], [True, True])):  # fmt: skip
        cons = cons.extend(rows, torch.tensor([token, token]))
        assert cons.matched[0].tolist() == matched and cons.met[0].tolist() == met, token
        assert cons.met[1].all()
    assert cons.unmet().tolist() == [False, False]


def test_allocation_is_round_robin_over_banks():
    """The best candidate of every bank first, fullest bank first, then the second best of every bank; -inf last."""
    score = torch.tensor([[-1.0, -2.0, -3.0, -4.0, -5.0, float("-inf")]])
    bank = torch.tensor([[0, 0, 2, 1, 2, 2]])
    assert allocate(score, bank).tolist() == [[2, 3, 0, 4, 1, 5]]


@pytest.mark.parametrize("beam", [1, 2, 4])
def test_every_finished_output_holds_every_constraint(model, beam):
    """Greedy (raised to the constrained beam) and beam requests: the best hypothesis contains every constraint, and
    in the n-best every one that does ranks before any that does not (the tiny model ends most at the length limit,
    where a hypothesis may end with constraints unmet); unconstrained the output does not contain them all."""
    for i, cons in enumerate(CONSTRAINTS):
        params = DecodeParams(beam_size=beam, num_hypotheses=beam, max_new_tokens=24)
        free = generate(model, [Request(i, _src(i), params)])[0]
        hyps = generate(model, [Request(i, _src(i), params.constrained(cons))])[0]
        assert len(hyps) == beam and params.constrained(cons).beam_size == max(beam, constrained_beam(cons))
        complete = [all(_contains(h.tokens, c) for c in cons) for h in hyps]
        assert complete[0] and complete == sorted(complete, reverse=True), (i, [h.tokens for h in hyps])
        assert not all(_contains(free[0].tokens, c) for c in cons)


def test_constrained_requests_batched_equal_alone(model):
    """Constrained, plain beam, greedy and sampled requests in one batch: each gets what it gets alone."""
    params = [DecodeParams(beam_size=3, max_new_tokens=20).constrained(c) for c in CONSTRAINTS] + MIXED
    requests = [Request(i, _src(i), p) for i, p in enumerate(params)]
    for req, hyps in zip(requests, generate(model, requests), strict=True):
        alone = generate(model, [req])[0]
        assert _tokens(hyps) == _tokens(alone), req.id
        assert [h.score for h in hyps] == pytest.approx([h.score for h in alone], abs=1e-4)


def test_constrained_requests_overlapped_and_streamed(model):
    """Joining a running batch, sequential and overlapped give the same results and streams, and what a constrained
    request streams is a prefix of its result."""
    params = [DecodeParams(max_new_tokens=20).constrained(c) for c in CONSTRAINTS] + MIXED[:3]
    requests = [Request(i, _src(i + 3), p) for i, p in enumerate(params)]
    schedule = {0: [("join", requests[:2])], 2: [("join", requests[2:4])], 5: [("join", requests[4:])]}
    sequential, overlapped = drive(model, schedule, False), drive(model, schedule, True)
    assert sequential.results.keys() == overlapped.results.keys() == {r.id for r in requests}
    for req in requests:
        got, want = overlapped.results[req.id], sequential.results[req.id]
        assert _tokens(got) == _tokens(want) and overlapped.streams[req.id] == sequential.streams[req.id]
        if req.params.constraints:
            best = want[0].tokens
            assert best[: len(sequential.streams[req.id])] == sequential.streams[req.id]
            assert all(_contains(best, c) for c in req.params.constraints)


def test_no_constraint_changes_nothing(model):
    """Constraints of () leave the parameters, and so the output, as they were."""
    params = DecodeParams(max_new_tokens=20)
    assert params.constrained(()) is params


def test_constraints_that_start_alike_count_their_common_start_once():
    """Two constraints under way with the same first token: the bank counts the furthest one, so repeating the common
    start does not rank with going on (counting both kept a random model repeating it forever)."""
    cons = Constraints.start([((2, 7, 8), (2, 9))], torch.device("cpu"))
    rows = torch.tensor([0])
    after_start = cons.extend(rows, torch.tensor([2]))
    again = after_start.bank(*after_start.after(rows, torch.tensor([2])), rows)
    onward = after_start.bank(*after_start.after(rows, torch.tensor([9])), rows)
    assert again.tolist() == [1] and onward.tolist() == [2]
    met = after_start.extend(rows, torch.tensor([9]))
    assert met.bank(met.matched, met.met, rows).tolist() == [2]  # (2, 9) met: its length


def _placed(span: tuple[int, int]) -> Constraints:
    """One row with the constraint (5, 6) placed on source tokens `span` (its window opening there too)."""
    return Constraints.start([((5, 6),)], torch.device("cpu"), [((span[0], *span),)])


def test_a_placed_term_is_offered_only_inside_its_window():
    # catches: a term offered before the alignment reaches its source (appended after the end, placed anywhere)
    cons, rows = _placed((2, 4)), torch.tensor([0])
    scores = torch.zeros(1, 20)
    elsewhere = torch.tensor([[0.7, 0.2, 0.05, 0.05, 0.0]])  # (N, S): the decoder looks at source token 0
    closed = extra_candidates(scores, rows, cons.opened(elsewhere))[1]
    assert closed[0, 0] == float("-inf")  # its first token is no candidate
    on_span = torch.tensor([[0.1, 0.1, 0.5, 0.3, 0.0]])
    opened = cons.opened(on_span)
    assert opened.budget.tolist() == [[WINDOW_WORDS]] and extra_candidates(scores, rows, opened)[1][0, 0] == 0.0
    assert cons.opened(torch.tensor([[0.1, 0.5, 0.05, 0.05, 0.3]])).budget.tolist() == [[-1]]  # only on its span
    at_end = cons.opened(torch.tensor([[0.1, 0.1, 0.05, 0.05, 0.7]]))  # the decoder reached the source's end
    assert at_end.budget.tolist() == [[0]] and at_end.lost.tolist() == [[True]]  # never appended after it
    between = cons.opened(torch.tensor([[0.1, 0.1, 0.05, 0.05, 0.7]]), torch.tensor([False]))
    assert between.budget.tolist() == [[0]]  # between words: the end
    glance = cons.opened(torch.tensor([[0.1, 0.1, 0.05, 0.05, 0.7]]), torch.tensor([True]))
    assert glance.budget.tolist() == [[-1]]  # mid-word ("Reinic|ia|r"): a glance at EOS, not the end


def test_a_parked_term_is_met_from_the_start():
    """A term left to the model (its word to stand in for: `model.runner.unfinished`) is met before any step: no
    candidate of its tokens, no bar on EOS, the same bank for every row."""
    # catches: a parked term still offered or waited for (EOS banned until its window passes, which it never opens)
    cons = Constraints.start([((5, 6), (7,))], torch.device("cpu"), [(PARKED, (0, 1, 2))])
    assert cons.met.tolist() == [[True, False]] and cons.unmet().tolist() == [True]
    parked = Constraints.start([((5, 6),)], torch.device("cpu"), [(PARKED,)])
    assert parked.unmet().tolist() == [False]
    tokens, _ = extra_candidates(torch.zeros(1, 20), torch.tensor([0]), parked)
    assert 5 not in tokens.tolist()[0]


def test_a_window_passes_after_its_words_and_then_the_row_may_end():
    # catches: a window that never closes (the term after the model's own word) or a lost term blocking EOS forever
    starts = torch.zeros(20, dtype=torch.bool)
    starts[[5, 10, 11]] = True  # 5: the term's first token; 10 and 11 start other words; 12 continues a word
    words = Words(starts, ~starts)
    cons, rows = _placed((0, 1)).opened(torch.tensor([[1.0, 0.0]])), torch.tensor([0])
    cons = cons.extend(rows, torch.tensor([12]), words)  # a word goes on: no word spent
    assert cons.budget.tolist() == [[WINDOW_WORDS]]
    for left in range(WINDOW_WORDS - 1, -1, -1):
        cons = cons.extend(rows, torch.tensor([10]), words)
        assert cons.budget.tolist() == [[left]]
    assert cons.unmet().tolist() == [False]  # lost: it may end (ranked below hypotheses that met every term)
    assert cons.extend(rows, torch.tensor([5]), words).matched.tolist() == [[0]]  # and the term no longer starts
    led = Constraints.start([((5, 6),)], torch.device("cpu"), [((0, 1, 2),)])  # "the picture": window from "the"
    after_la = led.opened(torch.tensor([[1.0, 0.0, 0.0]])).extend(rows, torch.tensor([10]), words)  # "la", at "the"
    early = after_la.opened(torch.tensor([[1.0, 0.0, 0.0]])).extend(rows, torch.tensor([5]), words)  # still at "the"
    assert early.matched.tolist() == [[0]]  # the term starts at its own words, not at the word before them
    at_term = torch.tensor([[0.0, 0.9, 0.1]])  # (not all of it there: the source's end would close the window)
    mid = after_la.opened(at_term, torch.tensor([True])).extend(rows, torch.tensor([5]), words)
    assert mid.matched.tolist() == [[0]]  # nor in the middle of the model's own word ("una pe pestaña")
    inside = after_la.opened(at_term, torch.tensor([False])).extend(rows, torch.tensor([5]), words)  # at "picture"
    inside = inside.extend(rows, torch.tensor([6]), words)
    assert inside.met.tolist() == [[True]] and inside.fresh.tolist() == [True]  # the next token starts a new word
    own = led.opened(torch.tensor([[0.0, 1.0, 0.0]])).extend(rows, torch.tensor([10]), words)  # "cuadro", at "picture"
    assert own.lost.tolist() == [[True]]  # its own word for the term: the window passed at once


def test_a_term_the_model_writes_itself_starts_anywhere_in_its_window():
    # catches: a noun before its adjective lost while the decoder still looks at the adjective ("a new folder": the
    # constrained beam wrote "una nueva carpeta" where the model, left alone, writes "una carpeta nueva")
    starts = torch.zeros(20, dtype=torch.bool)
    starts[[5, 10, 11]] = True
    words, rows = Words(starts, ~starts), torch.tensor([0])
    led = Constraints.start([((5, 6),)], torch.device("cpu"), [((0, 1, 2),)])  # "new folder": window from "new"
    on_new = torch.tensor([[0.8, 0.1, 0.1]])  # (not all of it: the source's end would close the window)
    at_new = led.opened(on_new).extend(rows, torch.tensor([10]), words).opened(on_new)  # "una", still at "new"
    assert at_new.after(rows, torch.tensor([5]), words)[0].tolist() == [[0]]  # offered by the beam: not yet
    own = at_new.after(rows, torch.tensor([5]), words, best=torch.tensor([5]))  # the model's own next token
    assert own[0].tolist() == [[1]]
    assert at_new.after(rows, torch.tensor([5]), words, best=torch.tensor([11]))[0].tolist() == [[0]]
    closed = led.after(rows, torch.tensor([5]), words, best=torch.tensor([5]))  # window not open: its own word
    assert closed[0].tolist() == [[0]]


def test_a_term_translated_again_after_it_is_met_is_lost():
    # catches: the model's own word for a term's source written after the term ("El fichero no se pudo guardar el
    # archivo."), or the words right after a term (the decoder still looking at its source) taken for it
    starts = torch.zeros(20, dtype=torch.bool)
    starts[[5, 10, 11]] = True  # 5: the term's first token; 10 and 11 start other words; 12 continues a word
    words, rows = Words(starts, ~starts), torch.tensor([0])
    cons = Constraints.start([((5, 6),)], torch.device("cpu"), [((0, 0, 1),)])
    at_term, elsewhere = torch.tensor([[0.8, 0.1, 0.1]]), torch.tensor([[0.1, 0.8, 0.1]])
    cons = cons.opened(at_term).extend(rows, torch.tensor([5]), words).extend(rows, torch.tensor([6]), words)
    assert cons.met.tolist() == [[True]]
    for _ in range(AFTER_WORDS):  # the words right after the term may still look at its source
        cons = cons.opened(at_term).extend(rows, torch.tensor([10]), words)
        assert cons.met.tolist() == [[True]]
    assert cons.opened(at_term).extend(rows, torch.tensor([12]), words).met.tolist() == [[True]]  # a word goes on
    assert cons.opened(elsewhere).extend(rows, torch.tensor([11]), words).met.tolist() == [[True]]  # another source
    glance = torch.tensor([[0.4, 0.3, 0.3]])  # its argmax on the term's source, its mass there below AGAIN_MASS
    assert cons.opened(glance).extend(rows, torch.tensor([11]), words).met.tolist() == [[True]]
    twice = cons.opened(at_term).extend(rows, torch.tensor([11]), words)  # a new word for the term's source
    assert twice.met.tolist() == [[False]] and twice.lost.tolist() == [[True]] and twice.unmet().tolist() == [False]


def test_a_term_wanted_twice_is_met_once_per_occurrence():
    # catches: one occurrence meeting both constraints (the second place left without its term)
    cons = Constraints.start([((5,), (5,))], torch.device("cpu"))
    rows = torch.tensor([0])
    once = cons.extend(rows, torch.tensor([5]))
    assert once.met.tolist() == [[True, False]] and once.unmet().tolist() == [True]
    assert once.extend(rows, torch.tensor([5])).met.tolist() == [[True, True]]


def test_a_server_with_a_small_max_beam_takes_a_long_term():
    # catches: DecodeParams rejecting the beam `constrained` chose under the server's max_beam_size (a 500)
    params = DecodeParams(beam_size=1).constrained(((5, 6, 7, 8),), most=4)
    assert params.beam_size == 4


def test_placed_constraints_keep_every_oracle(model):
    # catches: alignment-placed constraints that differ batched and alone, or sequential and overlapped
    spans = ((0, 1, 3), (0, 0, 1)), ((0, 1, 2),), ((1, 2, 3), (0, 0, 1), (0, 1, 2))
    reqs = [Request(i, _src(i + 3), DecodeParams(beam_size=2, max_new_tokens=12).constrained(c, spans=s))
            for i, (c, s) in enumerate(zip(CONSTRAINTS, spans, strict=True))]  # fmt: skip
    reqs += [Request(10 + i, _src(i + 4), p) for i, p in enumerate(MIXED[:3])]
    starts = torch.zeros(model.cfg.tgt_vocab_size, dtype=torch.bool)
    starts[::2] = True
    words = Words(starts, ~starts)
    together = generate(model, reqs, words=words)
    tokens = lambda hyps: [h.tokens for h in hyps]  # noqa: E731
    assert [tokens(h) for h in generate(model, reqs, overlap=True, words=words)] == [tokens(h) for h in together]
    for r, got in zip(reqs, together, strict=True):
        assert tokens(generate(model, [r], words=words)[0]) == tokens(got)


def test_a_term_not_under_way_passes_where_the_model_would_end_the_sentence():
    # catches: a hypothesis whose window never opened kept from ending (it ran to the length limit: 0.43x at beam 4)
    cons = _placed((2, 4))
    elsewhere = torch.tensor([[0.7, 0.2, 0.05, 0.05, 0.0]])  # (N, S): neither on the span nor at the source's end
    ending = lambda c, ends: c.opened(elsewhere, None, torch.tensor([ends]))  # noqa: E731
    ended = ending(cons, True)
    assert ended.lost.tolist() == [[True]] and ended.unmet().tolist() == [False]
    assert ending(cons, False).unmet().tolist() == [True]
    under_way = _placed((2, 4)).opened(torch.tensor([[0, 0, 1.0, 0]]))
    under_way = under_way.extend(torch.tensor([0]), torch.tensor([5]))
    assert ending(under_way, True).unmet().tolist() == [True]  # a term under way is finished first


def test_a_placed_term_does_not_start_before_its_window_opens():
    # catches: the model's own word sharing the term's first token taken as the term ("Exportar" read as "▁Ex" of
    # "Excel": "Excel la mesa a Excel.")
    cons, rows = _placed((3, 4)), torch.tensor([0])
    assert cons.extend(rows, torch.tensor([5])).matched.tolist() == [[0]]  # window not open: its own word
    opened = cons.opened(torch.tensor([[0.0, 0.0, 0.0, 1.0, 0.0]]))
    assert opened.extend(rows, torch.tensor([5])).matched.tolist() == [[1]]  # inside it: the term starts
    unplaced = Constraints.start([((5, 6),)], torch.device("cpu"))
    assert unplaced.extend(rows, torch.tensor([5])).matched.tolist() == [[1]]  # an unplaced one starts anywhere


def test_a_forced_token_is_never_banned():
    # catches: a retry's forced prefix that continues a term's word ("Esta|s", the agreement's "Estas" after the term
    # "esta") or ends with an unmet constraint banned to -inf: no hypothesis left, an empty result (a 500)
    eos, vocab = 2, 16
    joins = torch.zeros(vocab, dtype=torch.bool)
    joins[7] = True
    cons = Constraints.start([((4,),), ((5,),)], torch.device("cpu"))
    cons.fresh = torch.tensor([True, True])
    forced = torch.tensor([7, -1])  # row 0 is forced to continue the word; row 1 is free
    scores = torch.zeros(2, vocab)
    constraints.ban(scores, cons, eos, Words(torch.zeros(vocab, dtype=torch.bool), joins), None, forced)
    assert scores[0, 7] == 0 and scores[0, eos] == 0  # forced: untouched
    assert scores[1, 7] == float("-inf") and scores[1, eos] == float("-inf")


@pytest.mark.parametrize("with_best", [True, False])
def test_bans_on_a_cpu_equal_the_whole_mask(with_best):
    """`ban`'s CPU path (only the rows a ban touches) gives the scores and argmaxes of the whole (N, V) masks: EOS
    banned where a constraint is unmet, word continuations where a term just ended, the argmax searched again where
    a ban took it (a row whose best was EOS, one whose best continued the term's word)."""
    eos, vocab = 2, 16
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(5, vocab, generator=gen)
    scores[0, eos] = scores[1, eos] = 9.0  # rows 0 and 1 would end; row 1 has met everything
    joins = torch.zeros(vocab, dtype=torch.bool)
    joins[[3, 7, 8]] = True
    scores[2, 7] = scores[3, 8] = 9.0  # rows 2 and 3 would continue a word; a term just ended on row 2 only
    cons = Constraints.start([((4,),), (), ((5,),), ((6,),), ()], torch.device("cpu"))
    cons.fresh = torch.tensor([False, False, True, False, True])
    words = Words(torch.zeros(vocab, dtype=torch.bool), joins)
    want = scores.clone()
    want[:, eos].masked_fill_(cons.unmet(), float("-inf"))
    want.masked_fill_(cons.fresh[:, None] & joins, float("-inf"))
    got_scores = scores.clone()
    best = constraints.ban(got_scores, cons, eos, words, scores.argmax(1) if with_best else None)
    assert torch.equal(got_scores, want)
    assert best is None if not with_best else best.tolist() == want.argmax(1).tolist()
    assert with_best is False or best.tolist()[:4] != scores.argmax(1).tolist()[:4]  # the bans moved some argmaxes


def _prefixed() -> list[Request]:
    """Glossary retries as the engine makes them: beam requests (a greedy one widened, beams of 4 and 3) forced a
    prefix that ends with a term placed by it, long and short, beside another placed term and requests without."""
    spans = ((-1, -1, -1), (1, 2, 3))
    made = [
        (DecodeParams(max_new_tokens=16), (5, 6, 7, 5, 6), ((5, 6), (9,))),
        (DecodeParams(beam_size=4, num_hypotheses=4, max_new_tokens=16), (8, 7, 8, 9), ((7, 8, 9), (11,))),
        (DecodeParams(beam_size=3, num_hypotheses=3, max_new_tokens=14), (11,), ((11,), (12, 13))),
    ]
    reqs = [Request(i, _src(i + 5), dataclasses.replace(p.constrained(c, spans=spans), prefix=x))
            for i, (p, x, c) in enumerate(made)]  # fmt: skip
    return reqs + [Request(10 + i, _src(i + 4), p) for i, p in enumerate(MIXED[:3])]


def _words(model) -> Words:
    starts = torch.zeros(model.cfg.tgt_vocab_size, dtype=torch.bool, device=model.device)
    starts[::2] = True
    return Words(starts, ~starts)


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=CUDA)])
def test_a_forced_prefix_is_decoded_in_one_pass(model, monkeypatch, device):
    # catches: a prefix whose K/V, history or log-probabilities differ from its steps', constraint columns not
    # replayed over it (a term met in the prefix wanted again, a window never opened), a request that still steps
    # through its prefix (the retry's cost), prefilled requests that differ batched, alone or overlapped (on the
    # GPU's CUDA lane too: bench/gpu/lanes.sh takes the files that name cuda)
    model = copy.deepcopy(model).to(device)
    reqs, words = _prefixed(), _words(model)
    tokens = lambda hyps: [h.tokens for h in hyps]  # noqa: E731
    scores = lambda hyps: [h.score for h in hyps]  # noqa: E731
    once = generate(model, reqs, words=words)
    assert [tokens(h) for h in generate(model, reqs, overlap=True, words=words)] == [tokens(h) for h in once]
    for r, got in zip(reqs, once, strict=True):
        assert tokens(generate(model, [r], words=words)[0]) == tokens(got)
        assert got[0].tokens[: len(r.params.prefix)] == list(r.params.prefix)
    loop = DecodeLoop(model, words=words)
    with torch.inference_mode():
        loop.join(loop.prefill(reqs))
    assert [s.steps for s in loop.state.seqs] == [len(r.params.prefix) for r in reqs]
    greedy = Request(20, _src(9), DecodeParams(max_new_tokens=12, prefix=(5, 6, 7)))  # books its tokens as it goes
    assert generate(model, [greedy, *reqs], words=words)[0][0].tokens[:3] == [5, 6, 7]
    monkeypatch.setattr(DecodeLoop, "_forced", lambda *_: None)  # the prefix forced one step at a time
    stepped = generate(model, reqs, words=words)
    assert [tokens(h) for h in stepped] == [tokens(h) for h in once]
    for got, want in zip(once, stepped, strict=True):
        assert scores(got) == pytest.approx(scores(want), abs=1e-4)
        for a, b in zip(got, want, strict=True):
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4, nan_ok=True)


def test_a_hyphen_stuck_to_a_word_goes_on_with_it():
    # catches: a term followed by "-" counted as a whole word ("El auto-prenado está", the model's "auto-" compound),
    # or a hyphen that opens a word, other punctuation and special tokens taken as going on with one
    pieces = ["", "\u2581auto", "-", "pren", ".", "\u2581-", "-1", ","]
    words = Words.of(pieces, torch.device("cpu"))
    assert words.joins.tolist() == [False, False, True, True, False, False, True, False]
    assert words.starts.tolist() == [False, True, False, False, False, True, False, False]
