"""Entry points of the launcher's child processes. Importing this module loads neither torch nor FastAPI, so the
launcher stays small; each child imports what it needs."""

from __future__ import annotations


def engine_core(*args) -> None:
    """An engine core process (app.engine.proc.core_main)."""
    from app.engine.proc import core_main

    core_main(*args)


def http_worker(*args) -> None:
    """An HTTP worker process (app.worker.worker_main)."""
    from app.worker import worker_main

    worker_main(*args)
