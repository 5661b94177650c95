"""`python -m app` runs this launcher: one engine core process per model and `workers` HTTP worker processes on one
listening socket. SIGTERM drains the workers, then stops the cores. If any of them dies, the launcher stops the
rest and exits non-zero, so that its supervisor (Docker, Kubernetes, systemd) starts the server again."""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.context import SpawnProcess
from pathlib import Path

from app.children import engine_core, http_worker
from app.settings import BUILTIN, Settings

log = logging.getLogger("mt.launcher")
CHILD_DIED = 1  # exit code when an engine core or an HTTP worker ended by itself
spawn = multiprocessing.get_context("spawn")  # children start clean: no copy of this process's threads or torch


@dataclass
class Child:
    """A child process and our end of a pipe to it: when we close it, or die, the child sees EOF; a child that
    cannot go on may send the reason through it before it exits."""

    role: str
    process: SpawnProcess
    pipe: Connection

    def last_words(self) -> str:
        """Why it exited: what it sent, else its exit code."""
        try:
            if self.pipe.poll():
                return str(self.pipe.recv())
        except (EOFError, OSError):
            pass
        return f"{self.role} exited with code {self.process.exitcode}"

    def close_pipe(self) -> None:
        """Tell the child to stop (an engine core stops at once; a worker exits without draining)."""
        self.pipe.close()

    def signal(self, sig: int) -> None:
        """Send a signal if it still runs."""
        if self.process.exitcode is None:
            os.kill(self.process.pid, sig)

    def join(self, timeout: float) -> None:
        """Wait for it; kill it after `timeout` seconds."""
        self.process.join(timeout)
        if self.process.exitcode is None:
            log.error("%s (pid %s) did not stop in %.0fs: killing it", self.role, self.process.pid, timeout)
            self.process.kill()
            self.process.join()


def listen(host: str, port: int, n: int) -> list[socket.socket]:
    """n listening sockets on one port; with several, SO_REUSEPORT makes the kernel spread connections evenly
    (one shared socket would let whichever worker wakes first accept a whole burst)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    socks = [socket.create_server((host, port), family=family, backlog=2048, reuse_port=n > 1) for _ in range(n)]
    log.info("listening on http://%s:%d (%d worker%s)", host, port, n, "s" * (n > 1))
    return socks


def wakeup_pipe() -> int:
    """The read end of a pipe that every caught signal writes a byte to (signal.set_wakeup_fd): readable as soon as
    a signal arrives, for wait() to return at once."""
    wakeup, waker = os.pipe()
    os.set_blocking(waker, False)
    signal.set_wakeup_fd(waker)
    return wakeup


def start(role: str, target, *args) -> Child:
    """Spawn a child running target(*args, pipe)."""
    theirs, ours = spawn.Pipe()
    process = spawn.Process(target=target, args=(*args, theirs), name=role, daemon=False)
    process.start()
    theirs.close()
    log.info("started %s (pid %d)", role, process.pid)
    return Child(role, process, ours)


class Launcher:
    """Starts the children, forwards SIGTERM/SIGINT to the workers, and watches that nothing dies."""

    def __init__(self, settings: Settings, run_dir: Path):
        self.settings, self.received, self.fatal = settings, None, ""
        specs = settings.models or [str(BUILTIN)]
        addresses = [f"ipc://{run_dir}/core-{i}.sock" for i in range(len(specs))]
        config = settings.model_dump()
        self.cores = [
            start(f"engine core {i} ({spec})", engine_core, spec, config, address)
            for i, (spec, address) in enumerate(zip(specs, addresses, strict=True))
        ]
        self.workers = []
        for i, sock in enumerate(listen(settings.host, settings.port, settings.workers)):
            self.workers.append(start(f"http worker {i}", http_worker, config, addresses, sock))
            sock.close()  # the worker holds its own copy
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        self.wakeup = wakeup_pipe()  # run() wakes at once on a signal, not at its next poll

    def _on_signal(self, sig: int, frame) -> None:
        self.received = sig

    @property
    def children(self) -> list[Child]:
        return self.cores + self.workers

    def run(self) -> int:
        """Watch the children until a signal (drain, exit 0) or a death (stop the rest, exit non-zero)."""
        while True:
            wait([self.wakeup, *(c.process.sentinel for c in self.children)], timeout=0.2)
            if self.received is not None:
                return self.stop(self.received)
            dead = next((c for c in self.children if c.process.exitcode is not None), None)
            if dead is not None:
                self.fatal = dead.last_words()
                log.error("%s exited with code %s: stopping the server", dead.role, dead.process.exitcode)
                self.stop(signal.SIGTERM)
                return CHILD_DIED

    def stop(self, sig: int) -> int:
        """Workers first (SIGTERM: they drain their in-flight requests), then the engine cores."""
        for w in self.workers:
            w.signal(sig)
        for w in self.workers:
            w.join(self.settings.drain_seconds + 10)
        for c in self.cores:
            c.close_pipe()
        for c in self.cores:
            c.join(10)
        codes = [w.process.exitcode for w in self.workers]
        return 0 if all(code == 0 for code in codes) else CHILD_DIED


def launch(settings: Settings) -> int:
    """Run the server; the exit code for the process."""
    run_dir = Path(tempfile.mkdtemp(prefix="mt-server-"))  # engine sockets and metrics files, private (0700)
    (run_dir / "metrics").mkdir()
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(run_dir / "metrics")  # inherited by every child
    try:
        launcher = Launcher(settings, run_dir)
        code = launcher.run()
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    if launcher.fatal:
        print(f"error: {launcher.fatal}", file=sys.stderr, flush=True)  # the last line of the log says why
    return code
