"""Static checks of the compose variants on Redis Cluster and Sentinel (deploy/compose/): each,
merged over docker-compose.yml as `docker compose -f docker-compose.yml -f <variant>` merges
it, names only services it defines, waits for them, and gives the API a URL of its form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from service.redis_connect import Target

REPO = Path(__file__).resolve().parents[2]
VARIANTS = REPO / "deploy" / "compose"


def merged(variant: str) -> dict[str, Any]:
    """docker-compose.yml with the variant over it: mappings merge, other values replace."""

    def merge(base: Any, over: Any) -> Any:
        if isinstance(base, dict) and isinstance(over, dict):
            return {k: merge(base.get(k), over[k]) if k in base else over[k] for k in over} | {
                k: v for k, v in base.items() if k not in over
            }
        return over

    base = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    return dict(merge(base, yaml.safe_load((VARIANTS / variant).read_text())))


@pytest.mark.parametrize(("variant", "kind"), [("cluster.yml", "cluster"),
                                               ("sentinel.yml", "sentinel")])
def test_the_api_waits_for_the_servers_its_url_names(variant: str, kind: str) -> None:
    compose = merged(variant)
    services = compose["services"]
    api = services["api"]
    target = Target.parse(api["environment"]["SMCT_REDIS_URL"])
    assert target.kind == kind and api["environment"]["SMCT_REDIS_MIN_REPLICAS"] == "1"
    for host, _ in target.nodes:
        assert host in services, f"{variant}: the URL names {host}, which is not a service"
    for name, service in services.items():
        for needed in service.get("depends_on", {}):
            assert needed in services, f"{variant}: {name} depends on a missing {needed}"
        if "profiles" not in service:
            assert service.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            if source.startswith("."):
                assert (REPO / source).exists(), f"{variant}: {source} does not exist"
            else:
                assert source in compose["volumes"], f"{variant}: undeclared volume {source}"
    waits = {name for name, dep in api["depends_on"].items()
             if dep["condition"] == "service_healthy"}
    assert waits >= ({host for host, _ in target.nodes} if kind == "sentinel" else {"redis"})


def test_the_cluster_is_six_nodes_announced_by_name_joined_with_a_replica_each() -> None:
    services = merged("cluster.yml")["services"]
    nodes = [s for s in services if s.startswith("redis-node-")]
    assert len(nodes) == 6
    for name in nodes:
        command = " ".join(services[name]["command"])
        assert services[name]["hostname"] == name
        assert "--cluster-enabled yes" in command and "--appendonly yes" in command
        assert '--cluster-announce-hostname "$$(hostname)"' in command
    join = " ".join(services["redis"]["command"])
    assert "--cluster-replicas 1" in join and all(f"{n}:6379" in join for n in nodes)
    assert "cluster_state:ok" in " ".join(services["redis"]["healthcheck"]["test"])


def test_the_sentinels_watch_the_stack_s_redis_with_a_quorum_of_two() -> None:
    services = merged("sentinel.yml")["services"]
    conf = (VARIANTS / "sentinel.conf").read_text()
    assert "sentinel monitor smct redis 6379 2" in conf
    assert "sentinel resolve-hostnames yes" in conf
    sentinels = [s for s in services if s.startswith("sentinel-")]
    replicas = [s for s in services if s.startswith("redis-replica-")]
    assert len(sentinels) == 3 and len(replicas) == 2
    for name in replicas:
        command = services[name]["command"]
        assert command[command.index("--replicaof") + 1 :] == ["redis", "6379"]
    # every server that may be a primary keeps a backlog that holds a failover's writes (a
    # replica repointed resumes from it; a full resync leaves a window in which a second
    # failover promotes a stale replica: docs/scaling.md)
    base = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]["redis"]
    for name in ["redis", *replicas]:
        command = services[name]["command"]
        assert command[command.index("--repl-backlog-size") + 1] == "64mb", name
        assert " ".join(base["command"]) in " ".join(command), name  # the stack's flags kept
