"""A bounded schemathesis run against /openapi.json: no generated request gets a 5xx."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness.client import HTTP
from bench.harness.server import ServerProcess
from tests.app.helpers import ok

HOOKS = Path(__file__).with_name("fuzz_hooks.py")
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


@pytest.fixture(scope="module")
def fuzzed(native_dir):
    """Small limits, so that valid fuzzed requests stay cheap (16 tokens, 4 texts, beams of 4)."""
    args = ["--model", str(native_dir), "--warmup-rounds", "0", "--max-new-tokens", "16", "--max-items", "4"]
    args += ["--max-input-tokens", "64", "--max-beam-size", "4", "--max-body-bytes", "20000"]
    proc = ServerProcess(*args).wait()
    yield proc
    proc.stop()


def schemathesis(url: str, tmp_path: Path, *args: str) -> None:
    """Run the CLI with the not_a_server_error check; fail with its report when it finds something."""
    cmd = [str(SCHEMATHESIS), "run", url + "/openapi.json", "--checks", "not_a_server_error", "--workers", "1"]
    cmd += ["--seed", "1", "--generation-database", "none", "--no-color", "--request-timeout", "30", *args]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)}
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "generated" in done.stdout


def test_openapi_schema_is_complete(fuzzed):
    """The /translate body schema is part of the document (its $ref resolves), for JSON and both kinds of forms."""
    spec = HTTP.get(fuzzed.url + "/openapi.json").json()
    content = spec["paths"]["/translate"]["post"]["requestBody"]["content"]
    assert set(content) == {"application/json", "application/x-www-form-urlencoded", "multipart/form-data"}
    ref = content["application/json"]["schema"]["$ref"].removeprefix("#/components/schemas/")
    schema = spec["components"]["schemas"][ref]
    assert {"q", "source", "target", "format", "alternatives", "stream", "api_key", "parameters"} <= set(
        schema["properties"]
    )
    assert spec["components"]["schemas"]["Parameters"]["additionalProperties"] is False


def test_no_server_errors(fuzzed, tmp_path):
    """Every operation, positive and negative data (coverage + fuzzing); then valid /translate bodies only."""
    schemathesis(fuzzed.url, tmp_path, "--max-examples", "100", "--phases", "coverage,fuzzing")
    schemathesis(
        fuzzed.url,
        tmp_path,
        "--max-examples",
        "150",
        "--phases",
        "fuzzing",
        "--mode",
        "positive",
        "--include-path",
        "/translate",
    )
    log = fuzzed.log_path.read_text(errors="replace")
    assert "Exception in ASGI application" not in log and "died" not in log
    assert " 200 OK" in log
    assert HTTP.get(fuzzed.url + "/health/ready").status_code == 200
    assert ok(fuzzed.url, "the cat sleeps")["translatedText"]
