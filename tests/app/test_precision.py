"""int8-ffn, int8, bfloat16 and auto on the built-in model: each precision's greedy translations of the everyday
phrases against float32's, in-process as the engine batches one 64-phrase request, the target's token first (chrF
no more than 0.5 below, at least 95% identical; int8 90%); and one real server started with --dtype, as an
operator starts it."""

import pytest
import sacrebleu

from app.settings import BUILTIN
from bench.harness.client import HTTP
from bench.harness.server import ServerProcess
from model.loading.checkpoint import load
from model.network.precision import choose
from tests.model.test_builtin import translate_all
from training.common import EVERYDAY, read_tsv

PHRASES = read_tsv(EVERYDAY)[:64]  # one POST (max_items 64); the full sets are measured by training.precision
# int8 quantizes activations per call, over the whole batch: which of its near-ties flip depends on the batch and on
# float32 noise upstream (the Handbook test: 79-83.5% identical, docs/benchmarks.md). These 64 phrases in one batch
# measured 95.3-98.4% across equally good encoders on an AVX2 CPU; 95% would test the luck of this batch.
IDENTICAL = {"int8": 0.90}


@pytest.fixture(scope="module")
def float32():
    """The float32 translations of the phrases."""
    return translate_all(load(BUILTIN), [en for en, _ in PHRASES], "en", "es")


@pytest.mark.parametrize("dtype", ["int8-ffn", "int8", "bfloat16", "auto"])
def test_lower_precision_stays_within_the_quality_bounds(dtype, float32):
    """The model loaded as the engine core loads it for `--dtype`, against float32."""
    precision, _ = choose(dtype, "cpu")
    got = translate_all(load(BUILTIN, dtype=precision), [en for en, _ in PHRASES], "en", "es")
    refs = [[es for _, es in PHRASES]]
    identical = sum(a == b for a, b in zip(got, float32, strict=True)) / len(got)
    assert identical >= IDENTICAL.get(dtype, 0.95), [(a, b) for a, b in zip(got, float32, strict=True) if a != b]
    chrf = sacrebleu.corpus_chrf(got, refs).score
    assert chrf >= sacrebleu.corpus_chrf(float32, refs).score - 0.5  # no worse (bfloat16 scored 0.6 better on 64)


def test_a_server_started_with_a_dtype_serves_and_reports_it():
    """--dtype int8: /info names the precision, why and the device, and a phrase is the int8 model's translation."""
    text = PHRASES[0][0]
    proc = ServerProcess("--dtype", "int8", "--warmup-rounds", "0").wait()  # the built-in model
    try:
        (m,) = HTTP.get(proc.url + "/info").json()["models"]
        body = {"q": text, "source": "en", "target": "es", "parameters": {"max_new_tokens": 64}}
        r = HTTP.post(proc.url + "/translate", json=body, timeout=120)
    finally:
        proc.stop()
    assert (m["dtype"], m["dtype_reason"], m["device"]) == (*choose("int8", "cpu"), "cpu")
    assert r.status_code == 200, r.text
    assert r.json()["translatedText"] == translate_all(load(BUILTIN, dtype="int8"), [text], "en", "es")[0]
