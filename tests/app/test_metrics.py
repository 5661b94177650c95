"""GET /metrics: every metric name in the contract, Prometheus text, and the numbers add up."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx

from bench.harness.client import HTTP, metrics, value
from tests import contract
from tests.app.helpers import LONG, body, ok, wait_for
from tests.contract import GAUGES, HISTOGRAMS, LOAD_GAUGES

COUNTERS = [name.removesuffix("_total") for name in contract.COUNTERS]  # family names
LABELS = {"model", "phase", "finish_reason", "error_type", "reason", "dialect", "dependency", "le"}
TEXTS = ["the cat sleeps", "a big red dog runs in the city", "hello world", "good night"]


def total(samples, name: str) -> float:
    """Sum of a metric over all its label sets."""
    return sum(v for (n, _), v in samples.items() if n == name)


def test_every_contract_metric_is_exposed(server):
    """Histograms with _bucket/_sum/_count, counters with _total, gauges; TYPE lines; low-cardinality labels."""
    ok(server.url, "the cat sleeps")  # so that labelled series exist
    text = HTTP.get(server.url + "/metrics").text
    for name in HISTOGRAMS:
        assert f"# TYPE {name} histogram" in text
    for name in GAUGES:
        assert f"# TYPE {name} gauge" in text
    for name in COUNTERS:
        assert f"# TYPE {name}_total counter" in text
    families = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    assert families == {*HISTOGRAMS, *GAUGES, *(f"{c}_total" for c in COUNTERS)}  # nothing else (no *_created)
    samples = metrics(server.url)
    names = {n for n, _ in samples}
    for name in HISTOGRAMS:
        assert {f"{name}_bucket", f"{name}_sum", f"{name}_count"} <= names, name
    for name in COUNTERS:
        assert f"{name}_total" in names, name
    assert set(GAUGES) <= names
    assert {label for _, labels in samples for label, _ in labels} <= LABELS
    assert value(samples, "mt_step_duration_seconds_count", phase="encode") > 0
    assert value(samples, "mt_step_duration_seconds_count", phase="decode") > 0
    assert value(samples, "mt_requests_total", model="en-es", finish_reason="eos") > 0
    assert value(samples, "mt_core_threads") >= 1


def test_counters_count_requests_and_tokens(server):
    """After N texts: requests +N, token counters and histograms + the sums of details, latencies observed."""
    wait_for(lambda: value(metrics(server.url), "mt_requests_running") == 0, timeout=30)
    before = metrics(server.url)
    answers = [ok(server.url, t) for t in TEXTS]
    answers.append(ok(server.url, TEXTS, parameters={"beam_size": 2}))  # 4 more engine requests
    details = [a["details"] for a in answers[:-1]] + answers[-1]["details"]
    after = metrics(server.url)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    n = len(details)
    assert total(after, "mt_requests_total") - total(before, "mt_requests_total") == n
    by_reason = {r: sum(d["finish_reason"] == r for d in details) for r in ("eos", "length")}
    for reason, count in by_reason.items():
        assert grew("mt_requests_total", model="en-es", finish_reason=reason) == count
    generated = sum(d["generated_tokens"] for d in details)
    assert grew("mt_generated_tokens_total") == generated
    assert grew("mt_request_generated_tokens_sum") == generated
    assert grew("mt_request_generated_tokens_count") == n
    assert grew("mt_input_tokens_total") == sum(d["input_tokens"] for d in details)
    assert grew("mt_request_input_tokens_count") == n
    assert grew("mt_request_duration_seconds_count") == n
    assert grew("mt_request_queue_time_seconds_count") == n
    assert grew("mt_time_to_first_token_seconds_count") == n
    assert grew("mt_inter_token_latency_seconds_count") > 0
    assert grew("mt_step_duration_seconds_count", phase="encode") >= 1
    assert 0 < grew("mt_request_duration_seconds_sum") < 60
    assert total(after, "mt_request_failures_total") == total(before, "mt_request_failures_total")


def test_failures_are_counted_once(server):
    """Each refused request adds exactly one to mt_request_failures_total{error_type}."""
    before = metrics(server.url)
    assert HTTP.post(server.url + "/translate", json=body("")).status_code == 400
    assert HTTP.post(server.url + "/translate", json=body("x", parameters={"top_p": 3})).status_code == 422
    assert (
        HTTP.post(server.url + "/translate", content=b"{", headers={"content-type": "application/json"}).status_code
        == 422
    )
    assert HTTP.post(server.url + "/translate", json={"q": "x", "source": "en", "target": "de"}).status_code == 400
    after = metrics(server.url)
    assert (
        value(after, "mt_request_failures_total", error_type="validation")
        - value(before, "mt_request_failures_total", error_type="validation")
        == 3
    )
    assert (
        value(after, "mt_request_failures_total", error_type="unsupported_language")
        - value(before, "mt_request_failures_total", error_type="unsupported_language")
        == 1
    )
    assert total(after, "mt_requests_total") == total(before, "mt_requests_total")  # nothing reached the engine


def test_gauges_follow_the_load(server):
    """While a 32-text job runs on 8 rows, running/waiting/cache tokens are up; then all go back to 0."""
    job = body([f"the dog {i} runs" for i in range(32)], parameters=LONG)
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(httpx.post, server.url + "/translate", json=job, timeout=120)
        seen = {g: 0.0 for g in LOAD_GAUGES}

        def busy() -> bool:
            m = metrics(server.url)
            for g in LOAD_GAUGES:
                seen[g] = max(seen[g], value(m, g))
            return all(seen.values())

        wait_for(busy, timeout=30, interval=0.02)
        assert future.result().status_code == 200
    assert seen["mt_requests_running"] <= 8 and seen["mt_cache_tokens"] > 8

    def idle() -> bool:
        m = metrics(server.url)
        return all(value(m, g) == 0 for g in LOAD_GAUGES)

    wait_for(idle, timeout=10)


def tally_against_observe() -> tuple[list, list, list]:
    """Samples of a labelled histogram fed by a Tally before and after two pushes, and of one fed by observe."""
    from prometheus_client import CollectorRegistry, Histogram

    from app.metrics import LATENCY, Tally

    values = [(0.0004, 1), (0.001, 3), (0.0017, 2), (0.3, 1), (99.0, 1), (0.05, 0)]
    make = lambda name: Histogram(name, "h", ["phase"], buckets=LATENCY, registry=CollectorRegistry())  # noqa: E731
    direct, gathered = make("a").labels("decode"), make("b").labels("decode")
    tally = Tally(gathered)
    for v, n in values:
        for _ in range(n):
            direct.observe(v)
        tally.observe(v, n)
    samples = lambda h: [(s.name[1:], s.labels, round(s.value, 9)) for s in next(iter(h.collect())).samples]
    before = samples(gathered)
    tally.push()
    tally.push()
    return before, samples(gathered), samples(direct)


def test_a_tally_pushes_what_observe_would_have_written(tmp_path):
    """The engine core's gathered observations (app.metrics.Tally) reach the histogram with Histogram.observe's
    buckets, counts and sum, including values on a bucket's bound; pushing twice adds nothing. In this process and
    in multiprocess mode (the server's: values in shared files), as Tally writes prometheus_client's private
    `_buckets` and `_sum` (the version pinned in pyproject)."""
    before, pushed, direct = tally_against_observe()
    assert all(value == 0 for _, _, value in before)  # nothing written before the push
    assert any(value > 0 for _, _, value in direct) and pushed == direct
    code = "from tests.app.test_metrics import tally_against_observe as t; print(repr(t()))"
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    before, pushed, direct = ast.literal_eval(out)
    assert list(tmp_path.glob("histogram_*.db")), "not in multiprocess mode"
    assert all(value == 0 for _, _, value in before) and pushed == direct
