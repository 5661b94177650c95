"""Facts from the model notes: positional encoding, attention, masks, parameter counts, shapes, tying."""

import torch

from bench.harness.fixtures import tiny_config
from model.network import transformer
from model.network.config import ModelConfig
from model.network.layers import (
    ACT,
    FeedForward,
    MultiHeadAttention,
    attention,
    attention_chunks,
    causal_mask,
    sinusoidal_table,
)
from model.network.transformer import DecoderLayer, EncoderLayer, Seq2SeqTransformer
from model.runner.loop import pad_batch


def test_positional_encoding_values():
    pe = sinusoidal_table(10, 16)
    assert torch.allclose(pe[0], torch.tensor([0.0, 1.0] * 8))
    expected = torch.tensor([0.841, 0.540, 0.311, 0.950, 0.100, 0.995, 0.032, 1.000])
    assert torch.allclose(pe[1, :8], expected, atol=1e-3)
    assert torch.allclose(pe[2, :2], torch.tensor([0.909, -0.416]), atol=1e-3)


def test_halves_layout_puts_sines_first():
    inter, halves = sinusoidal_table(5, 16), sinusoidal_table(5, 16, "halves")
    assert torch.equal(halves[:, :8], inter[:, 0::2])
    assert torch.equal(halves[:, 8:], inter[:, 1::2])


def test_positional_table_is_a_buffer_that_moves_with_the_model():
    model = Seq2SeqTransformer(tiny_config(50))
    assert "pe" in dict(model.named_buffers())
    assert model.to(torch.float64).pe.dtype == torch.float64


def test_attention_rows_sum_to_one_and_masked_keys_get_no_weight():
    q, k, v = torch.randn(2, 4, 3, 8), torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8)
    mask = torch.tensor([True, True, True, False, False])[None, None, None, :]
    out, weights = attention(q, k, v, mask)
    assert out.shape == q.shape
    assert torch.allclose(weights.sum(-1), torch.ones(2, 4, 3))
    assert weights[..., 3:].abs().max() < 1e-9


def test_module_attention_equals_reference():
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    k, v = mha.project_kv(x)
    mask = causal_mask(5)[None, None]
    ref, _ = attention(mha.split(mha.q_proj(x)), k, v, mask)
    expected = mha.out_proj(ref.transpose(1, 2).reshape(2, 5, 16))
    assert torch.allclose(mha(x, k, v, mask), expected, atol=1e-6)


def test_causal_mask_has_no_nan_and_future_tokens_do_not_matter():
    mask = causal_mask(4)
    assert mask.tolist() == [[True, False, False, False], [True, True, False, False], [True] * 3 + [False], [True] * 4]
    model = Seq2SeqTransformer(tiny_config(100)).eval()
    src, src_mask = torch.randint(3, 100, (1, 6)), torch.ones(1, 6, dtype=torch.bool)
    a = torch.tensor([[0, 5, 6, 7, 8]])
    b = torch.tensor([[0, 5, 6, 90, 91]])
    la, lb = model(src, src_mask, a), model(src, src_mask, b)
    assert not torch.isnan(la).any()
    assert torch.allclose(la[:, :3], lb[:, :3], atol=1e-6)
    assert not torch.allclose(la[:, 3:], lb[:, 3:])


def test_parameter_counts_of_the_paper_shapes():
    cfg = ModelConfig(100, 100, d_model=512, n_heads=8, d_ff=2048)
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(MultiHeadAttention(512, 8)) == 1_050_624
    assert count(FeedForward(512, 2048, "relu")) == 2_099_712
    assert count(EncoderLayer(cfg)) == 3_152_384
    assert count(DecoderLayer(cfg)) == 4_204_032


def test_logits_shape_and_tied_output():
    model = Seq2SeqTransformer(tiny_config(100, tie_output=True)).eval()
    logits = model(torch.randint(3, 100, (2, 6)), torch.ones(2, 6, dtype=torch.bool), torch.randint(3, 100, (2, 4)))
    assert logits.shape == (2, 4, 100)
    assert model.out_proj.weight is model.tgt_embed.weight
    assert torch.allclose(logits.softmax(-1).sum(-1), torch.ones(2, 4))


