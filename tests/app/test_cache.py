"""The translation cache over HTTP: a hit answers what the engine answered (text, alternatives, details), a list sends
only its misses, sampling without a seed is never cached, and a restart with new weights misses (Redis keeps the
entries across the restart, so only the model's new fingerprint can make it miss)."""

from __future__ import annotations

import shutil

import httpx
import pytest

from bench.harness.client import HTTP, metrics, value
from bench.harness.fixtures import make_native
from bench.harness.server import ServerProcess
from model.loading.checkpoint import load
from tests.app.helpers import offline, without_timing
from tests.app.test_translate import DEFAULT_MAX_NEW, TEXTS


@pytest.fixture(scope="module")
def cached(native_dir):
    """A server with the translation cache on (in-process LRU)."""
    proc = ServerProcess("--model", str(native_dir), "--cache", "--warmup-rounds", "0").wait()
    yield proc
    proc.stop()


def post(url: str, q, **extra) -> httpx.Response:
    """POST /translate en->es, insisting on 200."""
    r = HTTP.post(url + "/translate", json={"q": q, "source": "en", "target": "es", **extra}, timeout=60)
    assert r.status_code == 200, r.text
    return r


def counts(url: str) -> tuple[float, float]:
    """(mt_cache_hits_total, mt_cache_misses_total)."""
    samples = metrics(url)
    return value(samples, "mt_cache_hits_total"), value(samples, "mt_cache_misses_total")


def test_a_hit_answers_what_the_engine_answered(cached):
    """A repeated list request with alternatives and scores: miss, then hit with the same texts and details."""
    extra = {"alternatives": 1, "parameters": {"return_scores": True, "beam_size": 2}}
    hits, misses = counts(cached.url)
    first = post(cached.url, TEXTS[:3], **extra)
    again = post(cached.url, TEXTS[:3], **extra)
    assert (first.headers["x-cache"], again.headers["x-cache"]) == ("miss", "hit")
    assert [d["cached"] for d in again.json()["details"]] == [True] * 3
    assert all(d["total_ms"] == 0 for d in again.json()["details"])
    assert without_timing(again.json()) == without_timing(first.json())
    assert counts(cached.url) == (hits + 3, misses + 3)


def test_a_list_sends_only_its_misses(cached, checkpoint):
    """One known text and one new: partial; the new one is the engine's translation, the old one from the cache."""
    post(cached.url, TEXTS[3])
    r = post(cached.url, [TEXTS[3], TEXTS[4]])
    assert r.headers["x-cache"] == "partial"
    answer = r.json()
    assert [d["cached"] for d in answer["details"]] == [True, False]
    assert answer["translatedText"][1] == offline(checkpoint, TEXTS[4], max_new_tokens=DEFAULT_MAX_NEW)[0]
    assert int(r.headers["x-generated-tokens"]) == answer["details"][1]["generated_tokens"]


def test_parameters_are_part_of_the_key(cached):
    """Another beam size, format or placeholder option is another entry; sampling without a seed is never cached,
    with a seed it is."""
    post(cached.url, "the dog sleeps")
    assert post(cached.url, "the dog sleeps", parameters={"beam_size": 3}).headers["x-cache"] == "miss"
    assert post(cached.url, "the dog sleeps", format="html").headers["x-cache"] == "miss"
    assert post(cached.url, "the dog sleeps", preserve_placeholders=True).headers["x-cache"] == "miss"
    unseeded = post(cached.url, "the dog sleeps", parameters={"temperature": 0.7})
    assert "x-cache" not in unseeded.headers
    seeded = {"temperature": 0.7, "seed": 3}
    assert post(cached.url, "the dog sleeps", parameters=seeded).headers["x-cache"] == "miss"
    assert post(cached.url, "the dog sleeps", parameters=seeded).headers["x-cache"] == "hit"


def test_cache_off(server):
    """--no-cache (the test servers' default): no X-Cache header, every request reaches the engine."""
    assert "x-cache" not in post(server.url, TEXTS[0]).headers


def test_new_weights_miss_after_a_restart(tmp_path, native_dir, redis_url):
    """With Redis: a restart on the same files hits, a restart on new weights under the same path misses and answers
    the new model's translation."""
    model_dir = tmp_path / "tiny-en-es"
    shutil.copytree(native_dir, model_dir)
    flags = ("--model", str(model_dir), "--cache", "--redis-url", redis_url, "--warmup-rounds", "0")
    text = "the red house"

    def serve_once() -> httpx.Response:
        proc = ServerProcess(*flags).wait()
        try:
            return post(proc.url, text)
        finally:
            proc.stop()

    first = serve_once()
    same = serve_once()
    assert (first.headers["x-cache"], same.headers["x-cache"]) == ("miss", "hit")
    assert same.json()["translatedText"] == first.json()["translatedText"]
    make_native(model_dir, seed=1)
    new = serve_once()
    assert new.headers["x-cache"] == "miss" and new.json()["translatedText"] != first.json()["translatedText"]
    assert new.json()["translatedText"] == offline(load(model_dir), text, max_new_tokens=DEFAULT_MAX_NEW)[0]
