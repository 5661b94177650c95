"""The vocabulary projection screened in bf16: float32's values wherever a search chooses, float32's tokens and
nearly its scores in a decode, the whole row in float32 where the screen cannot vouch for its best, and only where
it pays (a float32 CPU model, a large vocabulary, bf16 dot products)."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from model.network import precision, screened
from model.network.config import ModelConfig
from model.network.packed import available
from model.network.screened import CERTIFIED, ERROR, MIN_VOCAB, SCREEN, ScreenedLinear
from model.network.transformer import Seq2SeqTransformer
from model.runner.generate import generate
from model.runner.params import DecodeParams
from model.runner.search import Request


def _bf16_linear() -> bool:
    """oneDNN runs a prepacked bf16 linear on this CPU (natively or emulated)."""
    try:
        packed = torch.ops.mkldnn._reorder_linear_weight(torch.ones(8, 8, dtype=torch.bfloat16))
        torch.ops.mkldnn._linear_pointwise(torch.ones(1, 8, dtype=torch.bfloat16), packed, None, "none", [], "")
    except RuntimeError:
        return False
    return True


pytestmark = pytest.mark.skipif(not (available() and _bf16_linear()), reason="needs oneDNN's bf16 linear")


def test_the_best_logits_are_float32s_and_the_rest_within_the_bound():
    # catches: a screen that keeps bf16 values where a search chooses, or a bias left out of the screen
    torch.manual_seed(0)
    linear, x, bias = nn.Linear(64, 5000, bias=False), torch.randn(6, 64) * 3, torch.randn(5000)
    with torch.no_grad():
        want, got = F.linear(x, linear.weight, bias), ScreenedLinear.of(linear)(x, bias)
        top = want.topk(CERTIFIED, dim=1).indices  # (float32 sums in another order: rounding apart)
        torch.testing.assert_close(got.gather(1, top), want.gather(1, top), rtol=1e-6, atol=1e-6)
        assert torch.equal(got.argmax(1), want.argmax(1))
        bound = ERROR * linear.weight.norm(dim=1).max() * x.norm(dim=1, keepdim=True)
        assert bool(((got - want).abs() <= bound).all()) and not torch.equal(got, want)  # the rest is bf16's


def test_a_row_the_screen_cannot_vouch_for_is_computed_whole_in_float32():
    # catches: near ties down the screen decided on bf16 values (the CERTIFIED best not clear of the bound)
    torch.manual_seed(0)
    linear = nn.Linear(64, 2000, bias=False)
    with torch.no_grad():
        linear.weight[: SCREEN + CERTIFIED] = linear.weight[0] * (1 + 1e-4 * torch.rand(SCREEN + CERTIFIED, 1))
        x = torch.stack([linear.weight[0] * 5, torch.randn(64)])  # row 0: hundreds of near-equal best logits
        got = ScreenedLinear.of(linear)(x)
        assert torch.equal(got[0], F.linear(x[:1], linear.weight)[0])  # whole in float32
        assert not torch.equal(got[1], F.linear(x[1:], linear.weight)[0])  # the other row screened


def test_a_screened_model_decodes_float32s_tokens():
    # catches: a screen that changes a greedy or beam search's tokens, or its scores beyond the bound's reach
    torch.manual_seed(0)
    cfg = ModelConfig(src_vocab_size=MIN_VOCAB, tgt_vocab_size=MIN_VOCAB, d_model=64, n_heads=4, encoder_layers=1,
                      decoder_layers=2, d_ff=128, share_embeddings=True, pre_norm=True)  # fmt: skip
    net = Seq2SeqTransformer(cfg).eval()
    with torch.no_grad():
        net.tgt_embed.weight.mul_(8.0)  # peaked logits, as a trained model's
    plain = precision.prepare(copy.deepcopy(net), "float32", screen=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(precision, "cpu_flags", lambda: {"avx512_bf16"})
        screen = precision.prepare(net, "float32")
    assert screened.screened(screen) and not screened.screened(plain)
    g = torch.Generator().manual_seed(1)
    srcs = [torch.randint(3, MIN_VOCAB, (n,), generator=g).tolist() + [1] for n in (4, 9, 15)]
    for beam in (1, 4):
        params = DecodeParams(beam_size=beam, num_hypotheses=beam, max_new_tokens=12)
        with torch.inference_mode():
            want, got = (generate(m, [Request(i, s, params) for i, s in enumerate(srcs)]) for m in (plain, screen))
        for a, b in zip(want, got, strict=True):
            assert [h.tokens for h in a] == [h.tokens for h in b]
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-3)


@pytest.mark.parametrize(
    "flags, vocab, dtype, wanted",
    [
        ({"avx512_bf16"}, MIN_VOCAB, "float32", True),
        ({"amx_bf16"}, MIN_VOCAB, "float32", True),
        ({"avx2"}, MIN_VOCAB, "float32", False),  # no bf16 dot products: bf16 runs slower than float32
        ({"avx512_bf16"}, MIN_VOCAB - 1, "float32", False),  # a small vocabulary: not worth a screen
        ({"avx512_bf16"}, MIN_VOCAB, "int8-ffn", False),
    ],
)
def test_only_a_large_float32_projection_on_a_cpu_with_bf16_dot_products_is_screened(
    monkeypatch, flags, vocab, dtype, wanted
):
    monkeypatch.setattr(precision, "cpu_flags", lambda: flags)
    cfg = ModelConfig(src_vocab_size=100, tgt_vocab_size=vocab, d_model=16, n_heads=2, encoder_layers=1,
                      decoder_layers=1, d_ff=32)  # fmt: skip
    assert screened.screened(precision.prepare(Seq2SeqTransformer(cfg), dtype)) is wanted


def test_at_many_rows_a_row_the_narrow_screen_cannot_vouch_for_gets_the_wide_one():
    # catches: a row of a large batch (its screen narrowed to save the gather) whose best are near ties past the narrow
    # screen left on bf16 values, or sent whole to float32 when the wide screen vouches for it
    torch.manual_seed(0)
    linear = nn.Linear(64, 4000, bias=False)
    with torch.no_grad():
        linear.weight[:100] = linear.weight[0] * (1 + 1e-3 * torch.rand(100, 1))  # 100 near ties in row 0
        x = torch.cat([linear.weight[:1] * 5, torch.randn(63, 64)])  # 64 rows: a narrow screen (32) each
        screen = ScreenedLinear.of(linear)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(screened.F, "linear", lambda *a: pytest.fail("a row computed whole in float32"))
            got = screen(x)
        want = F.linear(x, linear.weight)
    torch.testing.assert_close(got[0, :100], want[0, :100], rtol=1e-6, atol=1e-6)  # every tie in float32
    assert torch.equal(got.argmax(1), want.argmax(1)) and not torch.equal(got[0], want[0])
