"""API keys and limits under concurrency: two server processes with two HTTP workers each share one SQLite key file
(keys required) or one Redis (anonymous limits); bursts of concurrent clients; counts exact both ways; streams flow
while another process holds the key file's write lock."""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
import subprocess
import sys
import time

import httpx
import pytest

from app.settings import BUILTIN
from bench.harness.client import HTTP, metrics, value
from bench.harness.server import ServerProcess, add_keys, stop_all
from tests.app.test_errors import check_error

KEYS = {
    "minute": {"req_limit": 10},
    "daily": {"daily_char_limit": 100},
    "small": {"char_limit": 10, "batch_limit": 2},
    "plain": {},
}


def pair(model, *flags: str, env: dict | None = None) -> list[ServerProcess]:
    """Two servers of `model` with two workers each and the same limit settings."""
    common = ("--model", str(model), "--workers", "2", "--warmup-rounds", "0", *flags)
    servers = [ServerProcess(*common, env=env) for _ in range(2)]
    return [s.wait() for s in servers]


@pytest.fixture(scope="module")
def sqlite_pair(tmp_path_factory):
    """Keys required, stored in one SQLite file both servers use; the built-in model (whose long streams take
    seconds, as the write-lock test needs)."""
    db = add_keys(tmp_path_factory.mktemp("keys") / "keys.sqlite", KEYS)
    servers = pair(BUILTIN, "--api-keys", "--keys-db", str(db))
    yield servers, db
    stop_all(servers)


@pytest.fixture(scope="module")
def redis_pair(native_dir, redis_url):
    """No keys; anonymous limits counted in one Redis both servers use."""
    servers = pair(native_dir, "--redis-url", redis_url, "--req-limit", "12", "--char-limit", "50")
    yield servers
    stop_all(servers)


def burst(urls: list[str], n: int, fields: dict) -> list[httpx.Response]:
    """n concurrent POST /detect, alternating between the servers, each on a connection of its own."""

    async def run() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=0)
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:
            calls = [client.post(urls[i % len(urls)] + "/detect", json=fields) for i in range(n)]
            return await asyncio.gather(*calls)

    return asyncio.run(run())


def statuses(responses: list[httpx.Response]) -> dict[int, int]:
    """How many responses had each status."""
    out: dict[int, int] = {}
    for r in responses:
        out[r.status_code] = out.get(r.status_code, 0) + 1
    return out


def rejections(servers: list[ServerProcess], reason: str) -> float:
    """mt_limit_rejections_total{reason} summed over the servers."""
    return sum(value(metrics(s.url), "mt_limit_rejections_total", reason=reason) for s in servers)


def test_keys_are_required(sqlite_pair):
    """403 without a key and with an unknown one, counted by reason; a stored key passes."""
    servers, _ = sqlite_pair
    url = servers[0].url
    check_error(HTTP.post(url + "/detect", json={"q": "hello"}), 403, "forbidden", "api_key", "required")
    check_error(HTTP.post(url + "/translate?q=hi&target=es&api_key=nope"), 403, "forbidden", "api_key", "invalid")
    assert HTTP.post(url + "/translate", data={"q": "the cat", "target": "es", "source": "en", "api_key": "plain"},
                      timeout=30).status_code == 200  # fmt: skip
    assert rejections(servers, "missing_key") >= 1 and rejections(servers, "invalid_key") >= 1


def test_requests_per_minute_are_exact_across_processes(sqlite_pair):
    """40 concurrent requests with a key of req_limit 10 on 2 servers x 2 workers: exactly 10 pass; the others get 429
    with Retry-After, naming req_limit; the operator's usage and the metrics agree."""
    servers, db = sqlite_pair
    responses = burst([s.url for s in servers], 40, {"q": "hello world", "api_key": "minute"})
    assert statuses(responses) == {200: 10, 429: 30}
    refused = [r for r in responses if r.status_code == 429]
    for r in refused:
        check_error(r, 429, "rate_limited", "req_limit=10")
        assert 1 <= int(r.headers["retry-after"]) <= 60
    assert rejections(servers, "req_limit") == 30
    cmd = [sys.executable, "-m", "app", "keys", "--keys-db", str(db), "usage", "name-minute"]
    usage = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    assert usage["requests_total"] == 10 and usage["requests_last_minute"] == 10 and usage["chars_total"] == 110


