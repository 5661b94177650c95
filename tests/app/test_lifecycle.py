"""Readiness: 503 while warming up and while draining after SIGTERM; in-flight work finishes; exit code 0."""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from bench.harness.client import HTTP, metrics, parse_sse, value
from bench.harness.server import ServerProcess
from tests.app.helpers import LONG, body, wait_for

DRAIN_SECONDS = 20


@pytest.fixture(scope="module")
def slow(native_dir):
    """A server whose warm-up takes seconds, one row at a time; not waited for (the first test watches it start)."""
    args = ("--model", str(native_dir), "--warmup-rounds", "150", "--max-batch-size", "1")
    proc = ServerProcess(*args, "--drain-seconds", str(DRAIN_SECONDS))
    yield proc
    proc.stop()


def get(url: str) -> httpx.Response | None:
    """GET, or None while nothing listens yet."""
    try:
        return HTTP.get(url, timeout=5)
    except httpx.TransportError:
        return None


def test_not_ready_until_warmed_up(slow):
    """/health/ready: 503 with a JSON reason while loading/warming, then 200 for good; /health/live 200 throughout."""
    wait_for(lambda: get(slow.url + "/health/live") is not None, timeout=60)
    statuses = []
    first = get(slow.url + "/health/ready")
    assert first.status_code == 503, "warm-up finished before the first poll: raise --warmup-rounds"
    assert first.json()["status"] == "not_ready" and "loading" in first.json()["reason"]
    r = HTTP.post(slow.url + "/translate", json=body("the cat sleeps"))
    assert r.status_code == 503 and r.json()["error_type"] == "not_ready" and r.headers["retry-after"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert get(slow.url + "/health/live").status_code == 200
        statuses.append(get(slow.url + "/health/ready").status_code)
        if statuses[-1] == 200:
            break
        time.sleep(0.05)
    assert statuses[-1] == 200 and set(statuses) == {503, 200}
    assert all(s == 200 for s in (get(slow.url + "/health/ready").status_code for _ in range(3)))
    assert HTTP.post(slow.url + "/translate", json=body("the cat sleeps"), timeout=30).status_code == 200


def stream_events(url: str, payload: dict) -> list:
    """A streamed request's events."""
    with HTTP.stream("POST", url + "/translate", json={**payload, "stream": True}, timeout=60) as r:
        assert r.status_code == 200
        return parse_sse(r.read().decode())


def test_sigterm_drains(slow):
    """SIGTERM mid-request: ready turns 503, new work gets 503 not_ready, in-flight JSON and SSE finish, exit 0."""
    slow.wait()
    job = body([f"the dog {i} runs in the city" for i in range(8)], parameters=LONG)  # ~2 s, one row at a time
    with ThreadPoolExecutor(2) as pool:
        answer = pool.submit(httpx.post, slow.url + "/translate", json=job, timeout=60)
        events = pool.submit(stream_events, slow.url, job)
        wait_for(lambda: value(metrics(slow.url), "mt_requests_waiting") >= 12, timeout=30)  # both queued
        slow.terminate()
        signalled = time.monotonic()
        wait_for(lambda: get(slow.url + "/health/ready").status_code == 503, timeout=5)
        ready = get(slow.url + "/health/ready").json()
        assert ready["status"] == "not_ready" and ready["reason"] == "draining"
        refused = HTTP.post(slow.url + "/translate", json=body("the cat sleeps"), timeout=10)
        assert refused.status_code == 503 and refused.json()["error_type"] == "not_ready"
        assert get(slow.url + "/health/live").status_code == 200
        assert not answer.done(), "the in-flight request finished before the checks: make it longer"
        r = answer.result()
        streamed = events.result()
    finished = time.monotonic()
    assert r.status_code == 200
    assert [d["generated_tokens"] for d in r.json()["details"]] == [255] * 8
    assert streamed[-1].event == "done" and streamed[-1].data["translatedText"] == r.json()["translatedText"]
    try:
        code = slow.proc.wait(DRAIN_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"did not exit within the grace period:\n{slow.log_tail()}")
    assert code == 0, slow.log_tail()
    assert time.monotonic() - finished < 5, "exit waited for the whole drain period instead of the in-flight work"
    assert time.monotonic() - signalled < DRAIN_SECONDS
