"""Prometheus and Grafana files: scrape targets, alert rules and dashboard queries against the metrics
contract of the server (shared/design/api.md)."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests import contract

from .helpers import (
    DASHBOARD,
    GRAFANA_DIR,
    PROMETHEUS_DIR,
    SERVER_PORT,
    SERVICE,
    compose_raw,
    grafana_provider,
    load_yaml,
    output,
    require,
    run,
)

# The server's metrics: names by type (the contract's), and the labels each may carry.
HISTOGRAMS, GAUGES, COUNTERS = set(contract.HISTOGRAMS), set(contract.GAUGES), set(contract.COUNTERS)
METRIC_LABELS = {
    "mt_requests_total": {"model", "finish_reason"},
    "mt_request_failures_total": {"error_type"},
    "mt_step_duration_seconds": {"phase"},
    "mt_limit_rejections_total": {"reason"},
    "mt_api_requests_total": {"dialect"},
    "mt_dependency_up": {"dependency"},
    "mt_dependency_errors_total": {"dependency"},
}
SCRAPE_LABELS = {"instance", "job", "le", "namespace", "pod"}


# --- Prometheus --------------------------------------------------------------------------------------


def metric_problems(expr: str) -> list[str]:
    """Names in a PromQL expression that are not in the server's metrics contract, or misused."""
    problems = []
    for name in re.findall(r"\bmt_[a-z0-9_]+\b", expr):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name in COUNTERS or name in GAUGES or (base in HISTOGRAMS and base != name):
            continue
        problems.append(f"{name} in {expr!r}")
    for labels in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
        for label in (s.strip() for s in labels.split(",") if s.strip()):
            owners = [m for m, allowed in METRIC_LABELS.items() if label in allowed]
            if label not in SCRAPE_LABELS and not any(owner in expr for owner in owners):
                problems.append(f"label {label} does not belong to a metric in {expr!r}")
    return problems


def test_prometheus_scrapes_every_translator_replica():
    config = load_yaml(PROMETHEUS_DIR / "prometheus.yml")
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    job = jobs["mt-server"]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    (sd,) = job["dns_sd_configs"]
    assert sd["names"] == [SERVICE] and sd["type"] == "A" and sd["port"] == SERVER_PORT
    for rule_file in config.get("rule_files", []):
        assert (PROMETHEUS_DIR / rule_file).is_file(), rule_file


def test_prometheus_alerts_use_contract_metrics():
    rules = [r for g in load_yaml(PROMETHEUS_DIR / "alerts.yml")["groups"] for r in g["rules"]]
    assert rules
    problems = [p for rule in rules for p in metric_problems(rule["expr"])]
    assert not problems, problems


def test_promtool_checks_config_and_rules():
    promtool = require("promtool", "Debian package prometheus")
    proc = run([promtool, "check", "config", str(PROMETHEUS_DIR / "prometheus.yml")])
    assert proc.returncode == 0, output(proc)


# --- Grafana -----------------------------------------------------------------------------------------


def dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert panels
    exprs = []
    for panel in panels:
        assert panel["targets"], f"panel {panel['title']} has no query"
        exprs += [target["expr"] for target in panel["targets"]]
    return exprs


def test_grafana_dashboard_uses_only_contract_metrics():
    exprs = dashboard_exprs()
    problems = [p for expr in exprs for p in metric_problems(expr)]
    assert not problems, problems


@pytest.mark.parametrize(
    "pattern",
    [
        r"histogram_quantile\(0\.5, .*mt_time_to_first_token_seconds_bucket",
        r"histogram_quantile\(0\.95, .*mt_time_to_first_token_seconds_bucket",
        r"mt_inter_token_latency_seconds_bucket",
        r"mt_request_queue_time_seconds_bucket",
        r"mt_requests_waiting",
        r"mt_requests_running",
        r"mt_batch_size_",
        r"rate\(mt_generated_tokens_total",
        r"by \(finish_reason\) \(rate\(mt_requests_total",
        r"by \(error_type\) \(rate\(mt_request_failures_total",
        r"mt_cache_tokens",
    ],
)
def test_grafana_dashboard_has_required_panel(pattern):
    assert any(re.search(pattern, expr) for expr in dashboard_exprs()), f"no panel query matches {pattern}"


def test_grafana_dashboard_queries_parse_as_promql(tmp_path):
    """promtool parses each panel query, with Grafana's variables filled in, as a recording rule."""
    promtool = require("promtool", "Debian package prometheus")
    exprs = [e.replace("$__rate_interval", "1m").replace("$instance", ".*") for e in dashboard_exprs()]
    rules = [{"record": f"dashboard:query_{i}", "expr": e} for i, e in enumerate(exprs)]
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    proc = run([promtool, "check", "rules", str(path)])
    assert proc.returncode == 0, output(proc)


def test_grafana_provisioning_points_at_compose_prometheus():
    (source,) = load_yaml(GRAFANA_DIR / "provisioning" / "datasources" / "prometheus.yml")["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    assert "9090" in compose_raw()["services"]["prometheus"]["ports"][0]
    dashboard = json.loads(DASHBOARD.read_text())
    refs = {json.dumps(p.get("datasource")) for p in dashboard["panels"] if p["type"] != "row"}
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    for ref in map(json.loads, refs):
        uid = ref["uid"]
        if uid.startswith("$"):
            assert variables[uid.strip("${}")]["query"] == "prometheus"
        else:
            assert uid == source["uid"]
    assert grafana_provider()["type"] == "file"
