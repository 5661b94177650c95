"""Alternatives are distinct from the translation and from each other, even when beams differ only in tokens that
decode to nothing (unknown or language tokens)."""

from types import SimpleNamespace

from app.api.answers import alternatives
from app.engine.messages import Hyp, Result
from app.job import Job
from app.text import plain_layout
from model.runner.params import DecodeParams


def test_alternatives_skip_texts_already_given(checkpoint):
    tok = checkpoint.tokenizer
    a, b = tok.encode("el gato")[:-1], tok.encode("la casa")[:-1]
    nbest = [a, a + [tok.unk_id], b, [tok.unk_id] + b, a + b]  # decode: A, A, B, B, A B
    assert len({tok.decode(t) for t in nbest}) == 3
    job = Job(SimpleNamespace(checkpoint=checkpoint), [plain_layout("the cat", False)], DecodeParams(5, 5), 256)
    hyps = [Hyp(t, -float(i), "eos") for i, t in enumerate(nbest)]
    job.items[0].units[0].result = Result(1, hyps, 0.0, 0.0)
    item = job.items[0]
    assert job.texts(item) == tok.decode(a)
    assert alternatives(job, item, 3) == [tok.decode(b), tok.decode(a + b)]
    assert alternatives(job, item, 1) == [tok.decode(b)]
