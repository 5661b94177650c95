"""Faults as the app shows them (in-process, over the tiny model): a dead or stopped engine makes readiness
503, a model failure is a 500 or an SSE error counted once, and a stream that never started releases its job."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from fastapi.testclient import TestClient

from app.engine.engine import Engine
from app.engine.request import Failed
from app.engine.scheduler import Limits
from app.main import create_app
from app.metrics import Metrics
from app.service import Service
from tests.app.helpers import parse_sse
from tests.app.inprocess import POISON, TEXTS, Fatal, make_request, oracle, service_with


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_dead_engine_fails_its_requests_and_readiness(checkpoint, faulty):
    """An exception that kills the engine thread fails what it held (not_ready) and turns readiness 503."""
    metrics = Metrics()
    engine = Engine("en-es", faulty, Limits(8, 65536, 4096), metrics, max_queue=64, max_wait_ms=0)
    service = service_with(checkpoint, faulty, engine)
    engine.start()
    assert service.readiness() == (True, "ready")
    faulty.step_error = Fatal("boom")
    pairs = [make_request(checkpoint, t, max_new_tokens=30) for t in TEXTS[:2]]
    engine.submit(*(r for r, _ in pairs))
    for _, listener in pairs:
        final = listener.last()
        assert isinstance(final, Failed) and final.error_type == "not_ready"
    engine.thread.join(5)
    assert not engine.alive
    assert service.readiness() == (False, "engine stopped: en-es")
    client = TestClient(create_app(service=service))
    r = client.get("/health/ready")
    assert r.status_code == 503 and r.json()["reason"] == "engine stopped: en-es"
    r = client.post("/translate", json={"q": "the cat", "source": "en", "target": "es"})
    assert r.status_code == 503 and r.json()["error_type"] == "not_ready"
    r = client.get("/health/live")  # the process can never serve again: liveness fails so it gets restarted
    assert r.status_code == 503 and r.json()["reason"] == "engine stopped: en-es"


def test_stopped_engine_makes_the_service_unready(checkpoint):
    """A Service whose engine was stopped answers /health/ready 503."""
    engine = Engine("en-es", checkpoint.model, Limits(8, 65536, 4096), Metrics(), max_queue=64, max_wait_ms=0)
    engine.start()
    engine.stop()
    client = TestClient(create_app(service=service_with(checkpoint, checkpoint.model, engine)))
    assert client.get("/health/ready").status_code == 503


def failures(service: Service, kind: str) -> float:
    """mt_request_failures_total{error_type=kind}."""
    return service.metrics.failures.labels(kind)._value.get()


def test_model_failure_over_http(engine, faulty, checkpoint):
    """Through the app: 500 generation (JSON) or an SSE error event for the poisoned text, counted once each;
    other texts keep being served."""
    service = service_with(checkpoint, faulty, engine)
    client = TestClient(create_app(service=service))
    r = client.post("/translate", json={"q": POISON, "source": "en", "target": "es"})
    assert r.status_code == 500
    assert r.json()["error_type"] == "generation" and "q[0]" in r.json()["error"]
    assert failures(service, "generation") == 1
    r = client.post("/translate", json={"q": ["the cat", POISON], "source": "en", "target": "es", "stream": True})
    events = parse_sse(r.text)
    assert events[-1].event == "error" and events[-1].data["error_type"] == "generation"
    assert "q[1]" in events[-1].data["error"]
    assert "done" not in {e.event for e in events}
    assert failures(service, "generation") == 2
    r = client.post("/translate", json={"q": TEXTS[0], "source": "en", "target": "es"})
    assert r.status_code == 200
    assert r.json()["translatedText"] == checkpoint.tokenizer.decode(
        oracle(checkpoint, TEXTS[0], max_new_tokens=255)[0].tokens
    )
    deadline = time.monotonic() + 5
    while engine.load != (0, 0) and time.monotonic() < deadline:  # the poisoned job's sibling was aborted
        time.sleep(0.01)
    assert engine.load == (0, 0)


def test_stream_that_never_started_releases_its_job(engine, faulty, checkpoint):
    """Client gone before the first event is written: the job is aborted and no longer counted in flight
    (else draining would wait for it and the engine would generate for nobody)."""
    service = service_with(checkpoint, faulty, engine)
    app = create_app(service=service)
    faulty.step_delay = 0.005  # 255 steps take over a second: the units cannot finish before the disconnect
    payload = {"q": ["the cat"] * 4, "source": "en", "target": "es", "stream": True}
    payload["parameters"] = {"max_new_tokens": 255, "min_new_tokens": 255}
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
    asyncio.run(app(scope, receive, send))
    assert "http.response.body" not in sent  # no event was written
    assert service.inflight == 0
    aborted = lambda: service.metrics.requests.labels("en-es", "aborted")._value.get()
    deadline = time.monotonic() + 5  # the counter moves just after a request leaves the engine's tables
    while (engine.load != (0, 0) or aborted() < 4) and time.monotonic() < deadline:
        time.sleep(0.01)
    faulty.step_delay = 0.0
    assert engine.load == (0, 0)
    assert aborted() == 4
