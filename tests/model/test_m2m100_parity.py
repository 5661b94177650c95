"""NLLB-200 / M2M100 as `transformers` runs them: ids, logits, greedy and beam-4 outputs for two target languages of
one tiny random model, with the NLLB tokenizer and with M2M100Tokenizer."""

import pytest
import torch

from model.loading.checkpoint import load
from model.runner.generate import generate
from model.runner.params import DecodeParams
from model.runner.search import Request

transformers = pytest.importorskip("transformers")

TEXTS = ["the cat runs", "a big red house near the river", "hello world", "naïve café über niño ¿qué?", "la casa  roja"]
NLLB = {"en": "eng_Latn", "es": "spa_Latn", "fr": "fra_Latn", "de": "deu_Latn"}
PAD = 1


@pytest.fixture(scope="module", params=["nllb", "m2m100"])
def pair(request, tmp_path_factory):
    """(HF model, HF tokenizer, ours, code of a language for the HF tokenizer) on the same tiny checkpoint."""
    from bench.harness.fixtures import make_m2m100

    path = make_m2m100(tmp_path_factory.mktemp(request.param) / f"tiny-{request.param}", request.param, seed=3)
    hf = transformers.M2M100ForConditionalGeneration.from_pretrained(path).eval()
    if request.param == "nllb":
        tok, code = transformers.NllbTokenizer.from_pretrained(path), NLLB.get
    else:
        tok, code = transformers.M2M100Tokenizer.from_pretrained(path), lambda c: c
    return hf, tok, load(path), code


def hf_encode(tok, code, source: str, texts: list[str]):
    """The HF tokenizer's batch for `texts` in `source`."""
    tok.src_lang = code(source)
    return tok(texts, return_tensors="pt", padding=True)


def without_languages(ours, ids) -> list[int]:
    """Ids without language tokens: an M2M100Tokenizer built from files (not the hub's) keeps `__xx__` in decoded
    text even with skip_special_tokens; the hub's lists them as special tokens, as NLLB's tokenizer does."""
    return [i for i in ids.tolist() if i not in ours.languages.tokens.values()]


@pytest.mark.parametrize("source", ["en", "es"])
def test_source_ids_match(pair, source):
    """Language token first, then the pieces, then EOS: the same ids as the HF tokenizer, for two sources."""
    _, tok, ours, code = pair
    for text in TEXTS:
        tok.src_lang = code(source)
        assert ours.languages.prefix(source, "fr") + ours.tokenizer.encode(text) == tok(text).input_ids


def test_target_tokens_and_decoding_match(pair):
    """The forced first token is the target's language token; decoding drops it as HF's does with special tokens."""
    _, tok, ours, code = pair
    for target in ("es", "fr", "de"):
        lang_id = tok.get_lang_id(target) if hasattr(tok, "get_lang_id") else tok.convert_tokens_to_ids(code(target))
        assert ours.languages.forced_bos(target) == lang_id
    ids = tok(TEXTS[3]).input_ids
    assert ours.tokenizer.decode(ids) == tok.decode(ids[1:], skip_special_tokens=True)


@torch.inference_mode()
def test_logits_match(pair):
    hf, tok, ours, code = pair
    enc = hf_encode(tok, code, "en", TEXTS)
    dec = torch.randint(4, 300, (len(TEXTS), 6))
    dec[:, 0], dec[:, 1] = 2, ours.languages.forced_bos("es")
    ref = hf(**enc, decoder_input_ids=dec).logits
    got = ours.model(enc.input_ids, enc.attention_mask.bool(), dec)
    assert got.shape == ref.shape
    assert (got - ref).abs().max() < 1e-4


@pytest.mark.parametrize("beams", [1, 4])
@pytest.mark.parametrize("target", ["es", "fr"])
@torch.inference_mode()
def test_generate_matches(pair, beams, target):
    """Greedy and beam-4 ids and texts equal HF generate with forced_bos_token_id, for two targets of one model."""
    hf, tok, ours, code = pair
    forced = ours.languages.forced_bos(target)
    finished = 0
    for text in TEXTS:
        enc = hf_encode(tok, code, "en", [text])
        ref = hf.generate(**enc, num_beams=beams, max_new_tokens=16, forced_bos_token_id=forced, bad_words_ids=[[PAD]])
        params = DecodeParams(beam_size=beams, max_new_tokens=16, forced_bos_id=forced)
        hyp = generate(ours.model, [Request(0, enc.input_ids[0].tolist(), params)])[0][0]
        got = hyp.tokens + ([2] if hyp.finish_reason == "eos" else [])
        assert got == ref[0].tolist()[1:]
        assert ours.tokenizer.decode(got) == tok.decode(without_languages(ours, ref[0][2:]), skip_special_tokens=True)
        finished += hyp.finish_reason == "eos"
    assert 0 < finished < len(TEXTS)  # some end with EOS, some at the limit: both paths are compared


@torch.inference_mode()
def test_checkpoint_defaults_match_generate_defaults(tmp_path):
    """M2M100-style generation_config.json (num_beams 5, early_stopping, max_length): a request with no parameters
    decodes as HF generate() with none."""
    from bench.harness.fixtures import make_m2m100

    gen = {"num_beams": 5, "early_stopping": True, "max_length": 12}
    path = make_m2m100(tmp_path / "tiny-m2m", "m2m100", seed=3, generation=gen)
    hf, ours = transformers.M2M100ForConditionalGeneration.from_pretrained(path).eval(), load(path)
    tok = transformers.M2M100Tokenizer.from_pretrained(path)
    d = ours.defaults
    assert (d.beam_size, d.early_stopping, d.max_new_tokens) == (5, True, 11)
    for text in TEXTS:
        enc = hf_encode(tok, lambda c: c, "en", [text])
        ref = hf.generate(**enc, forced_bos_token_id=ours.languages.forced_bos("fr"), bad_words_ids=[[PAD]])
        forced = ours.languages.forced_bos("fr")
        params = DecodeParams(d.beam_size, max_new_tokens=d.max_new_tokens, early_stopping=True, forced_bos_id=forced)
        hyp = generate(ours.model, [Request(0, enc.input_ids[0].tolist(), params)])[0][0]
        assert hyp.tokens + ([2] if hyp.finish_reason == "eos" else []) == ref[0].tolist()[1:]
