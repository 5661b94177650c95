"""bench.workload's loads: the requests each sends, and the parameters the server (and so the offline engine) derives
from them on a checkpoint whose config asks for beam 4, as OPUS-MT's does."""

import pytest

from bench import marian
from bench.workload import bodies, load_fields, server_params
from model.checkpoint import load


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
