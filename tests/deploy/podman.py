"""The deployment lane's engine: podman as deploy/podman/prepare.sh set it up, containers of the server image, and
the processes inside them as the host sees them.

The lane runs as root (rootful podman): a container's processes are host processes, so the tests find the engine
core the way bench/harness/server.py does for a local server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import httpx
import psutil
import pytest

from bench.harness.procs import has_torch, is_python_child, tree
from bench.harness.server import free_port

from .helpers import ROOT, SERVER_PORT

STATE = ROOT / "build" / "podman"
LANE = "MT_TEST_DEPLOY"  # set by `make test-deploy`: the container tests run only in that lane


def engine_env() -> dict[str, str]:
    """The environment podman needs here: the containers.conf prepare.sh wrote for this host."""
    return {**os.environ, "CONTAINERS_CONF": str(STATE / "containers.conf")}


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    """Run podman; with check, fail the test with its output on a non-zero exit."""
    proc = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, env=engine_env())
    if check and proc.returncode != 0:
        pytest.fail(f"podman {' '.join(args)}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def images() -> dict[str, str]:
    """Image names for the compose variables: prepare.sh's choices, overridden by the environment."""
    names = {"MT_IMAGE": "mt-server:cpu", "MT_NGINX_IMAGE": "nginx:1.27-alpine"}
    chosen = STATE / "images.env"
    if chosen.exists():
        names.update(line.split("=", 1) for line in chosen.read_text().split() if "=" in line)
    return {k: os.environ.get(k, v) for k, v in names.items()}


def require_engine() -> dict[str, str]:
    """Skip, naming what is missing, unless podman can run the prepared images here; the image names."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (apt-get install podman buildah runc debootstrap; make test-deploy)")
    if os.geteuid() != 0:
        pytest.skip("the deployment lane runs rootful podman: run make test-deploy as root")
    names = images()
    for image in names.values():
        if podman("image", "exists", image, check=False).returncode != 0:
            pytest.skip(f"image {image} is missing: make test-deploy builds it (deploy/podman/prepare.sh)")
    return names


def health(name: str) -> bool:
    """Run the container's health check now (no systemd here to run it on a timer); True when healthy."""
    return podman("healthcheck", "run", name, check=False, timeout=60).returncode == 0


def inspect(name: str, template: str) -> str:
    return podman("inspect", "--format", template, name).stdout.strip()


def died_exit_codes(name: str) -> list[int]:
    """Exit codes of the container's `died` events, oldest first (restarts keep the container)."""
    args = ("events", "--stream=false", "--filter", f"container={name}", "--filter", "event=died")
    out = podman(*args, "--format", "{{.ContainerExitCode}}").stdout.split()
    return [int(code) for code in out]


def engine_cores(name: str) -> list[int]:
    """Host pids of the server's engine cores in a running container (whatever its PID 1: server or init)."""
    pid = int(inspect(name, "{{.State.Pid}}"))
    return [p for p in tree(pid)[1:] if is_python_child(p) and has_torch(p)]


def uids(pid: int) -> set[int]:
    """Real, effective and saved uids of a process."""
    return set(psutil.Process(pid).uids())


class Container:
    """One container of the server image, its port published on 127.0.0.1; removed by `remove`."""

    def __init__(self, name: str, image: str, *options: str, command: tuple[str, ...] = ()):
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        publish = ("--publish", f"127.0.0.1:{self.port}:{SERVER_PORT}")
        podman("run", "--detach", "--name", name, *publish, *options, image, *command)

    def wait_ready(self, timeout: float = 240) -> float:
        """Seconds until /health/ready answered 200 (fails with the log if it stops or takes too long)."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            try:
                if httpx.get(self.url + "/health/ready", timeout=2).status_code == 200:
                    return time.monotonic() - start
            except httpx.TransportError:
                pass
            if inspect(self.name, "{{.State.Status}}") in {"exited", "stopped"} and not self.restarts():
                pytest.fail(f"{self.name} stopped before it was ready:\n{self.logs()}")
            time.sleep(0.2)
        pytest.fail(f"{self.name} not ready after {timeout} s:\n{self.logs()}")

    def restarts(self) -> int:
        return int(inspect(self.name, "{{.RestartCount}}"))

    def logs(self, lines: int = 40) -> str:
        out = podman("logs", "--tail", str(lines), self.name, check=False)
        return out.stdout + out.stderr

    def exec(self, *cmd: str) -> subprocess.CompletedProcess:
        return podman("exec", self.name, *cmd, check=False)

    def remove(self) -> None:
        podman("rm", "--force", "--time", "5", self.name, check=False)


class Containers:
    """Starts containers with unique names for one test module and removes them all at the end."""

    def __init__(self, image: str):
        self.image = image
        self.started: list[Container] = []

    def run(self, label: str, *options: str, command: tuple[str, ...] = ()) -> Container:
        container = Container(f"mt-test-{os.getpid()}-{label}", self.image, *options, command=command)
        self.started.append(container)
        return container

    def remove_all(self) -> None:
        for container in self.started:
            container.remove()


def labelled(project: str) -> list[dict]:
    """Containers of a compose project (podman-compose labels them), with their names and states."""
    args = ("ps", "--all", "--filter", f"label=io.podman.compose.project={project}", "--format", "json")
    return json.loads(podman(*args).stdout or "[]")
