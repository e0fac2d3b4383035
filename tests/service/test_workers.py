"""`smct serve --workers 2` on one Redis: the workers share the series and one /metrics."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from tests.service.conftest import ProcessServer
from tests.service.test_api import history

OBSERVATIONS = 10
SCRAPES = 8


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def per_process(folder: Path) -> dict[int, float]:
    """smct_observations_total in each worker's own file (pid -> count)."""
    out = {}
    for path in folder.glob("counter_*.db"):
        pid = int(path.stem.rsplit("_", 1)[1])
        registry = CollectorRegistry()
        collector = MultiProcessCollector(registry, path=str(folder))
        metrics = collector.merge([str(path)], accumulate=False)
        out[pid] = sum(
            s.value for m in metrics if m.name == "smct_observations" for s in m.samples
            if s.name == "smct_observations_total"
        )
    return out


def test_two_workers_share_series_and_metrics(
    server_env: dict[str, str], runtime: Any, redis_url: str, tmp_path: Path
) -> None:
    folder = tmp_path / "prom"
    env = {**server_env, "SMCT_REDIS_URL": redis_url, "PROMETHEUS_MULTIPROC_DIR": str(folder)}
    values = history(runtime)
    with ProcessServer(env, serve=["--workers", "2"]) as server:
        # a new connection per request: the kernel hands them to either worker
        created = httpx.put(f"{server.url}/v1/series/w1", json={"values": values}, timeout=60)
        assert created.status_code == 201, created.text
        seq = created.json()["seq"]
        for k in range(OBSERVATIONS):
            r = httpx.post(
                f"{server.url}/v1/series/w1/observations",
                json={"observations": [{"seq": seq + k, "value": values[-1] + 0.1 * k}]},
                timeout=60,
            )
            assert r.status_code == 200, r.text
        meta = httpx.get(f"{server.url}/v1/series/w1", timeout=30).json()
        scrapes = [httpx.get(f"{server.url}/metrics", timeout=30).text for _ in range(SCRAPES)]

    assert meta["seq"] == seq + OBSERVATIONS and meta["version"] == 1 + OBSERVATIONS
    route = (("method", "POST"), ("route", "/v1/series/{series_id}/observations"),
             ("status", "200"))
    for text in scrapes:  # whichever worker answers, it counts both workers' observations
        got = samples(text)
        assert got[("smct_observations_total", ())] == OBSERVATIONS
        assert got[("smct_http_requests_total", route)] == OBSERVATIONS
        assert got[("smct_observations_covered_total", (("level", "95"),))] <= OBSERVATIONS
        assert got[("smct_model_info", (("backend", "torch"), ("device", "cpu"),
                                        ("model_version", runtime.model_version)))] == 1
        assert got[("smct_filter_update_duration_seconds_count", ())] >= 1
    counts = per_process(folder)
    assert len(counts) == 2, counts  # both workers write their own file
    assert sum(counts.values()) == OBSERVATIONS

    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing (CI is set); see tests/deploy/install_tools.sh")
        pytest.skip("promtool is not installed")
    done = subprocess.run([promtool, "check", "metrics"], input=scrapes[-1], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


WORKER = """
import sys
from service.metrics import Metrics
metrics = Metrics((80.0, 95.0))
metrics.set_model(sys.argv[1], "torch", "cpu")
metrics._roll("80", sys.argv[1] == "new")
sys.stdout.write(metrics.render().decode())
if sys.argv[2] == "exit":
    metrics.close()
"""


def test_a_worker_that_ends_takes_its_gauges_along(tmp_path: Path) -> None:
    """A restarted worker (SIGHUP, a new artifact) must not leave the old model in
    smct_model_info, nor its coverage in smct_rolling_picp: live gauges, marked dead at the
    end of the worker (Metrics.close, from the lifespan)."""
    folder = tmp_path / "prom"
    folder.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

    def worker(model: str, end: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        done = subprocess.run([sys.executable, "-c", WORKER, model, end], env=env,
                              capture_output=True, text=True, timeout=60, check=True)
        return samples(done.stdout)

    old = worker("old", "exit")
    info = ("smct_model_info", (("backend", "torch"), ("device", "cpu"), ("model_version", "old")))
    assert old[info] == 1 and old[("smct_rolling_picp", (("level", "80"),))] == 0.0
    new = worker("new", "stay")  # its files stay: it is still serving
    assert not any(labels and ("model_version", "old") in labels for _, labels in new)
    assert new[("smct_rolling_picp", (("level", "80"),))] == 1.0
    again = worker("newer", "exit")  # another worker beside it sees both live ones
    versions = {dict(labels)["model_version"] for name, labels in again if name == info[0]}
    assert versions == {"new", "newer"}
