"""Server-sent events: one event's text, and the response that streams them and releases its work however it ends."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send


def event(name: str, data: dict) -> str:
    """One server-sent event."""
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


class EventStream(StreamingResponse):
    """Events of work counted in flight (for draining, `Service.hold`): however the response ends, even never started
    (its events never read), the work is stopped (`stop`) and its count released (`release`)."""

    def __init__(self, events: AsyncIterator[str], stop: Callable[[], object], release: Callable[[], None]):
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        super().__init__(events, media_type="text/event-stream", headers=headers)
        self.stop, self.release = stop, release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.stop()
            self.release()
            await self.body_iterator.aclose()  # a write that failed left it at a yield (app.write_timeout)
