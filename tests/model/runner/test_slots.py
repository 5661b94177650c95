"""Source slots: a request's rows read one copy of its cross-attention K/V; the step's layouts and the grouped
attention equal attending over a copy per row; the two-stage top-k equals `topk`."""

import pytest
import torch

from model.network.layers import MultiHeadAttention, additive_mask
from model.runner.choice import row_topk
from model.runner.slots import Groups, group, plan


def test_layouts():
    """One row per slot: no layout (row i reads slot i); equal blocks: no index; anything else: gathered, each slot's
    spare places repeating its first row."""
    cpu = torch.device("cpu")
    assert group([0, 1, 2], 3, cpu) is None and group([], 0, cpu) is None
    assert group([0, 0, 1, 1], 2, cpu) == Groups(2)
    mixed = group([0, 1, 1, 2], 3, cpu)
    assert mixed.width == 2 and mixed.gather.tolist() == [0, 0, 1, 2, 3, 3] and mixed.scatter.tolist() == [0, 2, 3, 4]
    assert plan([1, 0, 1], 4, 3) == ([1, 1, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0], [3, 0, 4])  # padded slots: row 0, unread
    few = group([0, 1, 1, 1, 2, 3, 4], 5, cpu)  # one beam of 3 among greedy rows: split (2 x 1 x 3 < 5 x 2)
    assert few.width == 1 and few.gather.tolist() == [0, 1, 4, 5, 6] and few.wide_slots.tolist() == [1]
    assert few.wide.width == 3 and few.wide.gather.tolist() == [1, 2, 3]
    assert few.scatter.tolist() == [0, 5, 6, 7, 2, 3, 4]  # the beam's rows read the wide part, after the 5 places
    assert group([0, 1, 1, 1, 2, 3, 4], 5, torch.device("meta")).wide is None  # a GPU: one padded layout


@pytest.mark.parametrize("heads", [2, 8])  # 2 x G < 32: scaled_dot_product_attention; 8 x G >= 32: batched GEMVs
@pytest.mark.parametrize(
    "row_slots", [[0, 1, 2, 3], [0, 0, 0, 1, 1, 1], [2, 0, 1, 1, 2, 3, 1], [0, 1, 1, 1, 1, 2], [3, 0, 1, 1, 1, 2, 4, 5]]
)
@torch.inference_mode()
def test_grouped_attention_equals_a_copy_per_row(heads, row_slots):
    """Each row's query over its slot's keys, values and source mask, through the layout, equals the query over
    per-row copies (the layout of the cache before slots)."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(8 * heads, heads).eval()
    slots, n = max(row_slots) + 1, len(row_slots)
    k, v = mha.project_kv(torch.randn(slots, 7, 8 * heads))  # (G, H, S, D) each
    mask = torch.arange(7)[None, :] < torch.tensor([7 - i for i in range(slots)])[:, None]  # (G, S)
    bias = additive_mask(mask, torch.float32)[:, None, None, :]  # (G, 1, 1, S)
    x = torch.randn(n, 1, 8 * heads)
    at = torch.tensor(row_slots)
    want = mha(x, k[at], v[at], bias[at])
    layout = group(row_slots, slots, torch.device("cpu")) or Groups(1)
    torch.testing.assert_close(mha(x, k, v, bias, layout), want, atol=1e-6, rtol=1e-5)
    out, mean = mha.aligned(x, k, v, bias, layout, (0, heads - 1))  # the step's output and its alignment, at once
    torch.testing.assert_close(out, want, atol=1e-6, rtol=1e-5)
    q = mha.split(mha.q_proj(x))  # (n, H, 1, D) against each row's own slot
    probs = (q @ k[at].transpose(-2, -1) * q.shape[-1] ** -0.5 + bias[at]).softmax(-1)[:, :, 0]  # (n, H, S)
    torch.testing.assert_close(mean, (probs[:, 0] + probs[:, heads - 1]) / 2, atol=1e-6, rtol=1e-5)


def test_two_stage_topk_equals_topk():
    """Rows of a vocabulary that chunks evenly (8000 = 250 x 32) and one that does not (a prime: whole chunks of 128
    and a tail, as NLLB's 256,206); the largest values clustered in one chunk, in the tail, or spread, and -inf entries
    (banned tokens). Dropping the tail's columns, or a chunk that holds one of the k largest, fails it."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 8000, generator=g)
    x[1, 64:72] += 10.0  # the 8 largest in one chunk
    x[2, ::2] = float("-inf")
    for k in (1, 8, 16):
        assert all(a.equal(b) for a, b in zip(row_topk(x, k), x.topk(k, dim=-1), strict=True))
    odd = torch.randn(4, 7919, generator=g)
    odd[1, -5:] += 10.0  # among the 8 largest: the last 5 columns, past the last whole chunk
    odd[2, 7000:7008] += 10.0
    odd[3, ::3] = float("-inf")
    for k in (1, 8):
        assert all(a.equal(b) for a, b in zip(row_topk(odd, k), odd.topk(k, dim=-1), strict=True))
