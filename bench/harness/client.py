"""What a client reads back from the real server: server-sent events, and /metrics as Prometheus samples."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import httpx

SAMPLE_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")


@dataclass
class Sse:
    """One server-sent event."""

    event: str
    data: dict | None


def parse_sse(text: str) -> list[Sse]:
    """Events from an event-stream body (comments such as keep-alives are skipped)."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith(":") or not line:
                continue
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
        if data:
            events.append(Sse(name, json.loads("\n".join(data))))
    return events


Samples = dict[tuple[str, frozenset], float]
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def metrics(url: str) -> Samples:
    """Samples of /metrics keyed by (name, labels), checking that every line is Prometheus text."""
    r = httpx.get(url + "/metrics", timeout=10)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    out = {}
    for line in r.text.splitlines():
        if line and not line.startswith("#"):
            m = SAMPLE_LINE.match(line)
            assert m, f"not Prometheus text: {line!r}"
            labels = frozenset(LABEL.findall(m.group(2) or ""))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value (0 when absent: a labelled counter appears on first use)."""
    return samples.get((name, frozenset(labels.items())), 0.0)
