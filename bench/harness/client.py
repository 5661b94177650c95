"""The client the tests and the harness talk to the real server with, and what it reads back: server-sent events
(httpx-sse), and /metrics as Prometheus samples (prometheus_client's text parser)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx
from httpx_sse import EventSource
from prometheus_client.parser import text_string_to_metric_families

# One client for every call: each request on a fresh connection, as httpx.get() makes it, without the TLS context that
# httpx.get() builds for each call (about 20 ms of CPU; these servers speak plain HTTP). Safe to share between threads.
HTTP = httpx.Client(limits=httpx.Limits(max_connections=None, max_keepalive_connections=0), timeout=5.0)


@dataclass
class Sse:
    """One server-sent event, its data decoded from JSON."""

    event: str
    data: dict | None


def parse_sse(text: str) -> list[Sse]:
    """Events from an event-stream body (comments such as keep-alives and events without data are skipped)."""
    body = httpx.Response(200, headers={"content-type": "text/event-stream"}, text=text + "\n\n")  # ends the last one
    return [Sse(e.event, json.loads(e.data)) for e in EventSource(body).iter_sse() if e.data]


Samples = dict[tuple[str, frozenset], float]


def metrics(url: str) -> Samples:
    """Samples of /metrics keyed by (name, labels); the parser raises on anything that is not Prometheus text."""
    r = HTTP.get(url + "/metrics", timeout=10)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    families = text_string_to_metric_families(r.text)
    return {(s.name, frozenset(s.labels.items())): s.value for f in families for s in f.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value (0 when absent: a labelled counter appears on first use)."""
    return samples.get((name, frozenset(labels.items())), 0.0)
