"""Helpers of the fault-injection tests: a stream over a plain socket (its local port names the worker serving it;
its reads are ours to stop), which worker holds a connection, small tmpfs mounts, and the server's log lines."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import h11
import psutil

from bench.harness.client import HTTP, Sse, parse_sse
from bench.harness.server import ServerProcess


class RawStream:
    """POST /translate with stream=true on a socket of its own; `rcvbuf` shrinks the client's receive buffer (a
    client that stops reading then stops the server's writes soon)."""

    def __init__(self, url: str, payload: dict, rcvbuf: int | None = None):
        parts = urlsplit(url)
        self.sock = socket.socket()
        if rcvbuf is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.connect((parts.hostname, parts.port))
        self.port = self.sock.getsockname()[1]
        self.conn = h11.Connection(h11.CLIENT)
        body = json.dumps({**payload, "stream": True}).encode()
        headers = [("host", parts.netloc), ("content-type", "application/json"), ("content-length", str(len(body)))]
        self.sock.sendall(self.conn.send(h11.Request(method="POST", target="/translate", headers=headers)))
        self.sock.sendall(self.conn.send(h11.Data(data=body)) + self.conn.send(h11.EndOfMessage()))
        self.status, self.body, self.ended = 0, b"", ""

    def read(self, until: str = "", timeout: float = 30.0) -> str:
        """Read until the text `until` arrives (or the end); how the stream ended: "done" (a complete response),
        "reset", "eof" (closed before the response ended), "timeout", or "" (`until` came first)."""
        deadline = time.monotonic() + timeout
        while not self.ended and not (until and until in self.body.decode(errors="replace")):
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                return "timeout"
            except ConnectionResetError:
                self.ended = "reset"
                break
            self.conn.receive_data(data)
            try:
                self._take()
            except h11.RemoteProtocolError:  # closed in the middle of the response
                self.ended = "eof"
            if not data and not self.ended:
                self.ended = "eof"
        return self.ended

    def _take(self) -> None:
        """Apply what h11 parsed."""
        while (ev := self.conn.next_event()) not in (h11.NEED_DATA, h11.PAUSED):
            if isinstance(ev, h11.Response):
                self.status = ev.status_code
            elif isinstance(ev, h11.Data):
                self.body += ev.data
            elif isinstance(ev, h11.EndOfMessage):
                self.ended = "done"
            elif isinstance(ev, h11.ConnectionClosed):
                self.ended = self.ended or "eof"
                return

    def events(self) -> list[Sse]:
        """The server-sent events received so far (whole ones)."""
        text = self.body.decode(errors="replace")
        return parse_sse(text[: text.rfind("\n\n") + 2])

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


def holder(pids: list[int], client_port: int) -> int | None:
    """Which of the processes holds the server end of the connection from `client_port`."""
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            if any(c.raddr and c.raddr.port == client_port for c in psutil.Process(pid).net_connections("tcp")):
                return pid
    return None


def mount_tmpfs(path: Path, size: str) -> bool:
    """Mount a tmpfs of `size` (e.g. "1m") at path; False where this machine does not let us (not root, or no
    CAP_SYS_ADMIN in a container)."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


def remount(path: Path, mode: str) -> None:
    """Remount a tmpfs "ro" or "rw"."""
    subprocess.run(["mount", "-o", f"remount,{mode}", str(path)], check=True, capture_output=True)


def unmount(path: Path) -> None:
    """Unmount (lazily: a server that still holds files there lets go when it exits)."""
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


def log_count(server: ServerProcess, text: str) -> int:
    """How many lines of the server's log hold `text`."""
    return sum(text in line for line in server.log_path.read_text(errors="replace").splitlines())


def ready_within(server: ServerProcess, seconds: float) -> float:
    """Seconds until /health/ready answers 200 (fails after `seconds`)."""
    start = time.monotonic()
    while HTTP.get(server.url + "/health/ready").status_code != 200:
        assert time.monotonic() - start < seconds, f"not ready {seconds}s later:\n{server.log_tail()}"
        time.sleep(0.02)
    return time.monotonic() - start


def check_unavailable(r, names: str, status: int = 503, error_type: str = "unavailable") -> None:
    """The contract's error for a dependency that is down: status, {error, error_type} naming it, Retry-After."""
    assert r.status_code == status, r.text
    assert set(r.json()) == {"error", "error_type"} and r.json()["error_type"] == error_type, r.text
    assert names in r.json()["error"], r.text
    assert int(r.headers["retry-after"]) >= 1