def test_daily_characters_are_exact(sqlite_pair):
    """daily_char_limit 100 and 30-character requests, 20 at once: exactly 3 pass."""
    servers, _ = sqlite_pair
    responses = burst([s.url for s in servers], 20, {"q": "x" * 30, "api_key": "daily"})
    assert statuses(responses) == {200: 3, 429: 17}
    check_error(next(r for r in responses if r.status_code == 429), 429, "rate_limited", "daily_char_limit=100")


def test_per_request_limits(sqlite_pair):
    """A key's char_limit and batch_limit: 422 naming the limit; within them it passes."""
    url = sqlite_pair[0][0].url
    r = HTTP.post(url + "/detect", json={"q": "x" * 11, "api_key": "small"})
    check_error(r, 422, "validation", "char_limit=10")
    r = HTTP.post(url + "/detect", json={"q": ["a", "b", "c"], "api_key": "small"})
    check_error(r, 422, "validation", "batch_limit=2")
    assert HTTP.post(url + "/detect", json={"q": ["a", "b"], "api_key": "small"}).status_code == 200


def test_anonymous_limits_shared_in_redis(redis_pair):
    """No keys: the client address's limits, counted in Redis across 2 servers x 2 workers: exactly 12 of 30 pass;
    char_limit applies to anonymous requests too."""
    responses = burst([s.url for s in redis_pair], 30, {"q": "hello world", "api_key": "ignored"})
    assert statuses(responses) == {200: 12, 429: 18}
    assert rejections(redis_pair, "req_limit") == 18
    r = HTTP.post(redis_pair[0].url + "/detect", json={"q": "x" * 51})
    check_error(r, 422, "validation", "char_limit=50")


HOLD_S = 1.0  # how long another process holds the key file's write lock (within the 2 s store budget)


async def stream_tokens(client: httpx.AsyncClient, url: str, times: list[float], started: asyncio.Event) -> None:
    """One stream of 16 texts x 255 forced tokens (about 4 s on the built-in model): when each token event came."""
    forced = {"max_new_tokens": 255, "min_new_tokens": 255}
    body = {"q": [f"the cat {i} sleeps in the house" for i in range(16)], "source": "en", "target": "es",
            "stream": True, "api_key": "plain", "parameters": forced}  # fmt: skip
    async with client.stream("POST", url + "/translate", json=body) as r:
        assert r.status_code == 200, await r.aread()
        async for line in r.aiter_lines():
            if line.startswith("event: token"):
                times.append(time.monotonic())
                started.set()


def test_streams_flow_while_another_process_holds_the_write_lock(sqlite_pair):
    """Keys on, 2 HTTP workers: 4 streams run; another process takes the SQLite key file's write lock for HOLD_S
    and 6 requests wait to be counted (each on its own connection, so both workers get some): every stream keeps
    getting tokens (no gap near HOLD_S: the wait is off the event loop), and the waiting requests pass once the lock
    is gone."""
    (server, _), db = sqlite_pair

    async def run() -> tuple[list[list[float]], tuple[float, float], list[int]]:
        limits = httpx.Limits(max_keepalive_connections=0)
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:
            times: list[list[float]] = [[] for _ in range(4)]
            started = [asyncio.Event() for _ in times]
            streams = [
                asyncio.create_task(stream_tokens(client, server.url, t, e))
                for t, e in zip(times, started, strict=True)
            ]
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started)), timeout=30)
            holder = sqlite3.connect(db, isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")
            locked = time.monotonic()
            body = {"q": "the cat", "source": "en", "target": "es", "api_key": "plain"}
            waiting = [asyncio.create_task(client.post(server.url + "/translate", json=body)) for _ in range(6)]
            await asyncio.sleep(HOLD_S)
            holder.execute("ROLLBACK")
            window = (locked, time.monotonic())
            holder.close()
            answers = await asyncio.gather(*waiting)
            await asyncio.gather(*streams)
            return times, window, [r.status_code for r in answers]

    times, (start, end), statuses = asyncio.run(run())
    assert statuses == [200] * 6
    for stream in times:
        assert stream[-1] > end, "the stream ended before the lock did: nothing shown"
        inside = [start] + [t for t in stream if start < t < end] + [min(t for t in stream if t >= end)]
        gap = max(b - a for a, b in itertools.pairwise(inside))
        assert gap < HOLD_S / 2, f"a stream got no token for {gap:.2f}s while the key file was locked"
