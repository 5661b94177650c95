"""The server image run as users run it (podman, the image make test-deploy built from the Dockerfile): ready,
translating, non-root on a read-only root file system, healthy by its own health check, serving a model mounted at
/models, draining on SIGTERM, and brought back by its restart policy when its engine core is killed."""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import re
import signal
import threading
import time

import httpx
import pytest

from bench.harness.client import metrics, parse_sse, value
from model.loading.checkpoint import load
from tests.app.helpers import LONG, offline, ok, stream, streamed_text

from .helpers import dockerfile_stages, seconds, stage_args
from .podman import Containers, died_exit_codes, engine_cores, health, inspect, podman, require_engine, uids

pytestmark = pytest.mark.container

HOUSE = ("The house is big.", "La casa es grande.")  # the built-in model's answer (README)
UID = 10001
# As deploy/k8s runs it: nothing written outside a tmpfs at /tmp, no capabilities, no privilege escalation.
LOCKED_DOWN = ("--read-only", "--read-only-tmpfs=false", "--tmpfs", "/tmp", "--cap-drop", "ALL")
LOCKED_DOWN += ("--security-opt", "no-new-privileges")


@pytest.fixture(scope="module")
def containers():
    """This module's containers, removed at the end."""
    started = Containers(require_engine()["MT_IMAGE"])
    yield started
    started.remove_all()


@pytest.fixture(scope="module")
def served(containers):
    """The image with its default command (the built-in model), locked down; (container, seconds to ready)."""
    container = containers.run("served", *LOCKED_DOWN)
    return container, container.wait_ready()


def start_period() -> float:
    """The HEALTHCHECK's --start-period: how long Docker gives the server to become ready."""
    (check,) = stage_args(dockerfile_stages()[-1], "HEALTHCHECK")
    return seconds(re.search(r"--start-period=(\S+)", check).group(1))


def test_ready_within_the_healthcheck_start_period_and_healthy(served):
    container, cold_start = served
    assert cold_start < start_period(), f"ready after {cold_start:.1f} s"
    assert health(container.name)
    assert inspect(container.name, "{{.State.Health.Status}}") == "healthy"


def test_translates_and_counts_it_in_metrics(served):
    container, _ = served
    before = value(metrics(container.url), "mt_requests_total", model="en-es", finish_reason="eos")
    assert ok(container.url, HOUSE[0])["translatedText"] == HOUSE[1]
    after = metrics(container.url)
    assert value(after, "mt_requests_total", model="en-es", finish_reason="eos") == before + 1
    assert value(after, "mt_generated_tokens_total") > 0


def test_runs_as_non_root_on_a_read_only_root(served):
    container, _ = served
    assert inspect(container.name, "{{.HostConfig.ReadonlyRootfs}}") == "true"
    server = int(inspect(container.name, "{{.State.Pid}}"))
    (core,) = engine_cores(container.name)
    assert uids(server) == uids(core) == {UID}
    for path in ("/opt/venv/written", "/home/mt/written", "/models/written"):
        touch = container.exec("python", "-c", f"open({path!r}, 'w')")
        assert touch.returncode != 0 and ("Read-only file system" in touch.stderr), (path, touch.stderr)
    assert container.exec("python", "-c", "open('/tmp/written', 'w')").returncode == 0


def test_every_feature_works_in_the_slim_image(served):
    """What the image leaves out (tests, headers, pip) is nothing the server uses: each endpoint and option."""
    url = served[0].url
    form = httpx.post(url + "/translate", data={"q": HOUSE[0], "source": "en", "target": "es"}, timeout=60)
    assert form.status_code == 200 and form.json()["translatedText"] == HOUSE[1]
    many = ok(url, [HOUSE[0], "Hello world."], alternatives=1, parameters={"beam_size": 3, "return_scores": True})
    assert many["translatedText"][0] == HOUSE[1] and len(many["alternatives"]) == 2
    assert ok(url, "<p>The house is <b>big</b>.</p>", format="html")["translatedText"].startswith("<p>")
    glossary = ok(url, HOUSE[0], glossary={"house": "vivienda"})  # terms placed by alignment (SentencePiece offsets)
    assert glossary["details"]["glossary"][0]["applied"], glossary
    gendered = ok(url, "We saw a good movie.", glossary={"movie": "filme"})  # the analyser's gender: lt-proc's file
    assert "un filme" in gendered["translatedText"], gendered
    sampled = [ok(url, HOUSE[0], parameters={"temperature": 0.8, "seed": 7})["translatedText"] for _ in range(2)]
    assert sampled[0] == sampled[1]
    assert ok(url, "The house is big. The dog is small. " * 8, parameters={"split_sentences": True})
    auto = httpx.post(url + "/translate", json={"q": HOUSE[0], "source": "auto", "target": "es"}, timeout=60)
    assert auto.status_code == 200, auto.text
    response, events = stream(url, HOUSE[0])
    assert response.status_code == 200 and streamed_text(events) == HOUSE[1]
    detected = httpx.post(url + "/detect", json={"q": "The house is big and the city is green."}, timeout=30)
    assert detected.status_code == 200 and detected.json()[0]["language"] == "en", detected.text
    assert httpx.get(url + "/languages").json()[0]["code"] == "en"
    assert httpx.get(url + "/info").json()["models"]
    for page in ("/", "/docs", "/redoc"):
        html = httpx.get(url + page)
        assert html.status_code == 200, page
        for asset in re.findall(r'(?:src|href)="(/[^"]+)"', html.text):  # served from the image, no CDN
            assert httpx.get(url + asset).status_code == 200, (page, asset)


