"""An HTTP worker process: uvicorn serving the app on the launcher's socket; SIGTERM drains; it exits at once if
the launcher goes away."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import threading
from multiprocessing.connection import Connection

import uvicorn

from app.main import create_app
from app.service import Service
from app.settings import Settings

log = logging.getLogger("mt")


class DrainingServer(uvicorn.Server):
    """On SIGTERM or SIGINT (Ctrl+C reaches the worker from the terminal and again from the launcher): readiness
    turns 503 and new work is refused, in-flight requests finish, then exit 0."""

    def __init__(self, config: uvicorn.Config, service: Service, parent: Connection | None = None):
        super().__init__(config)
        self.service, self.parent = service, parent
        self.draining = False
        service.abort_connection = self.abort_connection

    def abort_connection(self, scope: dict) -> None:
        """Close the connection serving a request at once, dropping what it has not sent (app.write_timeout: a
        client that stopped reading; uvicorn's own close would wait for it to read the buffered data first)."""
        for protocol in list(self.server_state.connections):
            cycle = getattr(protocol, "cycle", None)
            if cycle is not None and cycle.scope is scope:
                protocol.transport.abort()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.parent is not None:  # readable once the launcher closes its end or dies
            asyncio.get_running_loop().add_reader(self.parent.fileno(), self._orphaned)

    def _orphaned(self) -> None:
        """The launcher is gone: stop now (its engine cores are going too)."""
        log.error("the launcher is gone: exiting")
        asyncio.get_running_loop().remove_reader(self.parent.fileno())
        self.should_exit = self.force_exit = True

    def handle_exit(self, sig: int, frame) -> None:
        if sig not in (signal.SIGTERM, signal.SIGINT):
            return super().handle_exit(sig, frame)
        if self.draining:  # Ctrl+C's second copy changes nothing; a second SIGTERM stops at once, as before
            return None if sig == signal.SIGINT else super().handle_exit(sig, frame)
        self.draining = self.service.draining = True
        log.info("%s: draining for up to %.0fs", signal.Signals(sig).name, self.service.settings.drain_seconds)

        def drain() -> None:
            self.service.wait_drained(self.service.settings.drain_seconds)
            self.should_exit = True

        threading.Thread(target=drain, name="drain", daemon=True).start()


def worker_main(settings: dict, cores: list[str], sock: socket.socket, replacement: bool, parent: Connection) -> None:
    """A spawned HTTP worker: the app, connected to every engine core, on the shared listening socket; a
    replacement of a worker that died counts in mt_worker_restarts_total."""
    s = Settings(**settings)
    logging.basicConfig(level=s.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(s, Service(s, cores))
    if replacement:
        app.state.service.metrics.worker_restarts.inc()
    config = uvicorn.Config(
        app,
        log_level=s.log_level,
        timeout_graceful_shutdown=5,  # after our own drain (drain_seconds), only stragglers are left
    )
    DrainingServer(config, app.state.service, parent).run(sockets=[sock])
