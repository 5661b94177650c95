"""Overload: a full queue answers 503 overloaded with Retry-After at once; accepted requests all complete."""

from __future__ import annotations

import asyncio
import time

import httpx

from bench.harness.client import HTTP, metrics, value
from tests.app.helpers import LONG, body

N = 16


async def timed_posts(url: str, bodies: list[dict]) -> list[tuple[httpx.Response, float]]:
    """Send all bodies at once; each response with its latency."""

    async def post(client: httpx.AsyncClient, b: dict) -> tuple[httpx.Response, float]:
        t0 = time.monotonic()
        r = await client.post("/translate", json=b)
        return r, time.monotonic() - t0

    async with httpx.AsyncClient(base_url=url, timeout=120, limits=httpx.Limits(max_connections=len(bodies))) as client:
        await client.get("/health/live")  # connections warm before the burst
        return await asyncio.gather(*(post(client, b) for b in bodies))


def test_full_queue_is_refused_fast_and_nothing_is_lost(small):
    """Some of 16 long requests get 503 overloaded + Retry-After fast; every 200 is the right answer."""
    bodies = [body(f"the cat {i} sleeps in the big house", parameters=LONG) for i in range(N)]
    before = metrics(small.url)
    results = asyncio.run(timed_posts(small.url, bodies))
    after = metrics(small.url)
    accepted = [i for i, (r, _) in enumerate(results) if r.status_code == 200]
    refused = [i for i, (r, _) in enumerate(results) if r.status_code != 200]
    # one running and two queued, or two queued when the burst fills the queue before the first request runs
    assert len(accepted) >= 2 and refused, [r.status_code for r, _ in results]
    for i in refused:
        r, latency = results[i]
        assert r.status_code == 503
        assert r.json() == {"error": r.json()["error"], "error_type": "overloaded"}
        assert "queue" in r.json()["error"]
        assert int(r.headers["retry-after"]) >= 1
        assert latency < 1.0, f"a refusal took {latency:.2f}s"
    slowest_accepted = max(results[i][1] for i in accepted)
    slowest_refusal = max(results[i][1] for i in refused)
    assert slowest_refusal < slowest_accepted / 2  # refused at once, not after the accepted 255-token generations ran
    finished = value(after, "mt_requests_total", model="en-es", finish_reason="length") - value(
        before, "mt_requests_total", model="en-es", finish_reason="length"
    )
    assert finished == len(accepted)  # none lost, none aborted
    overloaded = value(after, "mt_request_failures_total", error_type="overloaded") - value(
        before, "mt_request_failures_total", error_type="overloaded"
    )
    assert overloaded == len(refused)
    assert value(after, "mt_requests_total", model="en-es", finish_reason="aborted") == value(
        before, "mt_requests_total", model="en-es", finish_reason="aborted"
    )
    for i in accepted:  # afterwards the server serves normally: each accepted answer equals a fresh one
        alone = HTTP.post(small.url + "/translate", json=bodies[i], timeout=60)
        assert alone.status_code == 200
        assert alone.json()["translatedText"] == results[i][0].json()["translatedText"]
        assert alone.json()["details"]["generated_tokens"] == 255


def test_a_job_is_queued_whole(small):
    """A 3-text job on an idle server with max_queue=2 is accepted: a job's units enter the queue together."""
    for _ in range(5):
        r = HTTP.post(small.url + "/translate", json=body(["the cat", "the dog", "a tree"]), timeout=60)
        assert r.status_code == 200, r.text
