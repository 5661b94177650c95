"""Start the real server (`python -m app`, uvicorn) on 127.0.0.1 in a subprocess, for tests and benchmarks; a Redis
server and an API key file beside it; the processes it runs."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from app.keys.records import KeyRecord
from app.keys.redis_store import RedisStore
from app.keys.sqlite_store import SqliteStore
from bench.harness.client import HTTP
from bench.harness.procs import children, has_torch, is_python_child

ROOT = Path(__file__).resolve().parents[2]  # the repository
LOG_DIR = "MT_SERVER_LOG_DIR"  # where servers' logs go unless given (/tmp): a GPU check sets its results folder


def free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """A server subprocess and its base URL; logs go to a file for post-mortems ($MT_SERVER_LOG_DIR, else /tmp). It
    runs on the CPU unless the arguments name a --device (on a GPU machine the server would pick cuda and bfloat16),
    and without the translation cache unless they say --cache (tests of the engine must reach it every time)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, log: Path | None = None, cwd: Path = ROOT):
        self.port, self.args = free_port(), args
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log or Path(os.environ.get(LOG_DIR, "/tmp")) / f"mt-server-{self.port}.log"
        device = () if "--device" in args else ("--device", "cpu")  # tests compare with offline CPU float32
        cache = () if {"--cache", "--no-cache"} & set(args) else ("--no-cache",)
        dtype = () if "--dtype" in args else ("--dtype", "float32")  # the oracles are float32: pinned, not auto
        cmd = [sys.executable, "-m", "app", "--host", "127.0.0.1", "--port", str(self.port), *device, *dtype, *cache]
        cmd += args
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **(env or {})}
        self.log_file = self.log_path.open("w")
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=full_env, stdout=self.log_file, stderr=subprocess.STDOUT)

    def wait(self, path: str = "/health/ready", timeout: float = 120.0) -> ServerProcess:
        """Block until `path` answers 200 (raises with its last answer and the log tail on timeout or exit); with
        several HTTP workers, ten times in a row on fresh connections, so that every worker (each ready on its own)
        has answered."""
        deadline, streak, said = time.monotonic() + timeout, 0, "no answer"
        need = 10 if "--workers" in self.args and self.args[self.args.index("--workers") + 1] != "1" else 1
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                r = HTTP.get(self.url + path, timeout=2)
                streak, said = (streak + 1 if r.status_code == 200 else 0), f"{r.status_code} {r.text}"
            except httpx.TransportError:
                streak = 0
            if streak >= need:
                return self
            time.sleep(0.02 if streak == 0 else 0.01)
        raise TimeoutError(f"{path} not 200 after {timeout}s (last: {said}):\n{self.log_tail()}")

    def processes(self) -> tuple[list[int], list[int]]:
        """(engine core pids, HTTP worker pids) of the launcher."""
        pids = [p for p in children(self.proc.pid) if is_python_child(p)]
        cores = [p for p in pids if has_torch(p)]
        return cores, [p for p in pids if p not in cores]

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server's log."""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def terminate(self) -> None:
        """SIGTERM (the server drains)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait, then kill if needed; returns the exit code."""
        self.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log_file.close()
        return self.proc.returncode


def stop_all(servers: list[ServerProcess]) -> list[int]:
    """Stop servers together: SIGTERM to each, then wait for each (they drain at the same time); the exit codes."""
    for s in servers:
        s.terminate()
    return [s.stop() for s in servers]


class RedisServer:
    """Debian's redis-server on a free loopback port, its files in a temporary directory: nothing saved, or (durable)
    every write in its append-only file, so that its data outlives a kill -9 and a restart. Faults on demand: kill,
    restart on the same port, pause (SIGSTOP: connections are accepted, nothing answers) and resume."""

    def __init__(self, workdir: Path, durable: bool = False):
        self.port, self.workdir, self.durable = free_port(), workdir, durable
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.start()

    def start(self) -> None:
        """Start it (again) and wait until it accepts connections."""
        keep = ("--appendonly", "yes", "--appendfsync", "always") if self.durable else ("--appendonly", "no")
        args = ["--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.workdir), "--save", "", *keep]
        self.proc = subprocess.Popen(["redis-server", *args], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.02)

    def kill(self) -> None:
        """kill -9, and wait until it is gone."""
        self.proc.kill()
        self.proc.wait()

    def pause(self) -> None:
        """SIGSTOP: the kernel still accepts connections, Redis answers nothing."""
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT."""
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """Stop it (SIGTERM, then kill)."""
        self.resume()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def add_keys(db: Path | str, keys: dict[str, dict]) -> Path | str:
    """Store API keys (key -> limit overrides) in a SQLite key file, or in Redis given its URL, as `python -m app keys
    add` does."""

    async def add() -> None:
        store = RedisStore(db) if str(db).startswith("redis://") else SqliteStore(db)
        for key, limits in keys.items():
            await store.add(key, KeyRecord(f"name-{key}", limits))
        await store.close()

    asyncio.run(add())
    return db
