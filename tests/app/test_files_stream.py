"""/translate_file's progress stream, in-process against an engine core served from a thread: a stream whose events
are never read (the client gone before the first write) is no longer counted in flight and its engine work stops."""

from __future__ import annotations

import asyncio
import time

from app.main import create_app
from tests.app.inprocess import service_with

BOUNDARY = "mtboundary"
LINES = 6  # one unit each


def multipart(text: str) -> bytes:
    """A multipart body: the file `a.txt` and source/target fields."""
    parts = [
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n'
        f"Content-Type: text/plain\r\n\r\n{text}\r\n",
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="source"\r\n\r\nen\r\n',
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="target"\r\n\r\nes\r\n',
        f"--{BOUNDARY}--\r\n",
    ]
    return "".join(parts).encode()


def scope_for(raw: bytes) -> dict:
    """An ASGI 2.3 HTTP scope for POST /translate_file asking for progress events."""
    headers = [
        (b"content-type", f"multipart/form-data; boundary={BOUNDARY}".encode()),
        (b"content-length", str(len(raw)).encode()),
        (b"accept", b"text/event-stream"),
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/translate_file",
        "raw_path": b"/translate_file",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }


def test_progress_stream_never_read_releases_its_count_and_work(served, faulty):
    """Client gone while the response starts: no event is written, the request is no longer in flight (draining
    would wait for it otherwise) and the file's units leave the engine aborted, not translated for nobody.
    Catches the count decremented only in the event generator's `finally` (a generator never started never runs
    it) and the task left running."""
    service = service_with(served)
    faulty.step_delay = 0.02  # the units cannot finish before the disconnect
    raw = multipart("\n".join(f"the cat sleeps in the house number {i}" for i in range(LINES)) + "\n")
    messages = [{"type": "http.request", "body": raw, "more_body": False}]
    sent = []

    async def receive() -> dict:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message["type"])
        await asyncio.sleep(0.05)  # a slow socket: the disconnect is noticed first

    async def run() -> None:
        app = create_app(service=service)
        await service.start()
        try:
            while not service.loaded:
                await asyncio.sleep(0.01)
            await app(scope_for(raw), receive, send)
            await asyncio.sleep(0.2)  # the abort messages leave before the socket closes
        finally:
            await service.stop()

    asyncio.run(run())
    assert "http.response.body" not in sent  # no event was written
    assert service.inflight == 0
    aborted = lambda: served.core.metrics.requests.labels("en-es", "aborted")._value.get()
    deadline = time.monotonic() + 5
    while (served.core.load != (0, 0) or aborted() < 1) and time.monotonic() < deadline:
        time.sleep(0.01)
    faulty.step_delay = 0.0
    assert served.core.load == (0, 0)
    assert aborted() >= 1
