"""mBART-50's network (learned offset positions, norm after the embedding, pre-LN) is our one model class, equal to
`transformers`' MBartForConditionalGeneration on the same weights."""

import pytest
import torch

from model.loading.hf import hf_config, hf_state
from model.network.transformer import Seq2SeqTransformer
from model.runner.generate import generate
from model.runner.params import DecodeParams
from model.runner.search import Request

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def pair():
    from bench.harness.fixtures import hf_shape

    ids = dict(pad_token_id=1, eos_token_id=2, decoder_start_token_id=2)
    cfg = transformers.MBartConfig(vocab_size=120, scale_embedding=True, **ids, **hf_shape(positions=64))
    torch.manual_seed(0)
    hf = transformers.MBartForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        for module in hf.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.normal_(0, 3 / module.weight.shape[1] ** 0.5)
        hf.model.shared.weight.normal_(0, 0.5)
        hf.final_logits_bias.normal_(0, 0.5)
        for side in (hf.model.encoder, hf.model.decoder):
            side.embed_positions.weight.normal_(0, 0.5)
    ours = Seq2SeqTransformer(hf_config(cfg.to_dict()))
    ours.load_state_dict(hf_state(hf.state_dict(), ours.cfg), strict=True)
    return hf, ours.eval()


@torch.inference_mode()
def test_logits_match_with_padding(pair):
    hf, ours = pair
    src = torch.tensor([[100, 5, 6, 7, 8, 2], [101, 9, 10, 2, 1, 1]])
    mask = src != 1
    dec = torch.tensor([[2, 102, 11, 12], [2, 103, 13, 14]])
    ref = hf(input_ids=src, attention_mask=mask.long(), decoder_input_ids=dec).logits
    assert (ours(src, mask, dec) - ref).abs().max() < 1e-4


@pytest.mark.parametrize("beams", [1, 4])
@torch.inference_mode()
def test_generate_matches_with_forced_target_and_eos_tokens(pair, beams):
    hf, ours = pair
    for src in ([100, 5, 6, 7, 8, 2], [101, 9, 10, 2], [100, 30, 31, 32, 33, 34, 35, 2]):
        ref = hf.generate(torch.tensor([src]), num_beams=beams, max_new_tokens=10, forced_bos_token_id=103,
                          bad_words_ids=[[1]])
        params = DecodeParams(beam_size=beams, max_new_tokens=10, forced_bos_id=103, forced_eos=True)  # mBART's config
        hyp = generate(ours, [Request(0, src, params)])[0][0]
        assert hyp.tokens + [2] * (len(hyp.tokens) < 10) == ref[0].tolist()[1:]  # EOS, chosen or forced, ends it
