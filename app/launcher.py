"""`python -m app` runs this launcher: one engine core process per model and `workers` HTTP worker processes on one
listening socket. SIGTERM drains the workers, then stops the cores. A worker that dies is started again on the same
socket (it holds no weights; connections wait in the socket's queue meanwhile, the other workers' requests go on), as
gunicorn's arbiter does, unless it has died max_worker_deaths times within worker_death_window_seconds. That, or an
engine core's death, stops the rest and exits non-zero, so that the supervisor (Docker, Kubernetes, systemd) starts
the server again."""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.context import SpawnProcess
from pathlib import Path

from prometheus_client import multiprocess

from app.children import engine_core, http_worker
from app.engine.threads import core_environment
from app.settings import BUILTIN, Settings

log = logging.getLogger("mt.launcher")
CHILD_DIED = 1  # exit code when an engine core, or an HTTP worker too often, ended by itself
spawn = multiprocessing.get_context("spawn")  # children start clean: no copy of this process's threads or torch


@dataclass
class Child:
    """A child process and our end of a pipe to it: when we close it, or die, the child sees EOF; a child that
    cannot go on may send the reason through it before it exits."""

    role: str
    process: SpawnProcess
    pipe: Connection
    deaths: deque[float] = field(default_factory=deque)  # when the ones before it in its place died (monotonic)

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
    """Starts the children, forwards SIGTERM/SIGINT to the workers, replaces dead workers, and stops everything when
    an engine core dies."""

    def __init__(self, settings: Settings, run_dir: Path):
        self.settings, self.received, self.fatal = settings, None, ""
        specs = settings.models or [str(BUILTIN)]
        self.addresses = [f"ipc://{run_dir}/core-{i}.sock" for i in range(len(specs))]
        self.config = settings.model_dump()
        core_environment()  # inherited: OpenMP reads it when torch loads, torch's allocator at its first block
        self.cores = [
            start(f"engine core {i} ({spec})", engine_core, spec, self.config, address)
            for i, (spec, address) in enumerate(zip(specs, self.addresses, strict=True))
        ]
        self.sockets = listen(settings.host, settings.port, settings.workers)  # kept for the workers' replacements
        self.workers = [self._worker(i, replacement=False) for i in range(settings.workers)]
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        self.wakeup = wakeup_pipe()  # run() wakes at once on a signal, not at its next poll

    def _worker(self, i: int, replacement: bool) -> Child:
        """Start HTTP worker i on its socket."""
        return start(f"http worker {i}", http_worker, self.config, self.addresses, self.sockets[i], replacement)

    def _on_signal(self, sig: int, frame) -> None:
        self.received = sig

    @property
    def children(self) -> list[Child]:
        return self.cores + self.workers

    def run(self) -> int:
        """Watch the children until a signal (drain, exit 0) or a fatal death (stop the rest, exit non-zero); replace
        the workers that die meanwhile."""
        while True:
            wait([self.wakeup, *(c.process.sentinel for c in self.children)], timeout=0.2)
            if self.received is not None:
                return self.stop(self.received)
            dead = next((c for c in self.cores if c.process.exitcode is not None), None)
            if dead is not None:
                self.fatal = dead.last_words()
                log.error("%s exited with code %s: stopping the server", dead.role, dead.process.exitcode)
            for i, worker in enumerate(self.workers):
                if worker.process.exitcode is not None and not self.fatal:
                    self.replace(i)
            if self.fatal:
                self.stop(signal.SIGTERM)
                return CHILD_DIED

    def replace(self, i: int) -> None:
        """Start dead worker i again, unless this is its max_worker_deaths-th death within the window (then `fatal`
        says why)."""
        dead, now = self.workers[i], time.monotonic()
        why, window = dead.last_words(), self.settings.worker_death_window_seconds
        multiprocess.mark_process_dead(dead.process.pid)  # its live gauges leave /metrics
        dead.pipe.close()
        deaths = dead.deaths
        deaths.append(now)
        while now - deaths[0] > window:
            deaths.popleft()
        if len(deaths) >= self.settings.max_worker_deaths:
            self.fatal = f"{dead.role} died {len(deaths)} times within {window:g}s (last: {why})"
            log.error("%s: stopping the server", self.fatal)
            return
        log.error("%s (pid %d) died (%s): starting it again (%d of %d deaths within %gs)", dead.role,
                  dead.process.pid, why, len(deaths), self.settings.max_worker_deaths, window)  # fmt: skip
        self.workers[i] = self._worker(i, replacement=True)
        self.workers[i].deaths = deaths

    def stop(self, sig: int) -> int:
        """Workers first (SIGTERM: they drain their in-flight requests), then the engine cores. The launcher's copies
        of the listening sockets close first, so that once the workers close theirs new connections are refused."""
        for sock in self.sockets:
            sock.close()
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
