"""A client that goes away aborts its request: batch rows are freed at once, not when generation would end."""

from __future__ import annotations

import time

import httpx
import pytest

from bench.harness.client import HTTP, metrics, value
from tests.app.helpers import LONG, body, idle, translate, wait_for

ITEMS = 64  # 64 texts x 255 forced tokens: seconds of work on 8 rows, ten or more on one row


def long_job() -> dict:
    """A request that cannot end early: every item generates exactly 255 tokens."""
    return body([f"the cat {i} sleeps in the house" for i in range(ITEMS)], parameters=LONG)


def ended(samples) -> float:
    """Engine requests of en-es counted as ended, for any reason."""
    reasons = ("aborted", "length", "eos")
    return sum(value(samples, "mt_requests_total", model="en-es", finish_reason=r) for r in reasons)


def check_aborted(url: str, before, closed_at: float) -> None:
    """Rows are freed within a second or so, the rest is never generated, the aborts are counted, and the server
    goes on serving: the next request's tokens are the only ones generated after the job ended."""
    wait_for(lambda: idle(url) and ended(metrics(url)) - ended(before) == ITEMS, timeout=5)  # every item ended
    assert time.monotonic() - closed_at < 2.0  # freed well before the whole job could finish
    after = metrics(url)
    generated = value(after, "mt_generated_tokens_total") - value(before, "mt_generated_tokens_total")
    assert generated < ITEMS * 255 / 2, "the abandoned job ran (mostly) to completion"
    aborted = value(after, "mt_requests_total", model="en-es", finish_reason="aborted")
    assert aborted - value(before, "mt_requests_total", model="en-es", finish_reason="aborted") >= ITEMS / 2
    r = translate(url, "the cat sleeps")
    assert r.status_code == 200 and r.json()["translatedText"]
    later = value(metrics(url), "mt_generated_tokens_total") - value(after, "mt_generated_tokens_total")
    assert later == int(r.headers["x-generated-tokens"])


def test_stream_disconnect_aborts(server):
    """Close an SSE stream after two token events: running falls to 0 and finish_reason=aborted is counted."""
    wait_for(lambda: idle(server.url), timeout=30)
    before = metrics(server.url)
    seen = 0
    with HTTP.stream("POST", server.url + "/translate", json={**long_job(), "stream": True}, timeout=30) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            seen += line.startswith("event: token")
            if seen == 2:
                break
    closed_at = time.monotonic()
    assert seen == 2
    check_aborted(server.url, before, closed_at)


def test_json_disconnect_aborts(small):
    """A non-streamed request whose client times out is aborted too, although its tokens keep flowing
    (on the one-row server the job would take ten seconds or more)."""
    wait_for(lambda: idle(small.url), timeout=30)
    before = metrics(small.url)
    with pytest.raises(httpx.ReadTimeout):
        HTTP.post(small.url + "/translate", json=long_job(), timeout=httpx.Timeout(30, read=0.5))
    closed_at = time.monotonic()
    check_aborted(small.url, before, closed_at)
