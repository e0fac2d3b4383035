"""The provisioned Grafana dashboard: valid JSON, valid PromQL, only real metric names."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

GRAFANA = Path(__file__).resolve().parents[2] / "docker" / "grafana"
Dashboard = dict[str, Any]


@pytest.fixture(scope="module")
def dashboard() -> Dashboard:
    return json.loads((GRAFANA / "dashboards" / "smct.json").read_text())


def expressions(dashboard: Dashboard) -> list[str]:
    return [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]


def test_dashboard_has_the_required_panels(dashboard: Dashboard) -> None:
    titles = " | ".join(panel["title"] for panel in dashboard["panels"]).lower()
    for topic in ("picp", "mpiw", "effective sample size", "anomalies", "latency", "throughput"):
        assert topic in titles, f"no panel about {topic}"
    assert dashboard["uid"] and len(expressions(dashboard)) >= 10


def test_queries_name_only_exposed_or_recorded_series(
    dashboard: Dashboard,
    exposed_metrics: set[str],
    recorded_names: set[str],
    names_in: Callable[[str], set[str]],
) -> None:
    for expr in expressions(dashboard):
        names = names_in(expr)
        assert names, f"query reads no smct series: {expr}"
        unknown = names - exposed_metrics - recorded_names
        assert not unknown, f"query {expr!r} names unknown series {unknown}"


def test_queries_are_valid_promql(
    dashboard: Dashboard, promtool: str, run: Callable[..., Any], tmp_path: Path
) -> None:
    rules = [
        {"record": f"dashboard:query_{i}:check", "expr": expr}
        for i, expr in enumerate(expressions(dashboard))
    ]
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    run(promtool, "check", "rules", str(path))


def test_panels_use_the_datasource_variable(dashboard: Dashboard) -> None:
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]


def test_provisioning_points_at_compose_services(compose: dict[str, Any]) -> None:
    datasources = yaml.safe_load(
        (GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )
    assert datasources["datasources"][0]["url"] == "http://prometheus:9090"
    assert "prometheus" in compose["services"]
    providers = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "smct.yml").read_text())
    path = providers["providers"][0]["options"]["path"]
    assert f"./docker/grafana/dashboards:{path}:ro" in compose["services"]["grafana"]["volumes"]
