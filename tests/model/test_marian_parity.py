"""Our network and decoding equal Hugging Face `transformers` Marian on the same weights."""

import pytest
import torch

from model.loading.checkpoint import load
from model.runner.generate import generate
from model.runner.params import DecodeParams
from model.runner.search import Request

transformers = pytest.importorskip("transformers")

TEXTS = ["the cat runs", "a big red house near the river", "hello world", "naïve café über niño ¿qué?"]


@pytest.fixture(scope="module")
def pair(marian_dir):
    hf = transformers.MarianMTModel.from_pretrained(marian_dir).eval()
    tok = transformers.MarianTokenizer.from_pretrained(marian_dir)
    return hf, tok, load(marian_dir)


def test_tokenizer_matches_marian_tokenizer(pair):
    _, tok, ours = pair
    for text in TEXTS + [">>es<< the dog"]:
        assert ours.tokenizer.encode(text) == tok(text).input_ids
    ids = tok(TEXTS[3]).input_ids
    assert ours.tokenizer.decode(ids) == tok.decode(ids, skip_special_tokens=True)


@torch.inference_mode()
def test_logits_match(pair):
    hf, tok, ours = pair
    enc = tok(TEXTS, return_tensors="pt", padding=True)
    dec = torch.randint(2, 200, (len(TEXTS), 6))
    dec[:, 0] = hf.config.decoder_start_token_id
    ref = hf(**enc, decoder_input_ids=dec).logits
    got = ours.model(enc.input_ids, enc.attention_mask.bool(), dec)
    assert got.shape == ref.shape
    assert (got - ref).abs().max() < 1e-4


@pytest.mark.parametrize("beams", [1, 4])
@torch.inference_mode()
def test_generate_matches(pair, beams):
    hf, tok, ours = pair
    pad = hf.config.pad_token_id
    for text in TEXTS:
        enc = tok([text], return_tensors="pt")
        ref = hf.generate(**enc, num_beams=beams, max_new_tokens=12, bad_words_ids=[[pad]], do_sample=False)
        ref_ids = [i for i in ref[0].tolist()[1:] if i != pad]
        params = DecodeParams(beam_size=beams, max_new_tokens=12)
        hyp = generate(ours.model, [Request(0, ours.tokenizer.encode(text), params)])[0][0]
        got = hyp.tokens + ([ours.tokenizer.eos_id] if hyp.finish_reason == "eos" else [])
        assert got == ref_ids
        assert ours.tokenizer.decode(got) == tok.decode(ref[0], skip_special_tokens=True)


@torch.inference_mode()
def test_nbest_scores_match(pair):
    hf, tok, ours = pair
    enc = tok([TEXTS[1]], return_tensors="pt")
    ref = hf.generate(
        **enc,
        num_beams=4,
        num_return_sequences=3,
        max_new_tokens=10,
        bad_words_ids=[[hf.config.pad_token_id]],
        output_scores=True,
        return_dict_in_generate=True,
    )
    hyps = generate(ours.model, [Request(0, ours.tokenizer.encode(TEXTS[1]), DecodeParams(4, 3, max_new_tokens=10))])[0]
    assert [h.score for h in hyps] == pytest.approx(ref.sequences_scores.tolist(), abs=1e-4)


@pytest.fixture(scope="module")
def flat_pair(tmp_path_factory):
    """A Marian model with flat next-token distributions: its beams overtake each other and change rows."""
    from bench.harness.fixtures import make_marian

    path = make_marian(tmp_path_factory.mktemp("flat") / "opus-mt-en-es", seed=3, embed_std=0.1)
    hf = transformers.MarianMTModel.from_pretrained(path).eval()
    return hf, transformers.MarianTokenizer.from_pretrained(path), load(path)


@pytest.mark.parametrize(("beams", "length_penalty"), [(2, 1.0), (3, 0.6), (5, 1.3)])
@torch.inference_mode()
def test_every_beam_hypothesis_matches(flat_pair, beams, length_penalty):
    """All n-best outputs and scores, several beam widths, beams that overtake each other and change rows."""
    hf, tok, ours = flat_pair
    pad, eos = hf.config.pad_token_id, ours.tokenizer.eos_id
    for text in TEXTS:
        enc = tok([text], return_tensors="pt")
        ref = hf.generate(
            **enc,
            num_beams=beams,
            num_return_sequences=beams,
            max_new_tokens=20,
            length_penalty=length_penalty,
            bad_words_ids=[[pad]],
            output_scores=True,
            return_dict_in_generate=True,
        )
        params = DecodeParams(beams, beams, max_new_tokens=20, length_penalty=length_penalty)
        hyps = generate(ours.model, [Request(0, ours.tokenizer.encode(text), params)])[0]
        got = [h.tokens + ([eos] if h.finish_reason == "eos" else []) for h in hyps]
        assert got == [[i for i in row[1:] if i != pad] for row in ref.sequences.tolist()]
        assert [h.score for h in hyps] == pytest.approx(ref.sequences_scores.tolist(), abs=1e-4)
