"""Clients that stop reading. What waits for such a client is bounded: uvicorn pauses a response once 64 KiB of it wait
in its buffer (on top of the kernel's socket buffer), and the response's next write then waits for the client. A write
that waits longer than write_timeout_seconds ends the response: its work is released (a stream's job is aborted, so
its engine rows leave the batch) and its connection is closed at once, dropping what the client has not read."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("mt.clients")


class Stalled(Exception):
    """The client took none of a response's data for the timeout."""


class WriteTimeout:
    """ASGI middleware: every write of a response within `timeout` seconds, else abort it and its connection
    (`abort(scope)`: the HTTP server's; a plain close would wait for the client to read what is buffered first)."""

    def __init__(self, app: ASGIApp, timeout: float, abort: Callable[[Scope], None], on_error: Callable[[str], None]):
        self.app, self.timeout, self.abort, self.on_error = app, timeout, abort, on_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def timed(message: Message) -> None:
            try:
                async with asyncio.timeout(self.timeout):
                    await send(message)
            except TimeoutError:
                raise Stalled from None

        try:
            await self.app(scope, receive, timed)
        except Stalled:
            host, port = scope.get("client") or ("?", "?")
            log.warning("client %s:%s read nothing of %s for %gs: response aborted", host, port, scope["path"],
                        self.timeout)  # fmt: skip
            self.on_error("stalled_client")
            self.abort(scope)
            await asyncio.sleep(0)  # the transport reports the connection lost, so uvicorn sees a disconnect
