"""Static checks of docker-compose.yml: services, volumes, health checks, configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
Compose = dict[str, Any]


def named_volume_mounts(service: dict[str, Any]) -> dict[str, str]:
    """Named volume -> mount spec ('target' or 'target:ro') of a service."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, _, target = volume.partition(":")
        if not source.startswith((".", "/")):
            mounts[source] = target
    return mounts


def test_services(compose: Compose) -> None:
    assert set(compose["services"]) == {"redis", "api", "trainer", "prometheus", "grafana"}


def test_every_long_running_service_has_a_health_check(compose: Compose) -> None:
    for name, service in compose["services"].items():
        if "profiles" not in service:
            assert service.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"


def test_redis_is_append_only_on_a_volume(compose: Compose) -> None:
    redis = compose["services"]["redis"]
    command = redis["command"]
    assert command[0] == "redis-server"
    assert command[command.index("--appendonly") + 1] == "yes"
    assert named_volume_mounts(redis) == {"redis-data": "/data"}
    assert "ping" in redis["healthcheck"]["test"]


def test_api_waits_for_redis_and_is_configured_by_environment(
    compose: Compose, env_vars: set[str]
) -> None:
    api = compose["services"]["api"]
    assert api["depends_on"]["redis"]["condition"] == "service_healthy"
    assert api["build"]["dockerfile"] == "docker/Dockerfile"
    environment = api["environment"]
    assert set(environment) <= env_vars, f"unknown: {set(environment) - env_vars}"
    assert environment["SMCT_REDIS_URL"] == "redis://redis:6379/0"
    assert environment["SMCT_ARTIFACT"] == "/artifacts/default"
    assert named_volume_mounts(api) == {"artifacts": "/artifacts:ro"}
    assert any(port.endswith(":8000") for port in api["ports"])
    assert "/health/ready" in " ".join(api["healthcheck"]["test"])


def test_trainer_is_a_one_shot_profile_writing_the_shared_artifact(compose: Compose) -> None:
    trainer = compose["services"]["trainer"]
    assert trainer["profiles"] == ["train"]
    assert trainer["build"]["dockerfile"] == "docker/Dockerfile.trainer"
    assert trainer["restart"] == "no"
    assert named_volume_mounts(trainer) == {"artifacts": "/artifacts"}
    assert trainer["environment"]["ARTIFACT_ROOT"] == "/artifacts"


def test_prometheus_and_grafana_mount_the_repository_config(compose: Compose) -> None:
    services = compose["services"]
    assert "./docker/prometheus:/etc/prometheus:ro" in services["prometheus"]["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in services["prometheus"]["command"]
    grafana_volumes = services["grafana"]["volumes"]
    assert "./docker/grafana/provisioning:/etc/grafana/provisioning:ro" in grafana_volumes
    assert "./docker/grafana/dashboards:/etc/grafana/dashboards:ro" in grafana_volumes


def test_volumes_are_declared_and_bind_mounts_exist(compose: Compose) -> None:
    used: set[str] = set()
    for name, service in compose["services"].items():
        used |= set(named_volume_mounts(service))
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (REPO / source).exists(), f"{name} mounts missing {source}"
        build = service.get("build")
        if build:
            assert (REPO / build["context"] / build["dockerfile"]).is_file()
    expected = {"redis-data", "artifacts", "prometheus-data", "grafana-data"}
    assert used == set(compose["volumes"]) == expected
