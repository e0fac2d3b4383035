"""The Prometheus metrics of docs/contracts.md: present, consistent with the answers, lint-clean,
and each observation metered once when a write to the store fails or times out."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.service.test_api import observe, put

HISTOGRAMS = {
    "smct_http_request_duration_seconds", "smct_filter_update_duration_seconds",
    "smct_forecast_duration_seconds", "smct_batch_size", "smct_ess_ratio", "smct_interval_width",
    "smct_crps", "smct_log_score", "smct_pit", "smct_state_bytes", "smct_spread_factor",
    "smct_issued_level_percent",
    "smct_state_store_operation_duration_seconds",
}
COUNTERS = {
    "smct_observations", "smct_observations_covered", "smct_resampling", "smct_anomalies",
    "smct_state_store_operations", "smct_state_store_errors", "smct_http_requests",
    "smct_horizon_scored", "smct_horizon_covered", "smct_horizon_interval_width",
}
GAUGES = {"smct_rolling_picp", "smct_rolling_log_score", "smct_model_info", "smct_series_active"}
LABELS = {"route", "method", "status", "kind", "level", "operation", "model_version", "backend",
          "device", "le", "step"}


def scrape(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """sample name and sorted labels -> value."""
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def feed(client: TestClient, runtime: Any, n: int = 12) -> list[dict[str, Any]]:
    """n observations (one missing) one request each; returns the per-observation results."""
    t = put(client, runtime)["seq"]
    results = []
    for i in range(n):
        v = None if i == 3 else (0.4 * i if i % 5 else 25.0)  # some far outside the intervals
        r = observe(client, t + i, v)
        assert r.status_code == 200, r.text
        results.extend(r.json()["observations"])
    return results


def test_every_contract_metric_is_exposed(client: TestClient, runtime: Any) -> None:
    feed(client, runtime, 3)
    client.get("/v1/series/s1/forecast")
    text = client.get("/metrics").text
    families = {f.name: f.type for f in text_string_to_metric_families(text)}
    for name in HISTOGRAMS:
        assert families.get(name) == "histogram", name
    for name in COUNTERS:
        assert families.get(name) == "counter", name
    for name in GAUGES - {"smct_series_active"}:
        assert families.get(name) == "gauge", name
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            assert set(sample.labels) <= LABELS, sample  # never a per-series label
            assert "s1" not in sample.labels.values()


def test_rolling_log_score_is_absent_until_a_value_is_observed(
    client: TestClient, runtime: Any
) -> None:
    """Before any observed value the mean log score is not exported (a 0 would look perfect);
    a missing value does not create it either."""
    names = {f.name for f in text_string_to_metric_families(client.get("/metrics").text)}
    assert "smct_rolling_log_score" not in names
    t = put(client, runtime)["seq"]
    assert observe(client, t, None).status_code == 200
    names = {f.name for f in text_string_to_metric_families(client.get("/metrics").text)}
    assert "smct_rolling_log_score" not in names
    answer = observe(client, t + 1, 0.3).json()["observations"][0]
    samples = scrape(client)
    # the metrics read the runtime's numbers, the answer gives them to 6 significant digits
    assert value(samples, "smct_rolling_log_score") == pytest.approx(-answer["log_score"], rel=1e-5)


def test_observation_metrics_match_the_answers(client: TestClient, runtime: Any) -> None:
    before = scrape(client)
    results = feed(client, runtime)
    body = {"observations": [{"seq": results[-1]["seq"], "value": results[-1]["value"]}]}
    assert client.post("/v1/series/s1/observations", json=body).headers["Idempotent-Replay"]
    after = scrape(client)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    observed = [r for r in results if r["covered"] is not None]
    # the metrics read the runtime's numbers (service/answers.py observed): sums agree to rounding
    assert delta("smct_observations_total") == len(observed) == len(results) - 1
    for level in ("80", "95"):
        hits = sum(r["covered"][level] for r in observed)
        assert delta("smct_observations_covered_total", level=level) == hits
        assert value(after, "smct_rolling_picp", level=level) == pytest.approx(hits / len(observed))
        assert delta("smct_interval_width_count", level=level) == len(observed)
        widths = sum(r["intervals"][level]["hi"] - r["intervals"][level]["lo"] for r in observed)
        assert delta("smct_interval_width_sum", level=level) == pytest.approx(widths, rel=1e-5)
        # by horizon: each value scored the forecasts answered 1, 2, 3 and 6 updates before
        # it (the missing value scored none, nor did the forecasts issued for it)
        for step in (1, 2, 3, 6):
            scored = [h for r in results for h in r["horizons"] if h["step"] == step]
            assert scored, step
            assert delta("smct_horizon_scored_total", step=str(step), level=level) == len(scored)
            hits = sum(h["covered"][level] for h in scored)
            assert delta("smct_horizon_covered_total", step=str(step), level=level) == hits
            widths = sum(h["width"][level] for h in scored)
            assert delta("smct_horizon_interval_width_total", step=str(step),
                         level=level) == pytest.approx(widths, rel=1e-5)
    assert [h["step"] for h in results[0]["horizons"]] == []  # no update answered before it
    assert [h["step"] for h in results[7]["horizons"]] == [1, 2, 3, 6]
    assert delta("smct_anomalies_total") == sum(bool(r["anomaly"]) for r in observed) >= 1
    assert delta("smct_resampling_total") == sum(r["resampled"] for r in results)
    assert delta("smct_pit_count") == len(observed)
    assert delta("smct_pit_sum") == pytest.approx(sum(r["pit"] for r in observed), rel=1e-5)
    assert delta("smct_crps_count") == delta("smct_log_score_count") == len(observed)
    log_scores = -sum(r["log_score"] for r in observed)
    assert delta("smct_log_score_sum") == pytest.approx(log_scores, rel=1e-5)
    assert value(after, "smct_rolling_log_score") == pytest.approx(
        log_scores / len(observed), rel=1e-5
    )
    assert delta("smct_ess_ratio_count") == len(results)
    assert 0 < value(after, "smct_ess_ratio_sum") <= value(after, "smct_ess_ratio_count")
    assert delta("smct_filter_update_duration_seconds_count") >= len(results)
    # an update's call forecasts its answer too: no forecast call of its own
    assert delta("smct_forecast_duration_seconds_count") == 0
    assert delta("smct_batch_size_count", kind="update") >= len(results)
    assert delta("smct_state_bytes_count") == len(results) + 1  # + the PUT
    assert delta("smct_state_store_operations_total", operation="commit") == len(results) + 1
    route = "/v1/series/{series_id}/observations"
    posts = {"route": route, "method": "POST", "status": "200"}
    assert delta("smct_http_requests_total", **posts) == len(results) + 1
    assert delta("smct_http_request_duration_seconds_count", route=route, method="POST",
                 status="200") == len(results) + 1
    assert value(after, "smct_model_info", model_version=runtime.model_version,
                 backend=runtime.backend_name, device=runtime.device) == 1


def test_error_answers_are_counted_by_status(client: TestClient) -> None:
    client.get("/v1/series/nope")
    client.get("/no/such/route")
    s = scrape(client)
    assert value(s, "smct_http_requests_total", route="/v1/series/{series_id}", method="GET",
                 status="404") == 1
    assert value(s, "smct_http_requests_total", route="unmatched", method="GET", status="404") == 1


def test_series_active_with_the_embedded_store(make_client: Any, runtime: Any) -> None:
    client = make_client()
    put(client, runtime, "a")
    put(client, runtime, "b")
    assert value(scrape(client), "smct_series_active") == 2


def test_series_active_is_absent_where_the_store_cannot_count(
    make_client: Any, runtime: Any, redis_url: str
) -> None:
    client = make_client(redis_url=redis_url)
    put(client, runtime, "a")
    assert not any(name == "smct_series_active" for name, _ in scrape(client))


def test_promtool_check_metrics(client: TestClient, runtime: Any) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing (CI is set); see tests/deploy/install_tools.sh")
        pytest.skip("promtool is not installed")
    feed(client, runtime, 3)
    text = client.get("/metrics").text
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def test_a_blocking_read_of_events_is_counted_not_timed() -> None:
    """A read of events waits up to 10 s for one: a wait, not a latency, it would fill the
    duration histogram's +Inf bucket. It is counted like every store operation."""
    from prometheus_client import generate_latest

    from service.metrics import Metrics

    metrics = Metrics((80.0, 95.0))
    metrics.observe_store("read_events", 9.5, False)
    metrics.observe_store("load", 0.002, False)
    samples = {}
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    ops = "smct_state_store_operations_total"
    assert value(samples, ops, operation="read_events") == 1
    assert value(samples, ops, operation="load") == 1
    duration = "smct_state_store_operation_duration_seconds_count"
    assert value(samples, duration, operation="load") == 1
    assert value(samples, duration, operation="read_events") == 0


