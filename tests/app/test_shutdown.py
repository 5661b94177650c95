"""Stopping at once, in-process: the launcher's wait wakes on a signal instead of at its next poll, and a child
process ends without the interpreter's teardown once its entry point returns, its logs flushed first."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from multiprocessing.connection import wait

import app.engine.proc
import app.worker
from app import children
from app.launcher import wakeup_pipe


def test_a_signal_wakes_the_launchers_wait_at_once():
    """A caught signal makes the wakeup pipe readable: wait() returns then, not at its 10 s timeout."""
    caught: list[int] = []
    previous_handler = signal.signal(signal.SIGUSR1, lambda sig, frame: caught.append(sig))
    previous_fd = signal.set_wakeup_fd(-1)
    fd = wakeup_pipe()
    try:
        threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        start = time.monotonic()
        ready = wait([fd], timeout=10)
        took = time.monotonic() - start
    finally:
        os.close(signal.set_wakeup_fd(previous_fd))
        os.close(fd)
        signal.signal(signal.SIGUSR1, previous_handler)
    assert ready == [fd] and caught == [signal.SIGUSR1]
    assert took < 5, f"wait() returned after {took:.1f}s: the signal did not wake it"


def test_a_child_exits_without_teardown_once_its_entry_point_returns(monkeypatch):
    """engine_core and http_worker: the entry point runs to its end, the logs are flushed, then os._exit(0)."""
    calls: list = []
    monkeypatch.setattr(app.engine.proc, "core_main", lambda *args: calls.append(("core", args)))
    monkeypatch.setattr(app.worker, "worker_main", lambda *args: calls.append(("worker", args)))
    monkeypatch.setattr(logging, "shutdown", lambda: calls.append("logs flushed"))
    monkeypatch.setattr(os, "_exit", lambda code: calls.append(("exit", code)))
    children.engine_core("spec", "settings")
    children.http_worker("settings")
    assert calls == [("core", ("spec", "settings")), "logs flushed", ("exit", 0)] + [
        ("worker", ("settings",)), "logs flushed", ("exit", 0)]  # fmt: skip
