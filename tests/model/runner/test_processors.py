"""History processors on the device (repetition penalty, no-repeat n-grams, bad words) against the host rules they
replaced, kept here as the oracle, on random histories of different lengths and mixed parameters."""

import random

import torch

from model.runner.params import DecodeParams
from model.runner.processors import Penalties, apply_penalties, force

NEG_INF = float("-inf")


def banned_ngram_tokens(history: list[int], n: int) -> list[int]:
    """Tokens that would complete an n-gram already present in `history`."""
    if n <= 0 or len(history) + 1 < n:
        return []
    prefix = tuple(history[len(history) - n + 1 :]) if n > 1 else ()
    return [history[i + n - 1] for i in range(len(history) - n + 1) if tuple(history[i : i + n - 1]) == prefix]


def banned_words(history: list[int], bad_words: tuple[tuple[int, ...], ...]) -> list[int]:
    """Last tokens of the bad word sequences whose other tokens end `history` (a one-token word: always)."""
    return [w[-1] for w in bad_words if len(w) == 1 or tuple(history[-len(w) + 1 :]) == w[:-1]]


def host_penalties(scores: torch.Tensor, histories: list[list[int]], params: list[DecodeParams]) -> torch.Tensor:
    """The host version: each row's penalty over its distinct past tokens, then its banned tokens."""
    for row, (history, p) in enumerate(zip(histories, params, strict=True)):
        if p.repetition_penalty != 1.0:
            ids = torch.tensor(sorted(set(history)))
            s = scores[row, ids]
            scores[row, ids] = torch.where(s < 0, s * p.repetition_penalty, s / p.repetition_penalty)
        banned = banned_ngram_tokens(history, p.no_repeat_ngram_size) + banned_words(history, p.bad_words_ids)
        scores[row, banned] = NEG_INF
    return scores


def test_the_oracle_rules():
    assert banned_ngram_tokens([5, 6, 7, 5], 2) == [6]
    assert banned_ngram_tokens([5, 6, 7], 3) == []
    assert banned_words([5, 7, 3], ((3, 4), (9,), (7, 4), (2, 3, 8))) == [4, 9]


def test_device_penalties_equal_the_host_rules():
    rng = random.Random(0)
    vocab = 12
    for trial in range(40):
        n = rng.randint(1, 6)
        params = [
            DecodeParams(
                repetition_penalty=rng.choice([1.0, 1.3, 0.7]),
                no_repeat_ngram_size=rng.choice([0, 1, 2, 3]),
                bad_words_ids=tuple(rng.sample([(4,), (3, 5), (2, 2, 7), (9, 9)], rng.randint(0, 3))),
            )
            for _ in range(n)
        ]
        histories = [[0] + [rng.randrange(2, 10) for _ in range(rng.randint(0, 9))] for _ in range(n)]
        width = max(len(h) for h in histories) + rng.randint(0, 3)
        inputs = torch.tensor([h + [rng.randrange(vocab) for _ in range(width - len(h))] for h in histories])
        scores = torch.randn(n, vocab, generator=torch.Generator().manual_seed(trial))
        want = host_penalties(scores.clone(), histories, params)
        lengths = torch.tensor([len(h) for h in histories])
        got = apply_penalties(scores.clone(), inputs, lengths, Penalties.of(params, scores.device))
        assert torch.equal(got, want), trial


def of(params: list[DecodeParams]) -> Penalties:
    """The penalties of rows with `params`, on the CPU."""
    return Penalties.of(params, torch.device("cpu"))


def test_one_token_bad_words_read_no_history():
    """OPUS-MT's ban of its pad token: no history given, the token's column is -inf in the rows that ban it."""
    params = [DecodeParams(bad_words_ids=((4,),)), DecodeParams(), DecodeParams(bad_words_ids=((4,), (2,)))]
    scores = apply_penalties(torch.zeros(3, 6), None, None, of(params))
    assert scores.isinf().nonzero().tolist() == [[0, 4], [2, 2], [2, 4]]
    assert apply_penalties(torch.zeros(2, 6), None, None, of(params[:1] * 2))[:, 4].isinf().all()


def test_forced_tokens_touch_only_forced_rows():
    """A forced row keeps 0 at its token and -inf elsewhere (transformers' ForcedBOS/EOS); every other row, -inf
    entries included, is left bit for bit (a sparse write that lost an unforced row's value at column 0, or forced the
    wrong column, fails)."""
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(5, 300, generator=g)
    scores[3, ::7] = NEG_INF
    forced = torch.tensor([-1, 0, 17, -1, 299])
    want = scores.clone()
    for row, token in enumerate(forced.tolist()):
        if token >= 0:
            want[row] = NEG_INF
            want[row, token] = 0.0
    assert force(scores, forced).equal(want)
    assert force(want.clone(), None).equal(want)
