"""bench.workload's loads: the requests each sends, and the parameters the server (and so the offline engine) derives
from them on a checkpoint whose config asks for beam 4, as OPUS-MT's does."""

import pytest

from bench import marian
from bench.workload import DEFAULT_MODEL, bodies, load_fields, one_unit, pick_sentences, server_params
from model.loading.checkpoint import describe, load


@pytest.fixture(scope="module")
def opus_mt(tmp_path_factory):
    """A tiny random Marian with OPUS-MT's generation config (num_beams 4, max_length 512)."""
    return load(marian.write_opus_mt(tmp_path_factory.mktemp("m") / "opus-mt-en-de", marian.TINY))


@pytest.mark.parametrize(("kind", "beams"), [("greedy", [1]), ("default", [4]), ("mixed", [4, 1])])
def test_a_load_decodes_with_the_beams_its_requests_get(opus_mt, kind, beams):
    """Greedy asks beam_size 1; default asks nothing and gets the checkpoint's 4; mixed alternates; all forced."""
    params = server_params(opus_mt, load_fields(kind, 8), 64)
    assert [p.beam_size for p in params] == beams
    assert all(p.max_new_tokens == p.min_new_tokens == 8 for p in params)


def test_requests_cycle_through_the_kinds():
    """Request i carries the parameters of kind i % kinds, and a streamed body."""
    sent = bodies(["a", "b", "c"], 4, load_fields("mixed", 8), True, ("en", "de"))
    assert ["beam_size" in b["parameters"] for b in sent] == [False, True, False, True]
    assert [b["q"] for b in sent] == ["a", "b", "c", "a"] and all(b["stream"] for b in sent)


def test_the_sentences_sent_are_each_one_request_of_the_server():
    """A text the server cuts in two (two sentences, or around what the vocabulary cannot spell) is two rows there and
    one offline: the picked texts are each one unit, so both sides decode the same rows."""
    tokenizer = describe(DEFAULT_MODEL).tokenizer
    assert one_unit("The house is big.", tokenizer)
    assert not one_unit("The house is big. The garden is small.", tokenizer)
    assert not one_unit("Press \u2603 to open the menu.", tokenizer)
    texts, ids, _ = pick_sentences(tokenizer, 32, 64, 0)
    assert len(texts) == 32 and all(map(one_unit, texts, [tokenizer] * 32))
    assert [tokenizer.encode(t) for t in texts] == ids and max(map(len, ids)) <= 64
