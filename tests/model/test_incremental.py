"""Incremental decoding over the cache equals recomputing the whole prefix; the cache as a value."""

import torch

from bench.harness.fixtures import tiny_config
from model.runner.eager import Eager
from model.transformer import Seq2SeqTransformer
from tests.model.runner.cache_oracle import nbytes, select, tokens


def _model(**kw) -> Seq2SeqTransformer:
    torch.manual_seed(0)
    return Seq2SeqTransformer(tiny_config(80, **kw)).eval()


@torch.inference_mode()
def test_incremental_equals_full_recomputation():
    for kw in ({}, {"pre_norm": False, "activation": "swish", "final_logits_bias": True}):
        model = _model(**kw)
        src = torch.randint(3, 80, (3, 7))
        src_mask = torch.ones(3, 7, dtype=torch.bool)
        src_mask[1, 4:] = False
        tgt = torch.randint(3, 80, (3, 9))
        tgt[:, 0] = 0
        full = model(src, src_mask, tgt)
        cache = Eager(model).start_cache(model.encode(src, src_mask), src_mask, capacity=2)  # forces growth
        steps = torch.stack([Eager(model).decode_step(tgt[:, i], cache) for i in range(9)], dim=1)
        assert torch.allclose(full, steps, atol=1e-5)
        assert full.argmax(-1).equal(steps.argmax(-1))


@torch.inference_mode()
def test_rows_at_different_positions_share_a_batch():
    """A row that joins later (concat) decodes exactly as it would alone."""
    model = _model()
    src = torch.randint(3, 80, (2, 5))
    mask = torch.ones(2, 5, dtype=torch.bool)
    tgt = torch.randint(3, 80, (2, 6))
    tgt[:, 0] = 0
    full = model(src, mask, tgt)
    first = Eager(model).start_cache(model.encode(src[:1], mask[:1]), mask[:1])
    for i in range(3):
        Eager(model).decode_step(tgt[:1, i], first)
    second = Eager(model).start_cache(model.encode(src[1:, :3], mask[1:, :3]), mask[1:, :3])
    joined = select(first, range(first.rows))
    joined.append_(second)
    assert joined.lengths.tolist() == [3, 0]
    out = Eager(model).decode_step(torch.stack([tgt[0, 3], tgt[1, 0]]), joined)
    alone = model(src[1:, :3], mask[1:, :3], tgt[1:, :1])
    assert torch.allclose(out[0], full[0, 3], atol=1e-5)
    assert torch.allclose(out[1], alone[0, 0], atol=1e-5)


@torch.inference_mode()
def test_cache_select_filters_reorders_and_reports_size():
    model = _model()
    src = torch.randint(3, 80, (3, 4))
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[2, 2:] = False
    cache = Eager(model).start_cache(model.encode(src, mask), mask)
    Eager(model).decode_step(torch.zeros(3, dtype=torch.long), cache)
    assert tokens(cache) == 3 * 1 + 4 + 4 + 2
    per_token = 2 * model.cfg.decoder_layers * model.cfg.d_model * 4  # K and V, fp32
    assert nbytes(cache) == 3 * (cache.capacity + 4) * per_token
    picked = select(cache, [2, 2, 0])
    assert picked.row_slots == [0, 0, 1] and picked.src_lens == [2, 4]  # rows 0 and 1 share one copy of the source
    assert torch.equal(picked.self_k[:, 0], cache.self_k[:, 2, :, : picked.capacity])
    assert torch.equal(picked.cross_k[:, 0, :, :2], cache.cross_k[:, 2, :, :2])
    assert torch.equal(picked.cross_k[:, 1], cache.cross_k[:, 0])
    assert tokens(picked) == 3 * 1 + 2 + 4  # each source counted once
    kept = select(cache, [2])
    assert kept.src_mask.shape == (1, 2)  # the source buffer shrinks to the longest remaining row


