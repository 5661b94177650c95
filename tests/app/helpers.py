"""Helpers for the HTTP tests: requests, server-sent event parsing, Prometheus text parsing, the offline oracle."""

from __future__ import annotations

import time

import httpx

from app.casing import Casing
from bench.harness.client import HTTP, Sse, metrics, parse_sse, value
from model.loading.checkpoint import Checkpoint
from model.runner.generate import generate
from model.runner.params import DecodeParams
from model.runner.search import Request

# forced-length generation: runs exactly 255 tokens (the tiny model's max_positions is 256)
LONG = {"max_new_tokens": 255, "min_new_tokens": 255}


def body(q, **extra) -> dict:
    """An en->es /translate body."""
    return {"q": q, "source": "en", "target": "es", **extra}


def translate(url: str, q, timeout: float = 60.0, **extra) -> httpx.Response:
    """POST /translate with a JSON body."""
    return HTTP.post(url + "/translate", json=body(q, **extra), timeout=timeout)


def ok(url: str, q, **extra) -> dict:
    """POST /translate and insist on 200; the JSON answer."""
    r = translate(url, q, **extra)
    assert r.status_code == 200, r.text
    return r.json()


def stream(url: str, q, **extra) -> tuple[httpx.Response, list[Sse]]:
    """POST /translate with stream=true; the response and its events."""
    payload = body(q, **{"stream": True, **extra})
    with HTTP.stream("POST", url + "/translate", json=payload, timeout=60) as r:
        text = r.read().decode()
    return r, parse_sse(text)


def streamed_text(events: list[Sse], index: int = 0) -> str:
    """Concatenated token.text of item `index`."""
    return "".join(e.data["token"]["text"] for e in events if e.event == "token" and e.data["index"] == index)


def without_timing(answer: dict) -> dict:
    """The answer with each details' request-specific fields (timings, cached) left out."""
    details = answer["details"] if isinstance(answer["details"], list) else [answer["details"]]
    for d in details:
        for k in ("queue_ms", "total_ms", "cached"):
            d.pop(k)
    return answer


def check_stream(url: str, q, **extra) -> list:
    """Stream and answer as JSON; token deltas concatenate to translatedText and done equals the JSON body."""
    r, events = stream(url, q, **extra)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["cache-control"] == "no-cache"
    assert r.headers["x-accel-buffering"] == "no"
    answer = ok(url, q, **extra)
    assert [e.event for e in events][-1] == "done"
    assert [e.event for e in events[:-1]] == ["token"] * (len(events) - 1)
    done = events[-1].data
    assert without_timing(done) == without_timing(answer)
    texts = [answer["translatedText"]] if isinstance(q, str) else answer["translatedText"]
    for i, text in enumerate(texts):
        assert streamed_text(events, i) == text
        running = ""
        for e in (e for e in events if e.event == "token" and e.data["index"] == i):
            assert e.data["token"]["text"], "empty deltas are not sent"
            assert "\ufffd" not in e.data["token"]["text"]
            running += e.data["token"]["text"]
            assert e.data["text"] == running  # the whole text so far
    return events


def wait_for(predicate, timeout: float, interval: float = 0.05) -> float:
    """Poll until predicate() is true; seconds it took (AssertionError on timeout)."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)
    return time.monotonic() - start


def offline(ck: Checkpoint, text: str, **params) -> list[str]:
    """The oracle: model.runner.generate.generate on the checkpoint for one text as the server's model reads it (in
    sentence case if it asks: app.casing); n-best texts in the casing it was typed in."""
    casing = Casing.of(text, ck.casing.get("en", ""))
    ids = ck.tokenizer.encode(casing.model_text(text))
    hyps = generate(ck.model, [Request(0, ids, DecodeParams(**params))])[0]
    return [casing.restore(ck.tokenizer.decode(h.tokens)) for h in hyps]


def offline_hyps(ck: Checkpoint, text: str, **params):
    """The oracle's hypotheses (tokens, score, finish_reason) for a text in sentence case."""
    assert not Casing.of(text, ck.casing.get("en", "")).kind, f"{text!r}: the server reads it in sentence case"
    return generate(ck.model, [Request(0, ck.tokenizer.encode(text), DecodeParams(**params))])[0]


def idle(url: str) -> bool:
    """Nothing running or waiting in the engine."""
    m = metrics(url)
    return value(m, "mt_requests_running") == 0 and value(m, "mt_requests_waiting") == 0
