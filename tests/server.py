"""Start the real server (`python -m app`, uvicorn) on 127.0.0.1 in a subprocess, for tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """A server subprocess and its base URL; logs go to a file for post-mortems. It runs on the CPU unless the
    arguments name a --device (on a GPU machine the server would pick cuda and bfloat16)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, log: Path | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log or Path(f"/tmp/mt-server-{self.port}.log")
        device = () if "--device" in args else ("--device", "cpu")  # tests compare with offline CPU float32
        cmd = [sys.executable, "-m", "app", "--host", "127.0.0.1", "--port", str(self.port), *device, *args]
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **(env or {})}
        self.log_file = self.log_path.open("w")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdout=self.log_file, stderr=subprocess.STDOUT)

    def wait(self, path: str = "/health/ready", timeout: float = 120.0) -> ServerProcess:
        """Block until `path` answers 200 (raises with the log tail on timeout or exit)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + path, timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"{path} not 200 after {timeout}s:\n{self.log_tail()}")

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
