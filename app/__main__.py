"""`python -m app`: serve the models; flags override MT_* environment settings; SIGTERM drains."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

import uvicorn

from app.main import create_app
from app.service import Service
from app.settings import Settings

FLAGS = {
    "max_batch_size": int,
    "max_batch_tokens": int,
    "max_prefill_tokens": int,
    "max_wait_ms": float,
    "max_queue": int,
    "max_input_tokens": int,
    "max_items": int,
    "max_new_tokens": int,
    "default_max_new_tokens": int,
    "max_beam_size": int,
    "max_body_bytes": int,
    "drain_seconds": float,
    "keepalive_seconds": float,
    "warmup_rounds": int,
}


def parse_args(argv: list[str] | None = None) -> dict:
    """Flags given on the command line (unset ones fall back to MT_* settings)."""
    p = argparse.ArgumentParser(prog="python -m app", description=__doc__)
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--model", dest="models", action="append", help="SRC-TGT=DIR, DIR or hub id (repeatable)")
    p.add_argument("--device", help="auto, cpu, cuda, cuda:1 ...")
    p.add_argument("--dtype", choices=["auto", "float32", "float16", "bfloat16"])
    p.add_argument("--log-level")
    p.add_argument(
        "--cuda-graphs",
        action=argparse.BooleanOptionalAction,
        help="on CUDA, capture the static-shape decode step as CUDA graphs at start-up and replay them (default on)",
    )
    for name, kind in FLAGS.items():
        p.add_argument("--" + name.replace("_", "-"), type=kind)
    return {k: v for k, v in vars(p.parse_args(argv)).items() if v is not None}


class DrainingServer(uvicorn.Server):
    """On SIGTERM/SIGINT: readiness turns 503 and new work is refused, in-flight requests finish, then exit."""

    def __init__(self, config: uvicorn.Config, service: Service):
        super().__init__(config)
        self.service = service
        self.draining = False
        self.fatal: str | None = None
        service.on_fatal = self.fail

    def fail(self, reason: str) -> None:
        """A model could not load: stop serving and exit non-zero (an orchestrator restarts the process)."""
        self.fatal = reason
        self.should_exit = True

    def handle_exit(self, sig: int, frame) -> None:
        if self.draining or sig != signal.SIGTERM:
            return super().handle_exit(sig, frame)
        self.draining = self.service.draining = True
        logging.getLogger("mt").info("SIGTERM: draining for up to %.0fs", self.service.settings.drain_seconds)

        def drain() -> None:
            self.service.wait_drained(self.service.settings.drain_seconds)
            self.should_exit = True

        threading.Thread(target=drain, name="drain", daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    """Run one uvicorn worker (one model copy per process) with the settings."""
    settings = Settings(**parse_args(argv))
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        timeout_graceful_shutdown=5,  # after our own drain (drain_seconds), only stragglers are left
    )
    server = DrainingServer(config, app.state.service)
    server.run()
    if server.fatal:
        sys.exit(f"error: {server.fatal}")  # one line on stderr, exit status 1


if __name__ == "__main__":
    main()