def test_post_norm_and_activations_build_and_run():
    for act in ("relu", "gelu", "swish"):
        model = Seq2SeqTransformer(tiny_config(60, pre_norm=False, activation=act, tie_output=False)).eval()
        out = model(
            torch.randint(3, 60, (1, 4)), torch.ones(1, 4, dtype=torch.bool), torch.zeros(1, 2, dtype=torch.long)
        )
        assert out.shape == (1, 2, 60) and torch.isfinite(out).all()
        assert model.out_proj.weight is not model.tgt_embed.weight


def test_dropout_acts_while_training_only():
    model = Seq2SeqTransformer(tiny_config(60, dropout=0.3, activation_dropout=0.2)).init_weights()
    src, mask, tgt = torch.randint(3, 60, (2, 5)), torch.ones(2, 5, dtype=torch.bool), torch.randint(3, 60, (2, 4))
    torch.manual_seed(0)
    first = model.train()(src, mask, tgt)
    torch.manual_seed(0)
    assert torch.equal(model(src, mask, tgt), first)  # the same draws: the same masks
    assert not torch.allclose(model(src, mask, tgt), first)  # new draws
    evaluated = model.eval()(src, mask, tgt)
    assert torch.equal(model(src, mask, tgt), evaluated) and not torch.allclose(evaluated, first)


def test_each_dropout_reaches_its_own_modules():
    # catches: the FFN's inner mask or the attention weights' drawn at `dropout` (a sixth of a CPU training step for
    # a mask Hugging Face's and fairseq's configs leave off by default)
    cfg = tiny_config(60, dropout=0.3, attention_dropout=0.1, activation_dropout=0.2)
    model = Seq2SeqTransformer(cfg)
    kinds = {MultiHeadAttention: set(), FeedForward: set(), transformer.Residual: set()}
    for m in model.modules():
        if type(m) in kinds:
            kinds[type(m)].add(m.dropout)
    assert kinds == {MultiHeadAttention: {0.1}, FeedForward: {0.2}, transformer.Residual: {0.3}}
    assert ModelConfig(60, 60).attention_dropout == ModelConfig(60, 60).activation_dropout == 0.0


@torch.inference_mode()
def test_a_padded_batch_encodes_each_row_as_it_encodes_alone(monkeypatch):
    """Sources of 3 to 40 tokens: on CPU their attention runs in chunks of similar lengths, longest first; each row's
    memory equals its own encoding, zeros past its end; and equals the one-chunk encoding that CUDA runs."""
    torch.manual_seed(0)
    model = Seq2SeqTransformer(tiny_config(60)).eval()
    sources = [torch.randint(3, 60, (n,)).tolist() for n in (7, 40, 3, 17, 9, 40, 5)]
    src, mask = pad_batch(sources, model.cfg.pad_id, torch.device("cpu"))
    rows, chunks = attention_chunks(mask, split=True)
    assert [c.mask.shape for c in chunks] == [(2, 1, 1, 40), (2, 1, 1, 17), (2, 1, 1, 7), (1, 1, 1, 3)]
    assert rows.tolist()[:3] == [40, 41, 42] and sorted(rows.tolist()) == mask.flatten().nonzero()[:, 0].tolist()
    assert len(attention_chunks(mask, split=False)[1]) == 1
    memory = model.encode(src, mask)  # (B, S, d_model)
    for i, ids in enumerate(sources):
        alone = model.encode(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.bool))[0]
        torch.testing.assert_close(memory[i, : len(ids)], alone, atol=1e-5, rtol=1e-5)
        assert not memory[i, len(ids) :].any()
    monkeypatch.setattr(transformer, "attention_chunks", lambda mask, split: attention_chunks(mask, False))
    torch.testing.assert_close(model.encode(src, mask), memory, atol=1e-5, rtol=1e-5)


def test_the_in_place_activation_at_inference_equals_the_module():
    for name in ACT:
        ffn = FeedForward(8, 16, name).eval()
        x = torch.randn(2, 3, 8)
        recorded = ffn(x)  # autograd records: the activation module, out of place
        recorded.sum().backward()
        with torch.inference_mode():
            assert torch.equal(ffn(x), recorded), name
