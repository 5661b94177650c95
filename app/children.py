"""Entry points of the launcher's child processes. Importing this module loads neither torch nor FastAPI, so the
launcher stays small; each child imports what it needs."""

from __future__ import annotations

import logging
import os
import sys


def engine_core(*args) -> None:
    """An engine core process (app.engine.proc.core_main); once it has stopped serving, it exits at once."""
    from app.engine.proc import core_main

    core_main(*args)
    exit_now(0)


def http_worker(*args) -> None:
    """An HTTP worker process (app.worker.worker_main); once uvicorn has shut down, it exits at once."""
    from app.worker import worker_main

    worker_main(*args)
    exit_now(0)


def exit_now(code: int) -> None:
    """Flush the logs and standard streams, then exit without the interpreter's teardown: for a process that has
    closed its sockets there is nothing left to save, and tearing torch down alone takes about 0.4 s."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
