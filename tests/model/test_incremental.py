"""Incremental decoding over the decode state equals recomputing the whole prefix: with the pool growing, with rows at
different positions, and with requests joining and leaving (rows and slots moving in place) between steps."""

import random

import pytest
import torch

from bench.harness.fixtures import tiny_config
from model.network.transformer import Seq2SeqTransformer
from model.runner.eager import Eager
from model.runner.params import DecodeParams
from model.runner.search import Request
from model.runner.state import DecodeState, Encoded


def _model(**kw) -> Seq2SeqTransformer:
    torch.manual_seed(0)
    return Seq2SeqTransformer(tiny_config(80, **kw)).eval()


def _join(runner: Eager, state: DecodeState | None, ids: list[int], src, mask, beam: int = 1) -> DecodeState:
    """Requests `ids` (sources src (n, S), mask (n, S)) encoded and joined to `state` (a new one when None)."""
    ck, cv = runner.cross_kv(runner.encode(src, mask))
    state = state or DecodeState(runner.pool(ck), runner.cfg)
    state.add(Encoded([Request(i, [], DecodeParams(beam_size=beam)) for i in ids], ck, cv, mask))
    return state


def _step(runner: Eager, state: DecodeState, tokens) -> torch.Tensor:
    """One teacher-forced step: every row's next input given; logits (N, V)."""
    state.prepare()
    state.tokens = torch.as_tensor(tokens)
    logits = runner.step_logits(state)
    state.count_step()
    return logits


@pytest.mark.parametrize("kw", [{}, {"pre_norm": False, "activation": "swish", "final_logits_bias": True}])
@torch.inference_mode()
def test_incremental_equals_full_recomputation(kw):
    """Three sources (one padded) decoded step by step from an empty pool that grows: every step's logits equal the
    teacher-forced decoder's over the whole prefix."""
    model = _model(**kw)
    runner = Eager(model)
    src = torch.randint(3, 80, (3, 7))
    src_mask = torch.ones(3, 7, dtype=torch.bool)
    src_mask[1, 4:] = False
    tgt = torch.randint(3, 80, (3, 40))
    tgt[:, 0] = 0
    full = model(src, src_mask, tgt)
    state = _join(runner, None, [0, 1, 2], src, src_mask)
    steps = torch.stack([_step(runner, state, tgt[:, i]) for i in range(40)], dim=1)  # past the first pool size
    assert torch.allclose(full, steps, atol=1e-5)
    assert full.argmax(-1).equal(steps.argmax(-1))


@pytest.mark.parametrize("seed", range(3))
@torch.inference_mode()
def test_joins_and_leaves_between_steps_equal_each_request_alone(seed):
    """Requests join at random steps (rows at different positions, sources of different lengths) and random ones
    leave (rows and slots move to fill the gaps, in place): every live row's logits at every step equal its own
    request's teacher-forced decoder over its whole prefix; the host's counts agree with the device."""
    rng = random.Random(seed)
    model = _model()
    runner = Eager(model)
    n, length = 12, 14
    src = torch.randint(3, 80, (n, 9))
    mask = torch.arange(9)[None, :] < torch.tensor([rng.randint(2, 9) for _ in range(n)])[:, None]
    tgt = torch.randint(3, 80, (n, length))
    tgt[:, 0] = 0
    full = model(src, mask, tgt)  # (n, length, V): each request alone
    state, waiting, rows_of = None, list(range(n)), {}
    for _ in range(60):
        if waiting and (state is None or rng.random() < 0.4):
            take, waiting = waiting[: rng.randint(1, 3)], waiting[rng.randint(1, 3) :][: len(waiting)]
            take = [i for i in take if i not in rows_of]
            if take:
                state = _join(runner, state, take, src[take], mask[take])
        if state is not None and rng.random() < 0.3 and len(state.seqs) > 1:
            gone = rng.choice(state.seqs).id
            state.narrow([(s, s.width) for s in state.seqs if s.id != gone])
        if state is None or not state.seqs:
            continue
        live = [s for s in state.seqs if s.steps < length]
        state.narrow([(s, s.width) for s in live])
        if not live:
            continue
        logits = _step(runner, state, [tgt[s.id, s.steps] for s in state.seqs])
        for row, s in enumerate(state.seqs):
            assert torch.allclose(logits[row], full[s.id, s.steps - 1], atol=1e-5), (s.id, s.steps)
            rows_of[s.id] = row
        assert state.pool.positions[: state.rows].tolist() == state.row_steps()
        assert state.pool.positions[state.rows : state.pool.sizes[0]].eq(0).all()
        assert state.cache_tokens() == sum(int(mask[s.id].sum()) + s.steps for s in state.seqs)
    assert len(rows_of) >= 8


@torch.inference_mode()
def test_beam_rows_reorder_on_the_device_as_they_move_between_steps():
    """A request's rows (beams) take each other's self-attention K/V from a device index (pool.reorder, as a beam step
    does) exactly as the host-indexed move does; slots and positions stay."""
    model = _model()
    runner = Eager(model)
    src = torch.randint(3, 80, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.bool)
    one = _join(runner, None, [0, 1], src, mask, beam=3)
    two = _join(runner, None, [0, 1], src, mask, beam=3)
    for parents in ([1, 1, 0, 4, 3, 3], [0, 2, 1, 5, 5, 5], [2, 2, 2, 3, 4, 5]):
        tokens = torch.randint(3, 80, (6,))
        _step(runner, one, tokens)
        _step(runner, two, tokens)
        moved = [i for i, p in enumerate(parents) if p != i]
        dst, src_rows = torch.tensor(moved), torch.tensor([parents[i] for i in moved])
        one.pool.reorder(dst, src_rows, one.max_length)
        two.pool.move_rows(dst, src_rows, two.max_length)
        t = one.max_length
        assert torch.equal(one.pool.k[:, :6, :, :t], two.pool.k[:, :6, :, :t])
        assert torch.equal(one.pool.v[:, :6, :, :t], two.pool.v[:, :6, :, :t])
        assert torch.equal(one.pool.positions, two.pool.positions) and one.row_slots == [0, 0, 0, 1, 1, 1]
