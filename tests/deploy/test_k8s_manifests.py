"""deploy/: kustomize renders, resources validate against the Kubernetes schemas, and the
pieces fit together (selectors, ports, config, probes, GPU, Redis persistence)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

# Oldest and newest Kubernetes versions the manifests are checked against.
K8S_VERSIONS = ("1.30.0", "1.37.0")
OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}
SERVING = ("overlays/cpu", "overlays/gpu", "overlays/managed-redis", "overlays/redis-ha")
KUSTOMIZATIONS = (*SERVING, "train")
Resource = dict[str, Any]
Render = Callable[[str], list[Resource]]


def one(resources: list[Resource], kind: str, name: str | None = None) -> Resource:
    found = [r for r in resources if r["kind"] == kind and name in (None, r["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def api_container(resources: list[Resource]) -> Resource:
    return one(resources, "Deployment", "smct")["spec"]["template"]["spec"]["containers"][0]


def config(resources: list[Resource]) -> dict[str, str]:
    return one(resources, "ConfigMap")["data"]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_resources_validate_against_kubernetes_schemas(
    name: str, version: str, render: Render, kubernetes_validate: Any
) -> None:
    resources = render(name)
    assert resources
    for resource in resources:
        if resource["kind"] in OPERATOR_KINDS:
            continue  # CRDs: checked below and by promtool
        kubernetes_validate.validate(resource, version, strict=True)
        assert resource["metadata"].get("namespace", "smct") == "smct"


@pytest.mark.parametrize("name", SERVING)
def test_deployment_probes_resources_and_security(name: str, render: Render) -> None:
    resources = render(name)
    pod = one(resources, "Deployment", "smct")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/health/live"
    assert container["readinessProbe"]["httpGet"]["path"] == "/health/ready"
    assert container["ports"][0]["containerPort"] == 8000
    for key in ("cpu", "memory"):
        assert container["resources"]["requests"][key] and container["resources"]["limits"][key]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]


@pytest.mark.parametrize("name", SERVING)
def test_config_from_configmap_and_api_keys_from_secret(
    name: str, render: Render, env_vars: set[str]
) -> None:
    resources = render(name)
    sources = api_container(resources)["envFrom"]
    configmap = one(resources, "ConfigMap")
    assert sources[0]["configMapRef"]["name"] == configmap["metadata"]["name"]
    assert sources[-1]["secretRef"]["name"] == "smct-secrets"
    assert "optional" not in sources[-1]["secretRef"], "without keys the API would be open"
    assert set(configmap["data"]) <= env_vars, f"unknown: {set(configmap['data']) - env_vars}"
    assert "SMCT_API_KEYS" not in configmap["data"]
    assert configmap["data"]["SMCT_ARTIFACT"] == "/artifacts/default"
    mounts = {m["mountPath"]: m for m in api_container(resources)["volumeMounts"]}
    assert mounts["/artifacts"]["readOnly"] is True


@pytest.mark.parametrize("name", SERVING)
def test_service_hpa_pdb_and_monitor_select_the_api_pods(name: str, render: Render) -> None:
    resources = render(name)
    deployment = one(resources, "Deployment", "smct")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    service = one(resources, "Service", "smct")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    port_names = {p["name"] for p in api_container(resources)["ports"]}
    assert service["spec"]["ports"][0]["targetPort"] in port_names
    hpa = one(resources, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "smct",
    }
    assert 2 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    pdb = one(resources, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pdb["spec"]["minAvailable"] < hpa["spec"]["minReplicas"]
    monitor = one(resources, "ServiceMonitor")
    service_labels = service["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service_labels.items()
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert endpoint["path"] == "/metrics"
    assert one(resources, "PrometheusRule")["spec"]["groups"]


@pytest.mark.parametrize("name", ("overlays/cpu", "overlays/gpu"))
def test_in_cluster_redis_is_append_only_on_a_volume(name: str, render: Render) -> None:
    resources = render(name)
    statefulset = one(resources, "StatefulSet", "redis")
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[args.index("--appendonly") + 1] == "yes"
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction"
    data_dir = args[args.index("--dir") + 1]
    claims = {c["metadata"]["name"] for c in statefulset["spec"]["volumeClaimTemplates"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["data"] == data_dir and "data" in claims
    service = one(resources, "Service", statefulset["spec"]["serviceName"])
    assert config(resources)["SMCT_REDIS_URL"] == f"redis://{service['metadata']['name']}:6379/0"


def test_managed_redis_overlay_runs_no_redis(render: Render) -> None:
    resources = render("overlays/managed-redis")
    assert not [r for r in resources if r["kind"] == "StatefulSet"]
    assert "SMCT_REDIS_URL" not in config(resources), "the URL comes from smct-secrets"


def test_replicated_redis_overlay_waits_for_a_replica_and_runs_no_redis(render: Render) -> None:
    resources = render("overlays/redis-ha")
    assert not [r for r in resources if r["kind"] == "StatefulSet"]
    assert config(resources)["SMCT_REDIS_MIN_REPLICAS"] == "1"
    assert "SMCT_REDIS_URL" not in config(resources), "the URL comes from smct-secrets"


def test_gpu_overlay_requests_a_gpu_and_the_cuda_image(render: Render) -> None:
    resources = render("overlays/gpu")
    container = api_container(resources)
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["image"].split("/")[-1].startswith("smct-cuda:")
    assert config(resources)["SMCT_DEVICE"] == "cuda"
    assert "nvidia.com/gpu" not in api_container(render("overlays/cpu"))["resources"]["limits"]
    assert config(render("overlays/cpu"))["SMCT_DEVICE"] == "cpu"


def test_trainer_job_writes_the_volume_the_api_reads(render: Render) -> None:
    job = one(render("train"), "Job", "smct-train")["spec"]["template"]["spec"]
    claim = job["volumes"][0]["persistentVolumeClaim"]["claimName"]
    assert claim == one(render("overlays/cpu"), "PersistentVolumeClaim")["metadata"]["name"]
    assert job["containers"][0]["image"].split("/")[-1].startswith("smct-trainer:")
    assert job["restartPolicy"] == "Never"