def test_the_embedded_store_counts_its_reads_of_events(client: TestClient, runtime: Any) -> None:
    put(client, runtime)
    before = scrape(client)
    with client.stream("GET", "/v1/series/s1/events", headers={"Last-Event-ID": "0"}) as r:
        assert r.status_code == 200
        next(r.iter_lines())
    after = scrape(client)
    ops = "smct_state_store_operations_total"
    count = value(after, ops, operation="read_events") - value(before, ops, operation="read_events")
    assert count >= 1


def test_an_observation_applied_by_a_write_that_timed_out_is_metered_on_its_repeat(
    client: TestClient, runtime: Any
) -> None:
    """A commit that times out may have been applied; the client is told to repeat the
    request, which is then a replay. The observation is metered once: on that repeat."""
    from service.errors import StoreUnavailable

    t = put(client, runtime)["seq"]
    series = client.app.state.series  # type: ignore[attr-defined]
    commit = series.store.commit
    calls = 0

    async def applied_then_timeout(series_id: str, write: Any) -> bool:
        nonlocal calls
        calls += 1
        done = await commit(series_id, write)
        if calls == 1:
            raise StoreUnavailable("timed out; it may have been applied", maybe_applied=True)
        return bool(done)

    series.store.commit = applied_then_timeout
    before = scrape(client)
    assert observe(client, t, 0.4).status_code == 503
    mid = scrape(client)
    assert value(mid, "smct_observations_total") == value(before, "smct_observations_total")
    again = observe(client, t, 0.4)
    assert again.status_code == 200 and again.headers.get("Idempotent-Replay") == "true"
    once = scrape(client)
    assert value(once, "smct_observations_total") == value(before, "smct_observations_total") + 1
    assert observe(client, t, 0.4).status_code == 200  # a third time: a plain repeat
    assert value(scrape(client), "smct_observations_total") == value(
        once, "smct_observations_total"
    )
    assert observe(client, t + 1, 0.5).status_code == 200  # and on it goes
    assert value(scrape(client), "smct_observations_total") == value(
        once, "smct_observations_total"
    ) + 1


