"""Continuous batching changes nothing: 32 concurrent mixed requests each equal the same request sent alone."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from bench.harness.client import HTTP, metrics, value
from tests.app.helpers import body

TEXTS = [
    "the cat sleeps",
    "a big red dog runs in the city at night",
    "hello world",
    "the small green tree eats the house",
    "good night",
    "the river runs in the big city and the dog sleeps in the small house",
]
PARAMS = [
    {},
    {"beam_size": 3},
    {"temperature": 1.2, "seed": 5},
    {"top_k": 10, "top_p": 0.9, "seed": 8},
    {"beam_size": 2, "length_penalty": 0.5, "return_scores": True},
    {"min_new_tokens": 40, "max_new_tokens": 60},
    {"max_new_tokens": 5},
    {"repetition_penalty": 1.5, "no_repeat_ngram_size": 3},
]


def requests() -> list[dict]:
    """32 bodies mixing lengths, greedy, beams, seeded sampling, alternatives, lists and sentence splitting."""
    out = []
    for i in range(32):
        params = dict(PARAMS[i % len(PARAMS)])
        extra = {}
        if i % 5 == 0 and "temperature" not in params and "top_k" not in params:
            extra["alternatives"] = 2
        q = TEXTS[i % len(TEXTS)]
        if i % 7 == 3:
            q = [TEXTS[(i + k) % len(TEXTS)] for k in range(3)]
        if i % 9 == 4:
            q, params["split_sentences"] = "The cat sleeps. The dog runs in the city. Good night.", True
        out.append(body(q, parameters=params, **extra))
    return out


def essence(answer: dict) -> dict:
    """What must not depend on batching: texts, alternatives, token counts, finish reasons, scores."""
    details = answer["details"] if isinstance(answer["details"], list) else [answer["details"]]
    return {
        "translatedText": answer["translatedText"],
        "alternatives": answer.get("alternatives"),
        "details": [
            (
                d["input_tokens"],
                d["generated_tokens"],
                d["finish_reason"],
                None if d["score"] is None else round(d["score"], 4),
            )
            for d in details
        ],
    }


async def send_all(url: str, bodies: list[dict]) -> list[httpx.Response]:
    """Send every body at once."""
    limits = httpx.Limits(max_connections=len(bodies))
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        return await asyncio.gather(*(client.post("/translate", json=b) for b in bodies))


def test_concurrent_requests_equal_sequential(server):
    """Same texts, alternatives, generated_tokens and finish_reason as alone; and batches really formed."""
    bodies = requests()
    alone = []
    for b in bodies:
        r = HTTP.post(server.url + "/translate", json=b, timeout=120)
        assert r.status_code == 200, r.text
        alone.append(essence(r.json()))
    before = metrics(server.url)
    together = asyncio.run(send_all(server.url, bodies))
    after = metrics(server.url)
    for b, r, expected in zip(bodies, together, alone, strict=True):
        assert r.status_code == 200, r.text
        assert essence(r.json()) == expected, b
    steps = value(after, "mt_batch_size_count") - value(before, "mt_batch_size_count")
    rows = value(after, "mt_batch_size_sum") - value(before, "mt_batch_size_sum")
    single = value(after, "mt_batch_size_bucket", le="1.0") - value(before, "mt_batch_size_bucket", le="1.0")
    assert steps > 0 and rows / steps > 2, "concurrent requests were not batched"
    assert single < steps
    assert value(after, "mt_batch_size_bucket", le="8.0") == value(after, "mt_batch_size_count")  # --max-batch-rows 8


@pytest.mark.parametrize("n", [2, 16])
def test_identical_concurrent_sampling_requests_are_reproducible(server, n):
    """The same seeded sampling request sent n times at once gives n identical answers (one generator each)."""
    b = body(TEXTS[1], parameters={"temperature": 1.5, "seed": 42})
    answers = {str(essence(r.json())) for r in asyncio.run(send_all(server.url, [b] * n))}
    assert len(answers) == 1
