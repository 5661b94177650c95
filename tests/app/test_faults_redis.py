"""Redis failing under a real server (Debian's redis-server, durable: its data outlives a kill -9): the key store fails
closed (503 `unavailable` naming it, Retry-After, readiness 503, liveness 200) and recovers by itself within two
seconds; a Redis that stops answering costs a request its budget, not more; the cache turns into misses and the
glossary store refuses only the requests that name a stored glossary. Each outage is logged once and counted."""

from __future__ import annotations

import shutil
import time

import pytest

from bench.harness.client import HTTP, metrics, value
from bench.harness.server import RedisServer, ServerProcess, add_keys, stop_all
from tests.app.faults import check_unavailable, log_count, ready_within
from tests.app.helpers import body

BUDGET_S = 0.5  # --store-timeout-seconds of these servers
KEYED = body("the cat sleeps", api_key="good-key")


@pytest.fixture(scope="module")
def redis_faults(native_dir, tmp_path_factory):
    """(Redis, a server with keys in it, a server using it for the cache and glossaries only), the tiny model."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server not installed (Debian package redis-server; .ci/system-deps installs it)")
    redis = RedisServer(tmp_path_factory.mktemp("redis"), durable=True)
    add_keys(redis.url, {"good-key": {}})
    common = ("--model", str(native_dir), "--warmup-rounds", "0", "--redis-url", redis.url)
    budget = ("--store-timeout-seconds", str(BUDGET_S))
    servers = [ServerProcess(*common, *budget, "--api-keys"), ServerProcess(*common, *budget, "--cache")]
    yield redis, *(s.wait() for s in servers)
    stop_all(servers)
    redis.stop()


def up(server: ServerProcess, dependency: str) -> float:
    """mt_dependency_up of one dependency."""
    return value(metrics(server.url), "mt_dependency_up", dependency=dependency)


def errors(server: ServerProcess, dependency: str) -> float:
    """mt_dependency_errors_total of one dependency."""
    return value(metrics(server.url), "mt_dependency_errors_total", dependency=dependency)


def test_redis_killed_fails_closed_and_recovers(redis_faults):
    """kill -9 of Redis: every request with a valid key gets 503 unavailable naming the key store (never a 500, never
    let in unchecked), readiness 503 naming it, liveness 200, mt_dependency_up 0, one log line for the outage; Redis
    restarted: ready again within 2 s, requests pass, one log line for the end."""
    # catches: a store error left to the 500 handler; readiness blind to the key store; no reconnection
    redis, keyed, _ = redis_faults
    assert HTTP.post(keyed.url + "/translate", json=KEYED).status_code == 200
    lines, ended = log_count(keyed, "key store unavailable:"), log_count(keyed, "key store is back")
    failed = errors(keyed, "key_store")
    redis.kill()
    for _ in range(10):
        check_unavailable(HTTP.post(keyed.url + "/translate", json=KEYED), "key store")
    check_unavailable(HTTP.post(keyed.url + "/detect", json={"q": "hello", "api_key": "good-key"}), "key store")
    ready = HTTP.get(keyed.url + "/health/ready")
    assert ready.status_code == 503 and "key store unavailable" in ready.json()["reason"]
    assert HTTP.get(keyed.url + "/health/live").status_code == 200
    assert up(keyed, "key_store") == 0 and errors(keyed, "key_store") > failed
    redis.start()
    assert ready_within(keyed, 2.0) < 2.0
    assert HTTP.post(keyed.url + "/translate", json=KEYED).status_code == 200
    assert up(keyed, "key_store") == 1
    assert log_count(keyed, "key store unavailable:") == lines + 1  # once per outage, not once per request
    assert log_count(keyed, "key store is back") == ended + 1


def test_redis_paused_costs_a_request_its_budget(redis_faults):
    """SIGSTOP of Redis (connections accepted, nothing answered): a request gets its 503 within the budget (0.5 s),
    the next ones at once, readiness 503 within the budget too; SIGCONT: ready again within 2 s."""
    # catches: Redis calls without a timeout (redis-py's default waits 5 s, then retries)
    redis, keyed, _ = redis_faults
    assert HTTP.post(keyed.url + "/translate", json=KEYED).status_code == 200
    redis.pause()
    try:
        start = time.monotonic()
        check_unavailable(HTTP.post(keyed.url + "/translate", json=KEYED), "no answer within 0.5s")
        first = time.monotonic() - start
        start = time.monotonic()
        check_unavailable(HTTP.post(keyed.url + "/translate", json=KEYED), "key store")
        second = time.monotonic() - start
        assert HTTP.get(keyed.url + "/health/ready").status_code == 503
    finally:
        redis.resume()
    assert BUDGET_S * 0.9 < first < BUDGET_S + 0.5 and second < 0.2, (first, second)
    assert ready_within(keyed, 2.0) < 2.0
    assert HTTP.post(keyed.url + "/translate", json=KEYED).status_code == 200


def test_redis_down_cache_misses_and_stored_glossaries_refused(redis_faults):
    """No keys; the cache and glossaries in Redis, killed: translations go on uncached (X-Cache miss), inline
    glossaries too; a request naming a stored glossary, and the glossary routes, get 503 naming the glossary store;
    readiness stays 200 (nothing every request needs is down); the cache's outage is logged once. Redis back: the
    stored glossary serves again within 2 s."""
    # catches: a cache outage turned into errors; the glossary store refusing requests that do not name a glossary
    redis, _, cached = redis_faults
    made = HTTP.post(cached.url + "/glossaries", json={"name": "g", "source": "en", "target": "es",
                                                       "entries": "cat\tgato"})  # fmt: skip
    assert made.status_code == 201, made.text
    stored = body("the cat", glossary_id=made.json()["glossary_id"])
    assert HTTP.post(cached.url + "/translate", json=stored).status_code == 200
    lines = log_count(cached, "cache unavailable:")
    redis.kill()
    try:
        for i in range(5):
            r = HTTP.post(cached.url + "/translate", json=body(f"the dog {i} runs"))
            assert r.status_code == 200 and r.headers["x-cache"] == "miss", r.text
        check_unavailable(HTTP.post(cached.url + "/translate", json=stored), "glossary store")
        check_unavailable(HTTP.get(cached.url + "/glossaries"), "glossary store")
        inline = HTTP.post(cached.url + "/translate", json=body("the cat", glossary={"cat": "gato"}))
        assert inline.status_code == 200, inline.text
        assert HTTP.get(cached.url + "/health/ready").status_code == 200
        assert up(cached, "cache") == 0 and up(cached, "glossary_store") == 0
        assert log_count(cached, "cache unavailable:") == lines + 1
    finally:
        redis.start()
    deadline = time.monotonic() + 2.0
    while HTTP.post(cached.url + "/translate", json=stored).status_code != 200 or up(cached, "cache") != 1:
        assert time.monotonic() < deadline, cached.log_tail()
        time.sleep(0.05)