def test_a_write_that_failed_unapplied_is_not_metered_when_another_worker_applied_it(
    client: TestClient, runtime: Any
) -> None:
    """Worker A's commit times out without applying; worker B applies the repeat (and meters
    it); a later repeat through A finds B's write, not its own, and meters nothing."""
    from service.errors import StoreUnavailable
    from service.metrics import Metrics
    from service.schemas.series import ObservationsRequest
    from service.series import SeriesService

    t = put(client, runtime)["seq"]
    a = client.app.state.series  # type: ignore[attr-defined]
    b = SeriesService(a.engine, a.store, Metrics((80.0, 95.0)), a.settings)
    commit = a.store.commit
    calls = 0

    async def first_times_out(series_id: str, write: Any) -> bool:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise StoreUnavailable("timed out; it may have been applied", maybe_applied=True)
        return bool(await commit(series_id, write))

    a.store.commit = first_times_out
    before = scrape(client)
    assert observe(client, t, 0.4).status_code == 503  # not applied
    request = ObservationsRequest.model_validate({"observations": [{"seq": t, "value": 0.4}]})
    answer = client.portal.call(b.append, "s1", request)  # type: ignore[union-attr]
    assert not answer.replay
    again = observe(client, t, 0.4)
    assert again.status_code == 200 and again.headers.get("Idempotent-Replay") == "true"
    total = "smct_observations_total"
    assert value(scrape(client), total) == value(before, total)  # B counted it, in its registry
    assert not a._unmetered  # and A forgot it


def test_a_write_whose_reply_was_lost_is_metered(client: TestClient, runtime: Any) -> None:
    """redis-py resends a write whose connection broke while reading the reply; if the first
    send ran, the resend fails its version check and the commit says False. The request then
    finds its own write applied (its token) and meters it."""
    t = put(client, runtime)["seq"]
    series = client.app.state.series  # type: ignore[attr-defined]
    commit = series.store.commit
    calls = 0

    async def applied_but_false(series_id: str, write: Any) -> bool:
        nonlocal calls
        calls += 1
        done = await commit(series_id, write)
        return bool(done) and calls > 1

    series.store.commit = applied_but_false
    before = scrape(client)
    r = observe(client, t, 0.4)
    assert r.status_code == 200 and r.json()["seq"] == t + 1, r.text
    total = "smct_observations_total"
    assert value(scrape(client), total) == value(before, total) + 1
