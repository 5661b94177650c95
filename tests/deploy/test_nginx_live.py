"""Debian nginx with deploy/nginx/nginx.conf in front of two real server processes on 127.0.0.1."""

from __future__ import annotations

import concurrent.futures as cf
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from bench.harness.client import HTTP
from bench.harness.server import ROOT, ServerProcess, free_port, stop_all

CONF = ROOT / "deploy" / "nginx" / "nginx.conf"
BODY = {"q": "the big red cat runs in the city", "source": "en", "target": "es"}


def render(ports: list[int], listen: int, tmp: Path) -> Path:
    """The repo's config with the compose upstream replaced by local replicas; everything else as written."""
    text = CONF.read_text()
    line = re.search(r"^\s*server\s+translator:\d+([^;]*);", text, flags=re.M)
    assert line, "no `server translator:PORT ...;` line in the upstream"
    servers = "".join(f"        server 127.0.0.1:{p}{line.group(1)};\n" for p in ports)
    text = text.replace(line.group(0) + "\n", servers)
    text, n = re.subn(r"listen\s+80;", f"listen 127.0.0.1:{listen};", text)
    assert n == 1
    text = text.replace("pid /tmp/nginx.pid;", f"pid {tmp / 'nginx.pid'};")
    temps = "".join(f"    {k}_temp_path {tmp / k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    text = re.sub(r"^http\s*\{\n", lambda m: m.group(0) + temps, text, count=1, flags=re.M)
    if os.geteuid() == 0:  # workers would otherwise run as nobody, who cannot write pytest's temp dirs
        text = "user root;\n" + text
    conf = tmp / "nginx.conf"
    conf.write_text(text)
    return conf


@pytest.fixture(scope="module")
def cluster(native_dir, tmp_path_factory):
    """Two replicas behind nginx: yields (nginx URL, [replica, replica])."""
    nginx = shutil.which("nginx") or shutil.which("/usr/sbin/nginx")
    if not nginx:
        pytest.skip("Debian package nginx is not installed (.ci/system-deps installs it)")
    tmp = tmp_path_factory.mktemp("nginx")
    args = ("--model", str(native_dir), "--warmup-rounds", "1", "--drain-seconds", "20")
    replicas = [ServerProcess(*args), ServerProcess(*args)]
    proc = None
    try:  # a failure while setting up still stops the replicas and nginx
        for r in replicas:
            r.wait()
        port = free_port()
        conf = render([r.port for r in replicas], port, tmp)
        log = (tmp / "nginx.log").open("w")
        proc = subprocess.Popen([nginx, "-p", f"{tmp}/", "-c", str(conf), "-g", "daemon off;"], stdout=log, stderr=log)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                if HTTP.get(url + "/nginx-health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (tmp / "nginx.log").read_text()
            time.sleep(0.1)
        yield url, replicas
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        stop_all(replicas)


def served(replica: ServerProcess) -> float:
    """Finished requests a replica has counted."""
    text = HTTP.get(replica.url + "/metrics", timeout=5).text
    return sum(float(v) for v in re.findall(r"^mt_requests_total\{[^}]*\} (\S+)$", text, flags=re.M))


def test_requests_spread_over_both_replicas(cluster):
    url, replicas = cluster
    before = [served(r) for r in replicas]
    body = {**BODY, "parameters": {"min_new_tokens": 20, "max_new_tokens": 20}}
    with cf.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: HTTP.post(url + "/translate", json=body, timeout=60), range(24)))
    assert all(a.status_code == 200 for a in answers)
    assert len({a.json()["translatedText"] for a in answers}) == 1
    gained = [served(r) - b for r, b in zip(replicas, before, strict=True)]
    assert sum(gained) == 24 and min(gained) >= 4, gained


def test_stream_passes_through_unbuffered(cluster):
    url, _ = cluster
    body = {**BODY, "stream": True, "parameters": {"min_new_tokens": 150, "max_new_tokens": 150}}
    start, arrivals = time.monotonic(), []
    with HTTP.stream("POST", url + "/translate", json=body, timeout=60) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        for line in resp.iter_lines():
            if line.startswith("event: "):
                arrivals.append((line[7:], time.monotonic() - start))
    tokens = [t for kind, t in arrivals if kind == "token"]
    done = next(t for kind, t in arrivals if kind == "done")
    assert len(tokens) >= 100
    assert tokens[0] < done / 2, f"first token at {tokens[0]:.3f}s, done at {done:.3f}s: buffered"


def test_stopping_one_replica_fails_no_request(cluster):
    url, replicas = cluster
    body = {**BODY, "parameters": {"min_new_tokens": 30, "max_new_tokens": 30}}
    expected = HTTP.post(url + "/translate", json=body, timeout=60).json()["translatedText"]

    def call(i: int) -> tuple[int, str]:
        if i == 12:
            replicas[0].terminate()  # SIGTERM mid-load: the replica drains and exits
        r = HTTP.post(url + "/translate", json=body, timeout=60)
        return r.status_code, r.json().get("translatedText", r.text)

    with cf.ThreadPoolExecutor(6) as pool:
        results = list(pool.map(call, range(60)))
    assert [s for s, _ in results] == [200] * 60, results
    assert {t for _, t in results} == {expected}
    assert replicas[0].proc.wait(30) == 0  # drained and exited cleanly
    assert HTTP.post(url + "/translate", json=body, timeout=60).status_code == 200