def test_serves_a_model_mounted_at_models(containers, marian_dir):
    """A random Marian checkpoint mounted read-only answers as the same checkpoint does offline."""
    for path in marian_dir.iterdir():  # the server runs as uid 10001: the files must be readable to others
        path.chmod(path.stat().st_mode | 0o444)
    mount = ("--volume", f"{marian_dir}:/models/opus-mt-en-es:ro")
    env = ("--env", "MT_MODELS=en-es=/models/opus-mt-en-es", "--env", "OMP_NUM_THREADS=1")
    container = containers.run("mounted", *LOCKED_DOWN, *mount, *env)
    container.wait_ready()
    params = {"beam_size": 1, "max_new_tokens": 20}
    text = "the big red cat runs in the city"
    answer = ok(container.url, text, parameters=params)
    assert answer["translatedText"] == offline(load(marian_dir), text, **params)[0]
    assert httpx.get(container.url + "/info").json()["models"][0]["path"] == "/models/opus-mt-en-es"


def test_sigterm_lets_a_stream_finish_and_exits_0(containers):
    container = containers.run("sigterm")
    container.wait_ready()
    grace = 45
    body = {"q": HOUSE[0], "source": "en", "target": "es", "stream": True, "parameters": LONG}
    stop = ("stop", "--time", str(grace), container.name)
    stopped, stopper, lines = {}, None, []
    with httpx.stream("POST", container.url + "/translate", json=body, timeout=120) as response:
        for line in response.iter_lines():
            lines.append(line)
            if stopper is None and line.startswith("event: "):  # the stream runs: stop the container
                start = time.monotonic()
                stopper = threading.Thread(target=lambda: stopped.update(proc=podman(*stop, check=False)))
                stopper.start()
    stopper.join(grace + 30)
    events = parse_sse("\n".join(lines))
    assert events[-1].event == "done", events[-3:]
    assert events[-1].data["details"]["generated_tokens"] == LONG["max_new_tokens"]
    assert stopped["proc"].returncode == 0 and time.monotonic() - start < grace
    assert inspect(container.name, "{{.State.ExitCode}}") == "0"
    assert died_exit_codes(container.name) == [0]


def outcome(call) -> str:
    """What a request in flight got: 'ok', an HTTP status, an SSE error, or the transport error's name."""
    try:
        return call()
    except httpx.TransportError as error:
        return type(error).__name__


def streamed_outcome(url: str, started: threading.Event) -> str:
    body = {"q": HOUSE[0], "source": "en", "target": "es", "stream": True, "parameters": LONG}
    with httpx.stream("POST", url + "/translate", json=body, timeout=60) as response:
        kinds = []
        for line in response.iter_lines():
            if line.startswith("event: "):
                kinds.append(line[7:])
                started.set()
    return "ok" if kinds[-1:] == ["done"] else f"sse {kinds[-1:]}"


def test_engine_core_killed_exits_non_zero_and_restarts(containers):
    container = containers.run("killed", "--restart", "on-failure", *LOCKED_DOWN)
    container.wait_ready()
    started = threading.Event()
    plain = {"q": HOUSE[0], "source": "en", "target": "es", "parameters": LONG}
    with cf.ThreadPoolExecutor(2) as pool:
        streamed = pool.submit(outcome, lambda: streamed_outcome(container.url, started))
        post = lambda: f"http {httpx.post(container.url + '/translate', json=plain, timeout=60).status_code}"
        posted = pool.submit(outcome, post)
        assert started.wait(60)
        (core,) = engine_cores(container.name)
        killed = time.monotonic()
        os.kill(core, signal.SIGKILL)
        results = [streamed.result(60), posted.result(60)]
    assert time.monotonic() - killed < 30, "requests in flight hung"
    assert "ok" not in results and "http 200" not in results, results
    deadline = time.monotonic() + 60
    while container.restarts() < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert container.restarts() == 1 and died_exit_codes(container.name)[:1] == [1]
    container.wait_ready()
    assert ok(container.url, HOUSE[0])["translatedText"] == HOUSE[1]
    assert json.loads(inspect(container.name, "{{json .HostConfig.RestartPolicy}}"))["Name"] == "on-failure"
