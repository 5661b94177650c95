"""int8-ffn, int8, bfloat16 and auto serving of the built-in model: a real server per precision, its greedy
translations of the everyday phrases against float32's (chrF within 0.5, at least 95% identical; int8 90%)."""

import httpx
import pytest
import sacrebleu
import torch

from app.settings import BUILTIN
from bench.harness.server import ServerProcess
from model.checkpoint import load
from model.generate import generate
from model.params import DecodeParams
from model.precision import choose
from model.search import Request
from training.common import EVERYDAY, read_tsv

PHRASES = read_tsv(EVERYDAY)[:64]  # one POST (max_items 64); the full sets are measured by training.precision
# int8 quantizes activations per call, over the whole batch: which of its near-ties flip depends on the batch and on
# float32 noise upstream (the Handbook test: 79-83.5% identical, docs/benchmarks.md). These 64 phrases in one batch
# measured 95.3-98.4% across equally good encoders on an AVX2 CPU; 95% would test the luck of this batch.
IDENTICAL = {"int8": 0.90}


@pytest.fixture(scope="module")
def float32():
    """The float32 translations of the phrases, offline."""
    ck = load(BUILTIN)
    reqs = [Request(i, ck.tokenizer.encode(en), DecodeParams(max_new_tokens=64)) for i, (en, _) in enumerate(PHRASES)]
    with torch.inference_mode():
        return [ck.tokenizer.decode(h[0].tokens) for h in generate(ck.model, reqs)]


@pytest.mark.parametrize("dtype", ["int8-ffn", "int8", "bfloat16", "auto"])
def test_lower_precision_serves_within_the_quality_bounds(dtype, float32):
    proc = ServerProcess("--dtype", dtype, "--warmup-rounds", "1").wait()  # the built-in model
    try:
        (m,) = httpx.get(proc.url + "/info").json()["models"]
        body = {"q": [en for en, _ in PHRASES], "source": "en", "target": "es", "parameters": {"max_new_tokens": 64}}
        r = httpx.post(proc.url + "/translate", json=body, timeout=120)
    finally:
        proc.stop()
    assert (m["dtype"], m["dtype_reason"], m["device"]) == (*choose(dtype, "cpu"), "cpu")
    assert r.status_code == 200, r.text
    got, refs = r.json()["translatedText"], [[es for _, es in PHRASES]]
    identical = sum(a == b for a, b in zip(got, float32, strict=True)) / len(got)
    assert identical >= IDENTICAL.get(dtype, 0.95), [(a, b) for a, b in zip(got, float32, strict=True) if a != b]
    chrf = sacrebleu.corpus_chrf(got, refs).score
    assert abs(chrf - sacrebleu.corpus_chrf(float32, refs).score) <= 0.5
