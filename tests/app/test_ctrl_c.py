"""Ctrl+C in the terminal that runs `python -m app` (SIGINT to its whole process group: the launcher, which forwards
it, and each child at once): the server drains as for SIGTERM, the request in flight finishes, exit code 0, and no
traceback on the way out."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx

from bench.harness.client import HTTP
from bench.harness.server import free_port
from tests.app.helpers import LONG, body, wait_for


def test_ctrl_c_drains_and_exits_0(native_dir, tmp_path):
    """Catches a worker that takes the terminal's SIGINT and the launcher's forwarded one as "force exit" (uvicorn's
    second Ctrl+C): it dropped the request in flight and exited 1 with a KeyboardInterrupt traceback."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "app", "--model", str(native_dir), "--port", str(port), "--device", "cpu",
           "--warmup-rounds", "0", "--max-batch-size", "1", "--no-cache"]  # fmt: skip
    log = tmp_path / "server.log"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        wait_for(lambda: ready(url), timeout=120)
        job = body([f"the dog {i} runs in the city" for i in range(4)], parameters=LONG)  # about a second
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(httpx.post, url + "/translate", json=job, timeout=60)
            wait_for(lambda: "mt_requests_running 1.0" in HTTP.get(url + "/metrics").text, timeout=30)
            os.killpg(proc.pid, signal.SIGINT)  # what the terminal sends on Ctrl+C
            r = answer.result()
        assert r.status_code == 200, r.text
        assert proc.wait(60) == 0, log.read_text()[-3000:]
        assert "Traceback" not in log.read_text() and "SIGINT: draining" in log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def ready(url: str) -> bool:
    """/health/ready answers 200."""
    try:
        return HTTP.get(url + "/health/ready", timeout=2).status_code == 200
    except httpx.TransportError:
        return False
