"""deploy/docker-compose.yml brought up with podman-compose: two translator replicas behind nginx (the images
make test-deploy prepared, chosen through the file's image variables), a replica stopped under load, scaling to three.

Only the translator and nginx services start: Prometheus and Grafana are checked by test_monitoring.py.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import subprocess
import threading
import time

import httpx
import pytest

from bench.harness.client import metrics
from bench.harness.server import free_port

from .helpers import COMPOSE, SERVER_PORT, SERVICE, require
from .podman import engine_env, health, inspect, labelled, podman, require_engine

pytestmark = [pytest.mark.container, pytest.mark.timeout(600)]

PROJECT = f"mttest{os.getpid()}"
BODY = {"q": "The house is big.", "source": "en", "target": "es"}
ANSWER = "La casa es grande."


class HealthPump(threading.Thread):
    """Runs every project container's health check each second, as podman's systemd timers would, while `up`
    runs: without systemd a health check runs only when asked, and a `service_healthy` dependency would wait for
    ever (podman-compose checks the condition from podman 4.6; with older podman it starts nginx at once)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.done = threading.Event()

    def __enter__(self):
        self.start()

    def __exit__(self, *exc):
        self.done.set()
        self.join(30)

    def run(self):
        while not self.done.wait(1.0):
            for container in labelled(PROJECT):
                if container["State"] == "running":
                    health(container["Names"][0])


class Stack:
    """The compose project: its commands, its replicas and nginx's published URL."""

    def __init__(self, models_dir, images: dict[str, str]):
        self.exe = require("podman-compose", "PyPI podman-compose, in the test extras")
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        extra = {"MT_HTTP_PORT": str(port), "MT_MODELS_DIR": str(models_dir), "MT_DRAIN_SECONDS": "20"}
        self.env = {**engine_env(), **images, **extra}

    def up(self, *args: str) -> None:
        """podman-compose up -d ARGS, health checks running meanwhile."""
        cmd = [self.exe, "-p", PROJECT, "-f", str(COMPOSE), "up", "-d", *args]
        with HealthPump():
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=self.env)
        assert proc.returncode == 0, f"{' '.join(cmd)}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"

    def running(self, service: str) -> list[str]:
        """Names of a service's running containers."""
        found = [c for c in labelled(PROJECT) if c["Labels"].get("io.podman.compose.service") == service]
        return sorted(c["Names"][0] for c in found if c["State"] == "running")

    def replicas(self) -> list[str]:
        return self.running(SERVICE)

    def wait_healthy(self, count: int, timeout: float = 300) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            names = self.replicas()
            if len(names) == count and all([health(n) for n in names]):
                return names
            time.sleep(1)
        pytest.fail(f"{count} healthy replicas expected: {[(c['Names'], c['Status']) for c in labelled(PROJECT)]}")

    def down(self) -> None:
        """Stop and remove everything, scaled replicas too (podman-compose down knows only the file's count)."""
        subprocess.run([self.exe, "-p", PROJECT, "-f", str(COMPOSE), "down", "-t", "10"], env=self.env, timeout=300)
        for container in labelled(PROJECT):
            podman("rm", "--force", "--time", "5", container["Id"], check=False)
        podman("network", "rm", "--force", f"{PROJECT}_default", check=False)


def replica_url(name: str) -> str:
    """A replica on the compose network, reached from the host (rootful podman routes to the bridge)."""
    address = inspect(name, "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}")
    return f"http://{address}:{SERVER_PORT}"


def finished(name: str) -> float:
    """One-text requests a replica has answered, by its engine or from its translation cache (its own /metrics:
    nginx does not pass /metrics through)."""
    answered = ("mt_requests_total", "mt_cache_hits_total")
    return sum(v for (metric, _), v in metrics(replica_url(name)).items() if metric in answered)


def spread(stack: Stack, names: list[str], count: int, threads: int) -> list[float]:
    """Send `count` translations through nginx; how many each replica served. Each request is another cache key
    (its max_new_tokens; the answer is the same), so every one reaches an engine: a replica answering from its
    translation cache would take most of the load from nginx's least_conn."""
    before = [finished(n) for n in names]
    bodies = [{**BODY, "parameters": {"max_new_tokens": 100 + i}} for i in range(count)]
    with cf.ThreadPoolExecutor(threads) as pool:
        answers = list(pool.map(lambda b: httpx.post(stack.url + "/translate", json=b, timeout=60), bodies))
    assert [a.status_code for a in answers] == [200] * count
    assert {a.json()["translatedText"] for a in answers} == {ANSWER}
    return [finished(n) - b for n, b in zip(names, before, strict=True)]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    images = require_engine()
    stack = Stack(tmp_path_factory.mktemp("models"), images)
    try:
        stack.up(SERVICE, "nginx")
        stack.wait_healthy(2)
        yield stack
    finally:
        stack.down()


def test_two_replicas_answer_through_nginx(stack):
    (nginx,) = stack.running("nginx")
    assert health(nginx), "nginx's own health check (wget /nginx-health)"
    names = stack.replicas()
    assert len(names) == 2
    for name in names:
        assert inspect(name, "{{.HostConfig.ReadonlyRootfs}}") == "true"
    served = spread(stack, names, 16, 4)
    assert sum(served) == 16 and min(served) >= 3, served


def test_a_stopped_replica_loses_no_request(stack):
    first = stack.replicas()[0]

    def call(i: int) -> tuple[int, str]:
        if i == 8:
            podman("stop", "--time", "45", first)  # SIGTERM under load: it drains, nginx retries elsewhere
        r = httpx.post(stack.url + "/translate", json=BODY, timeout=60)
        return r.status_code, r.json().get("translatedText", r.text)

    with cf.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(call, range(30)))
    assert results == [(200, ANSWER)] * 30
    assert inspect(first, "{{.State.ExitCode}}") == "0"
    assert first not in stack.replicas()


def test_scale_to_three_replicas(stack):
    stack.up("--scale", f"{SERVICE}=3", SERVICE)
    names = stack.wait_healthy(3)
    (nginx,) = stack.running("nginx")
    reload_until_resolved(nginx)  # nginx resolves the service name when it loads its config
    time.sleep(1)
    served = spread(stack, names, 18, 6)
    assert sum(served) == 18 and min(served) >= 2, served


def reload_until_resolved(nginx: str, timeout: float = 60.0) -> None:
    """Reload nginx's config; a fresh replica's name can reach the network's DNS a moment after it is healthy
    ("host not found in upstream"; once in a CI run it was still missing after 20 s), so retry until the reload
    succeeds or `timeout` passes; a failure says what the network's DNS answered and which replicas carry the name."""
    deadline = time.monotonic() + timeout
    while (proc := podman("exec", nginx, "nginx", "-s", "reload", check=False)).returncode != 0:
        if time.monotonic() > deadline:
            pytest.fail(f"nginx -s reload kept failing:\n{proc.stdout}\n{proc.stderr}\n{dns_state(nginx)}")
        time.sleep(0.5)


def dns_state(nginx: str) -> str:
    """What nginx's container resolves for the service and which containers carry its alias (for a failure)."""
    lookup = podman("exec", nginx, "nslookup", SERVICE, check=False)
    aliases = [
        (c["Names"][0], c["State"], inspect(c["Names"][0], "{{json .NetworkSettings.Networks}}"))
        for c in labelled(PROJECT)
        if c["Labels"].get("io.podman.compose.service") == SERVICE
    ]
    return f"nslookup {SERVICE}: {lookup.stdout}{lookup.stderr}\nreplicas: {aliases}"
