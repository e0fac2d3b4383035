"""Prometheus configuration and rules: promtool checks, rule unit tests, metric names."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

PROMETHEUS = Path(__file__).resolve().parents[2] / "docker" / "prometheus"
OPERATOR_RULES = PROMETHEUS.parents[1] / "deploy/components/monitoring/prometheusrule.yaml"
Rules = dict[str, Any]


def all_rules(rules: Rules) -> list[dict[str, Any]]:
    return [rule for group in rules["groups"] for rule in group["rules"]]


def test_promtool_check_config(promtool: str, run: Callable[..., Any]) -> None:
    run(promtool, "check", "config", "prometheus.yml", cwd=PROMETHEUS)


def test_promtool_check_rules(promtool: str, run: Callable[..., Any]) -> None:
    run(promtool, "check", "rules", "rules.yml", cwd=PROMETHEUS)


def test_promtool_rule_unit_tests(promtool: str, run: Callable[..., Any]) -> None:
    run(promtool, "test", "rules", "rules_test.yml", cwd=PROMETHEUS)


def test_rules_read_only_exposed_or_recorded_series(
    rules: Rules, exposed_metrics: set[str], recorded_names: set[str], names_in: Callable
) -> None:
    for rule in all_rules(rules):
        unknown = names_in(rule["expr"]) - exposed_metrics - recorded_names
        assert not unknown, f"{rule.get('record') or rule.get('alert')} reads unknown {unknown}"


def test_required_recording_and_alert_rules(rules: Rules, recorded_names: set[str]) -> None:
    records = {rule["record"]: rule["expr"] for rule in all_rules(rules) if "record" in rule}
    picp = records["level:smct_picp:ratio_rate5m"]
    assert "smct_observations_covered_total" in picp and "smct_observations_total" in picp
    assert "smct_interval_width_sum" in records["level:smct_mpiw:mean5m"]
    alerts = {rule["alert"] for rule in all_rules(rules) if "alert" in rule}
    assert {
        "SMCTCoverageFarFromNominal",
        "SMCTESSCollapse",
        "SMCTHighErrorRate",
        "SMCTHighLatency",
    } <= alerts
    for rule in all_rules(rules):
        if "alert" in rule:
            assert rule["labels"]["severity"] in ("warning", "critical")
            assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_operator_rules_equal_compose_rules(rules: Rules) -> None:
    operator = yaml.safe_load(OPERATOR_RULES.read_text())
    assert operator["kind"] == "PrometheusRule"
    assert operator["spec"] == rules, f"{OPERATOR_RULES} drifted from rules.yml: edit both"
