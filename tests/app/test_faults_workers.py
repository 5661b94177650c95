"""An HTTP worker killed mid-stream: its own connections end, the other worker's streams finish untouched, the
launcher starts it again on the same socket and the server stays up; a worker that keeps dying stops the server with
exit 1."""

from __future__ import annotations

import os
import signal

import pytest

from bench.harness.client import HTTP, metrics, value
from bench.harness.server import ServerProcess
from tests.app.faults import RawStream, holder, log_count
from tests.app.helpers import LONG, body, wait_for

LONG_JOB = body([f"the dog {i} runs in the city" for i in range(32)], parameters=LONG)  # 4 rounds of 16 rows


def stream_on_each(server: ServerProcess, workers: list[int]) -> dict[int, RawStream]:
    """One long stream per worker (32 texts of 255 forced tokens: seconds of work), each with its first token, in the
    order they were opened. A stream the kernel gives to a worker that has one already is closed at once."""
    found: dict[int, RawStream] = {}
    for _ in range(40):
        s = RawStream(server.url, LONG_JOB)
        wait_for(lambda: holder(workers, s.port) is not None, timeout=5)  # noqa: B023
        pid = holder(workers, s.port)
        if pid in found:
            s.close()
            continue
        found[pid] = s
        if len(found) == len(workers):
            for s in found.values():
                assert s.read(until="event: token") == "", s.body
            return found
    pytest.fail("the kernel gave 40 connections in a row to one worker")


def test_killed_worker_is_replaced_and_its_neighbours_untouched(native_dir):
    """kill -9 of a worker while streams run on both: its streams end without `done`, the other worker's end with
    `done`; a new worker takes its place (readiness 200 from both, requests pass), and the server runs on. Its next
    death within the window (--max-worker-deaths 2) stops the server with exit 1, naming why."""
    # catches: the launcher stopping the server at the first worker death (as before), or never replacing it
    args = ("--model", str(native_dir), "--workers", "2", "--max-batch-size", "16", "--warmup-rounds", "0")
    server = ServerProcess(*args, "--max-worker-deaths", "2").wait()
    try:
        _, workers = server.processes()
        streams = stream_on_each(server, workers)
        survivor, victim = streams  # the victim's stream, opened last, is the further from its end
        os.kill(victim, signal.SIGKILL)
        assert streams[victim].read() in ("reset", "eof")
        assert streams[survivor].read() == "done" and streams[survivor].events()[-1].event == "done"
        wait_for(lambda: len(server.processes()[1]) == 2 and victim not in server.processes()[1], timeout=15)
        server.wait()  # both workers ready, ten times in a row on fresh connections
        assert server.proc.poll() is None and log_count(server, "starting it again") == 1
        for i in range(4):
            assert HTTP.post(server.url + "/translate", json=body(f"the cat {i}")).status_code == 200
        assert value(metrics(server.url), "mt_worker_restarts_total") == 1
        (replacement,) = set(server.processes()[1]) - {survivor}
        os.kill(replacement, signal.SIGKILL)
        assert server.proc.wait(30) == 1
        assert "http worker" in server.log_tail() and "died 2 times within 60s" in server.log_tail()
    finally:
        server.stop()
