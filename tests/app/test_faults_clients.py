"""A client that stops reading its stream: the server's writes stop once its buffers fill (bounded memory), and after
--write-timeout-seconds the response is aborted: its engine rows leave the batch long before the job would have
finished, its connection is closed, it counts as stalled_client; the other requests go on."""

from __future__ import annotations

import time

import pytest

from bench.harness.client import HTTP, metrics, value
from bench.harness.server import ServerProcess
from tests.app.faults import RawStream, holder
from tests.app.helpers import LONG, body, wait_for

TIMEOUT_S = 0.5  # --write-timeout-seconds of this server
JOB = body([f"the dog {i} runs in the big city" for i in range(64)], parameters=LONG)  # 16 rounds of 4 rows


@pytest.fixture(scope="module")
def impatient(native_dir):
    """4 rows, a short write timeout."""
    args = ("--model", str(native_dir), "--max-batch-size", "4", "--warmup-rounds", "0")
    server = ServerProcess(*args, "--write-timeout-seconds", str(TIMEOUT_S)).wait()
    yield server
    server.stop()


def test_a_client_that_stops_reading_is_dropped(impatient):
    """A 64-text stream whose client (a 4 KiB receive buffer) reads only its first token: within the timeout (plus
    the time to fill the buffers) the server counts it stalled, aborts its job (most of its units never ran),
    closes the connection; a request after it is served."""
    # catches: a stream blocked forever in its write (no timeout), or a connection left open after it
    url = impatient.url
    before = metrics(url)
    stream = RawStream(url, JOB, rcvbuf=4096)
    assert stream.read(until="event: token") == ""
    started = time.monotonic()
    wait_for(lambda: value(metrics(url), "mt_request_failures_total", error_type="stalled_client") == 1, timeout=10)
    stalled_after = time.monotonic() - started
    wait_for(lambda: value(metrics(url), "mt_requests_running") == 0, timeout=5)
    after = metrics(url)
    aborted = value(after, "mt_requests_total", model="en-es", finish_reason="aborted") - value(
        before, "mt_requests_total", model="en-es", finish_reason="aborted"
    )
    assert aborted >= 8, f"{aborted} of 64 units aborted: the job ran on"
    assert stalled_after < 5.0
    _, workers = impatient.processes()
    assert holder(workers, stream.port) is None  # the server's end is gone
    assert stream.read(timeout=5) in ("reset", "eof")  # what was buffered, then the end without `done`
    assert "event: done" not in stream.body.decode(errors="replace")
    stream.close()
    assert HTTP.post(url + "/translate", json=body("the cat sleeps")).status_code == 200
