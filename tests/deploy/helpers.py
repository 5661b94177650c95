"""Shared by the deploy/ tests: paths, tool lookup, and readers for the Dockerfile and compose file.

A validator is looked for in the test venv's bin first (the PyPI tools of the test extras), then on PATH
(Debian's packages, installed by .ci/system-deps). A test skips, naming the tool, only where it is absent.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = DEPLOY / "docker-compose.yml"
COMPOSE_GPU = DEPLOY / "docker-compose.gpu.yml"
NGINX_CONF = DEPLOY / "nginx" / "nginx.conf"
PROMETHEUS_DIR = DEPLOY / "prometheus"
GRAFANA_DIR = DEPLOY / "grafana"
DASHBOARD = GRAFANA_DIR / "dashboards" / "mt-server.json"
K8S = DEPLOY / "k8s"
OVERLAYS = ["cpu", "gpu"]

SERVICE = "translator"  # compose service name: nginx upstream, Prometheus DNS discovery
SERVER_PORT = 8000


def tool(name: str) -> str | None:
    """Path of a command-line tool: the test venv's bin first (PyPI tools), then PATH (Debian's)."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    return shutil.which(name)


def require(name: str, where: str) -> str:
    path = tool(name)
    if path is None:
        pytest.skip(f"{name} is not installed ({where})")
    return path


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kwargs)


def output(proc: subprocess.CompletedProcess) -> str:
    return f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


def seconds(text: str | int | float) -> float:
    """Seconds in a Docker, nginx or Kubernetes duration: 45, "45s", "1m30s", "2m", "300s"."""
    if isinstance(text, int | float):
        return float(text)
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)?", str(text).strip())
    assert parts and "".join(n + u for n, u in parts) == str(text).strip(), f"bad duration {text!r}"
    return sum(float(n) * units[u or "s"] for n, u in parts)


def load_yaml(path: Path):
    return yaml.safe_load(path.read_text())


# --- Dockerfile --------------------------------------------------------------------------------------


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile as stages of (INSTRUCTION, arguments), continuation lines joined."""
    logical, current = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.strip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        current += line
        if current.strip():
            logical.append(current.strip())
        current = ""
    stages: list[list[tuple[str, str]]] = []
    for entry in logical:
        instr, _, args = entry.partition(" ")
        if instr.upper() == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((instr.upper(), args.strip()))
    return stages


def stage_args(stage: list[tuple[str, str]], instr: str) -> list[str]:
    return [args for name, args in stage if name == instr]


def resolve_args(stage: list[tuple[str, str]], text: str) -> str:
    """Substitute ${NAME} and $NAME with the stage's ARG defaults."""
    defaults = {}
    for args in stage_args(stage, "ARG"):
        name, _, value = args.partition("=")
        defaults[name] = value
    return re.sub(r"\$\{?(\w+)\}?", lambda m: defaults.get(m.group(1), m.group(0)), text)


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("MT_", "TORCH_", "GRAFANA_"))}


@cache
def compose_raw() -> dict:
    """deploy/docker-compose.yml with each ${VAR:-default} replaced by its default, as with no .env."""
    text = re.sub(r"\$\{\w+(?::?-([^}]*))?\}", lambda m: m.group(1) or "", COMPOSE.read_text())
    return yaml.safe_load(text)


def bind_mounts(service: dict) -> dict[str, tuple[str, str]]:
    """Container path -> (host path, mode) for a service's short-syntax volumes."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target, *mode = volume.split(":")
        mounts[target] = (source, mode[0] if mode else "rw")
    return mounts


def grafana_provider() -> dict:
    (provider,) = load_yaml(GRAFANA_DIR / "provisioning" / "dashboards" / "mt-server.yml")["providers"]
    return provider
