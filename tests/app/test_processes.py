"""The server's processes: HTTP workers hold no model (no torch), several of them share one engine core and its
batches, and a core killed under load fails every in-flight request at once and takes the server down with a
non-zero exit code, for its supervisor to restart it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from bench.harness.client import HTTP, metrics, parse_sse, value
from bench.harness.procs import connections, has_torch
from bench.harness.server import ServerProcess
from tests.app.helpers import LONG, body, offline, wait_for

TEXTS = ["the cat sleeps", "a big red dog runs in the city", "hello world", "the small green tree eats the house"]


@pytest.fixture(scope="module")
def two_workers(native_dir):
    """Two HTTP workers in front of one engine core of 8 rows."""
    proc = ServerProcess("--model", str(native_dir), "--workers", "2", "--max-batch-size", "8", "--warmup-rounds", "0")
    yield proc.wait()
    proc.stop()


async def together(url: str, bodies: list[dict], port: int, workers: list[int]) -> tuple[list[httpx.Response], list]:
    """Send every body at once on its own connection; also how many connections each worker holds meanwhile."""
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=httpx.Limits(max_connections=len(bodies))) as c:
        sent = asyncio.gather(*(c.post("/translate", json=b) for b in bodies))
        await asyncio.sleep(0.3)
        held = [connections(pid, port) for pid in workers]
        return await sent, held


def test_two_workers_share_one_core(two_workers, checkpoint):
    """One core with torch, two workers without; 16 connections spread over both workers, every answer equals
    the offline oracle, their rows were batched together, and either worker's /metrics counts all requests."""
    cores, workers = two_workers.processes()
    assert len(cores) == 1 and len(workers) == 2
    assert not any(has_torch(pid) for pid in workers)
    before = metrics(two_workers.url)
    bodies = [body(TEXTS[i % 4], parameters={"max_new_tokens": 60, "min_new_tokens": 40}) for i in range(16)]
    answers, held = asyncio.run(together(two_workers.url, bodies, two_workers.port, workers))
    assert all(n > 0 for n in held), f"connections per worker: {held}"
    for i, r in enumerate(answers):
        assert r.status_code == 200, r.text
        assert r.json()["translatedText"] == offline(checkpoint, TEXTS[i % 4], max_new_tokens=60, min_new_tokens=40)[0]
    samples = [metrics(two_workers.url) for _ in range(4)]  # answered by either worker
    finished = lambda m: sum(value(m, "mt_requests_total", model="en-es", finish_reason=r) for r in ("eos", "length"))
    for after in samples:
        assert finished(after) - finished(before) == 16
        steps = value(after, "mt_batch_size_count") - value(before, "mt_batch_size_count")
        rows = value(after, "mt_batch_size_sum") - value(before, "mt_batch_size_sum")
        assert rows / steps > 4, "the two workers' requests were not batched together"


def test_killed_launcher_takes_its_children_along(two_workers):
    """kill -9 of the launcher (runs last on this server): the core and both workers see their pipe close and
    exit, so no orphan keeps the port or the model."""
    cores, workers = two_workers.processes()
    os.kill(two_workers.proc.pid, signal.SIGKILL)
    two_workers.proc.wait(5)
    alive = lambda: [pid for pid in cores + workers if os.path.exists(f"/proc/{pid}") and not zombie(pid)]
    wait_for(lambda: not alive(), timeout=15)


def zombie(pid: int) -> bool:
    """An exited process not yet reaped by its (dead) parent."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def stream_outcome(url: str, payload: dict) -> tuple[str, float]:
    """The last event of a stream and when it came."""
    try:
        with HTTP.stream("POST", url + "/translate", json={**payload, "stream": True}, timeout=30) as r:
            events = parse_sse(r.read().decode())
        return events[-1].event if events else "none", time.monotonic()
    except httpx.TransportError as exc:
        return type(exc).__name__, time.monotonic()


def json_outcome(url: str, payload: dict) -> tuple[int | str, float]:
    """The status of a JSON answer (or the transport error) and when it came."""
    try:
        r = HTTP.post(url + "/translate", json=payload, timeout=30)
        return (r.status_code, r.json()["error_type"]), time.monotonic()
    except httpx.TransportError as exc:
        return type(exc).__name__, time.monotonic()


def test_killed_core_fails_in_flight_at_once_and_exits_non_zero(native_dir):
    """kill -9 of the engine core while JSON and SSE requests run: each gets its error (503 not_ready, an SSE
    error event) within a second, and the launcher stops the workers and exits 1."""
    server = ServerProcess("--model", str(native_dir), "--max-batch-size", "4", "--warmup-rounds", "0").wait()
    try:
        (core,), _ = server.processes()
        texts = [f"the dog {i} runs in the city" for i in range(32)]  # 8 rounds of 4 rows: seconds of work, so that
        job = body(texts, parameters=LONG)  # the running job cannot finish before the kill (4 texts could, in 0.3 s)
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(json_outcome, server.url, job) for _ in range(2)]
            futures += [pool.submit(stream_outcome, server.url, job) for _ in range(2)]
            finished = lambda m: sum(v for (name, _), v in m.items() if name == "mt_requests_total")  # noqa: E731
            seen = lambda m: value(m, "mt_requests_running") + value(m, "mt_requests_waiting") + finished(m)  # noqa: E731
            wait_for(lambda: seen(metrics(server.url)) == 4 * 32, timeout=30)  # all four jobs are in
            assert not any(f.done() for f in futures)
            os.kill(core, signal.SIGKILL)
            killed = time.monotonic()
            outcomes = [f.result() for f in futures]
        assert [o for o, _ in outcomes[:2]] == [(503, "not_ready")] * 2
        assert [o for o, _ in outcomes[2:]] == ["error"] * 2
        assert max(t for _, t in outcomes) - killed < 1.0
        code = server.proc.wait(15)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the server did not exit after its core died:\n{server.log_tail()}")
    finally:
        server.stop()
    assert code == 1, server.log_tail()
    assert "exited with code -9" in server.log_path.read_text()