@torch.inference_mode()
def test_in_place_take_equals_the_copying_select():
    """take_ (rows move in place, beams reorder) leaves every live row as select (a fresh gather) builds it, and every
    row reads the source of the row it copied, from a slot its request's rows share."""
    model = _model()
    src = torch.randint(3, 80, (6, 7))
    mask = torch.ones(6, 7, dtype=torch.bool)
    mask[1, 3:] = mask[4, 5:] = False
    cache = Eager(model).start_cache(model.encode(src, mask), mask)
    for _ in range(5):
        Eager(model).decode_step(torch.randint(3, 80, (6,)), cache)
    late = Eager(model).start_cache(model.encode(src[:2, :4], mask[:2, :4]), mask[:2, :4])
    Eager(model).decode_step(torch.randint(3, 80, (2,)), late)
    cache.append_(late)  # rows of different lengths: 5, 5, 5, 5, 5, 5, 1, 1
    # rows 0-4 after the first take_ have lengths 1, 5, 5, 5, 5; the second makes 3 slots of 2 rows (blocks), the
    # third mixes widths 1 and 2 (gathered), the fourth reorders within slots only
    for parents in ([7, 2, 2, 0, 5], [3, 3, 4, 4, 0, 0], [4, 2, 5, 3], [1, 0, 3, 2]):
        expected = select(cache, parents)
        old = [cache.row_slots[p] for p in parents]
        sources = [(cache.cross_k[:, slot].clone(), cache.src_lens[slot]) for slot in old]  # before they move
        cache.take_(parents)
        t = expected.max_length
        assert cache.rows == len(parents) and cache.max_length == t
        lengths = cache.lengths.tolist()  # the python copies agree with the device
        assert (cache.max_length, cache.uniform) == (max(lengths), min(lengths) == max(lengths))
        assert cache.src_len == int(cache.src_mask.sum(1).max())
        assert cache.row_slots == expected.row_slots and cache.src_lens == expected.src_lens
        assert cache.slots == len(set(cache.row_slots)) == len(set(old))
        assert torch.equal(cache.lengths, expected.lengths)
        assert torch.equal(cache.src_mask, expected.src_mask)
        for row, length in enumerate(cache.lengths.tolist()):
            assert torch.equal(cache.self_k[:, row, :, :length], expected.self_k[:, row, :, :length])
            assert torch.equal(cache.self_v[:, row, :, :length], expected.self_v[:, row, :, :length])
            keys, n = sources[row]
            assert torch.equal(cache.cross_k[:, cache.row_slots[row], :, :n], keys[:, :, :n])
        for slot, n in enumerate(cache.src_lens):
            assert torch.equal(cache.cross_v[:, slot, :, :n], expected.cross_v[:, slot, :, :n])


def test_device_reorder_equals_take_within_requests():
    """reorder_ (beams reordering within their requests from a device index, as the overlap scheduler does) leaves
    every row as take_ does from the same parents, slots and lengths unchanged."""
    model = _model()
    src = torch.randint(3, 80, (3, 6))
    mask = torch.ones(3, 6, dtype=torch.bool)
    cache = Eager(model).start_cache(model.encode(src, mask), mask)
    cache.take_([0, 0, 1, 1, 1, 2])  # requests of 2, 3 and 1 rows
    other = Eager(model).start_cache(model.encode(src, mask), mask)
    other.take_([0, 0, 1, 1, 1, 2])
    for parents in ([1, 1, 4, 2, 2, 5], [0, 1, 3, 3, 4, 5], [1, 0, 4, 3, 2, 5]):
        tokens = torch.randint(3, 80, (6,))
        Eager(model).decode_step(tokens, cache)
        Eager(model).decode_step(tokens, other)
        cache.take_(parents)
        moved = [i for i, p in enumerate(parents) if p != i]
        other.reorder_(torch.tensor(moved), torch.tensor([parents[i] for i in moved]))
        assert other.row_slots == cache.row_slots and torch.equal(other.lengths, cache.lengths)
        t = cache.max_length
        assert torch.equal(other.self_k[:, :, :, :t], cache.self_k[:, :, :, :t])
        assert torch.equal(other.self_v[:, :, :, :t], cache.self_v[:, :, :, :t])
