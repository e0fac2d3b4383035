"""Each series' adaptation in its metadata and in the metrics: the spread factor and issued
levels, switching adaptation off, the correction of the mean and the seasonal profile."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.service.test_api import observe, put
from tests.service.test_metrics import scrape, value


def _adaptation(client: TestClient) -> dict[str, Any]:
    r = client.get("/v1/series/s1")
    assert r.status_code == 200, r.text
    return dict(r.json()["adaptation"])


def test_series_adaptation_in_metadata_and_metrics(client: TestClient, runtime: Any) -> None:
    """Each write shows the series' adaptation: its observation-scale factor and the level its
    monitored intervals are issued at; misses (values of 25 far outside) raise the issued 80 %
    level above nominal; /metrics counts one factor and one issued level per write."""
    put(client, runtime)
    first = _adaptation(client)
    assert first["spread"] and first["coverage"]
    assert len(first["spread_factor"]) == 1 and first["spread_factor"][0] > 0
    assert sorted(first["issued_levels"]) == ["80", "95"]
    t = client.get("/v1/series/s1").json()["seq"]
    for i in range(4):
        assert observe(client, t + i, 25.0).status_code == 200
    after = _adaptation(client)
    assert after["issued_levels"]["80"] > first["issued_levels"]["80"]
    assert after["spread_factor"][0] > first["spread_factor"][0]  # far values: a wider noise
    samples = scrape(client)
    assert value(samples, "smct_spread_factor_count") == 5  # the create and 4 updates
    assert value(samples, "smct_issued_level_percent_count", level="80") == 5


def test_adaptation_can_be_switched_off(
    make_client: Any, runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SMCT_ADAPT_SPREAD / SMCT_ADAPT_COVERAGE off (the runtime Engine.load builds from them):
    the metadata says so and nothing is adapted, whatever the series does."""
    from model.runtime.runtime import Runtime
    from service.settings import Settings

    monkeypatch.setenv("SMCT_ADAPT_SPREAD", "false")
    monkeypatch.setenv("SMCT_ADAPT_COVERAGE", "0")
    monkeypatch.setenv("SMCT_ADAPT_MEAN", "false")
    monkeypatch.setenv("SMCT_ADAPT_SEASON", "false")
    monkeypatch.setenv("SMCT_ADAPT_TREND", "false")
    monkeypatch.setenv("SMCT_ADAPT_BOUND", "false")
    monkeypatch.setenv("SMCT_ADAPT_REVERT", "false")
    monkeypatch.setenv("SMCT_ADAPT_GAMMA", "0.05")
    adapt = Settings().adaptation
    assert (
        adapt.spread, adapt.coverage, adapt.mean, adapt.season, adapt.trend, adapt.bound,
        adapt.revert, adapt.gamma,
    ) == (False, False, False, False, False, False, False, 0.05)
    off = Runtime.load(runtime.artifact.path, backend="torch", device="cpu", adapt=adapt)
    client = make_client(runtime_override=off)
    put(client, runtime)
    t = client.get("/v1/series/s1").json()["seq"]
    for i in range(4):
        assert observe(client, t + i, 25.0).status_code == 200
    shown = _adaptation(client)
    assert shown == {
        "spread": False, "coverage": False, "spread_factor": [], "issued_levels": {},
        "mean": False, "mean_correction": [], "mean_weight": [], "season": False,
        "seasonal_profile": [],
        "trend": [], "marginal": [],
    }


def test_the_series_law_in_metadata(client: TestClient) -> None:
    """A series shows its own law: the weighted mean and sd of its values after the first (the
    first fills the window the filter starts from), the values they count (white noise: no
    season, no trend), their smoothed level and last value, the weight of reverting and of the
    mean in its anchor, from their odds, and the persistence of its deviations from the level
    and from the mean; an observation adds one value."""
    import numpy as np

    from model.series import marginal
    from model.series.trend import fit

    values = (11.0 + np.random.default_rng(0).standard_normal(60)).tolist()
    assert client.put("/v1/series/s1", json={"values": values}).status_code == 201
    own = marginal.Marginal.zeros((1, 1))
    for v in values[1:]:
        own = marginal.update(own, np.array([[v]]), np.array([True]))
    (law,) = _adaptation(client)["marginal"]
    assert law["mean"] == pytest.approx(own.mean[0, 0], rel=1e-6)  # the scaled values: float32
    assert law["sd"] == pytest.approx(np.sqrt(own.var[0, 0]), abs=1e-6)
    assert law["values"] == pytest.approx(own.weight[0, 0], abs=1e-3)
    assert law["level"] == pytest.approx(own.level[0, 0], rel=1e-6)
    assert law["last"] == pytest.approx(values[-1], rel=1e-6)
    assert law["reverting"] > 0.5  # white noise: its mean forecasts it better than the model
    # white noise: its deviations from the level do not persist
    assert law["persistence"] == pytest.approx(marginal.persistence(own)[0, 0], abs=1e-6)
    assert law["persistence"] < 0.3 and 0.0 < law["mean_weight"] < 1.0
    # and from its mean
    phi_m = marginal.persistence(own, "mean")[0, 0]
    assert law["mean_persistence"] == pytest.approx(phi_m, abs=1e-6)
    assert law["mean_persistence"] < 0.3
    # its level's alpha, fitted on its history as the trend's fit does (white noise: a slow one)
    assert law["level_alpha"] == pytest.approx(fit(np.array(values)[:, None]).alpha[0])
    assert law["level_alpha"] <= 0.2
    # the growth of its own forecasts' errors over its history (white noise: flat), the floor's
    growth = fit(np.array(values)[:, None]).flat_errors[0]
    errors = growth[0] * np.r_[1.0, growth[1:]]
    for h, e in zip((1, 2, 3, 6, 12, 24), errors, strict=True):
        assert law[f"error_{h}"] == pytest.approx(e, rel=1e-5)
    assert law["error_12"] < 1.3 * law["error_1"]
    assert observe(client, 60, 11.0).status_code == 200
    (after,) = _adaptation(client)["marginal"]
    assert after["values"] == pytest.approx(marginal.FORGET * law["values"] + 1.0, abs=2e-3)
    samples = scrape(client)
    assert value(samples, "smct_reverting_weight_count") == 2  # the create and the update
    assert value(samples, "smct_reverting_weight_bucket", le="0.5") == 0


def test_the_correction_of_the_mean_in_metadata_and_metrics(make_client: Any) -> None:
    """The default model (lag inputs) corrects each series' mean: the metadata shows its five
    coefficients, which a trend moves away from 0, and /metrics one observation per term and
    write."""
    from pathlib import Path

    from model.runtime.runtime import Runtime
    from model.series.mean import MEAN_TERMS

    default = Runtime.load(Path("artifacts/default"), backend="torch", device="cpu")
    client = make_client(runtime_override=default)
    trend = [round(10.0 + 0.8 * i + (i % 3) * 0.1, 6) for i in range(60)]
    assert client.put("/v1/series/s1", json={"values": trend}).status_code == 201
    for i in range(3):
        assert observe(client, 60 + i, 10.0 + 0.8 * (60 + i)).status_code == 200
    shown = _adaptation(client)
    assert shown["mean"] is True and len(shown["mean_correction"]) == 1
    terms = shown["mean_correction"][0]
    assert list(terms) == list(MEAN_TERMS) and any(abs(c) > 1e-3 for c in terms.values())
    # a line the model as trained lags: its own correction is the likelier model
    (weight,) = shown["mean_weight"]
    assert 0.5 < weight <= 1.0
    samples = scrape(client)
    for term in MEAN_TERMS:
        assert value(samples, "smct_mean_correction_count", term=term) == 4  # create + 3
    assert value(samples, "smct_mean_weight_count") == 4
    assert value(samples, "smct_mean_weight_bucket", le="0.5") == 0  # each write above 0.5


def test_the_seasonal_profile_in_metadata(make_client: Any) -> None:
    """A series created with a season shows its profile: one index per phase, the pattern of
    its history (a clear period-4 pattern over 15 seasons)."""
    from pathlib import Path

    from model.runtime.runtime import Runtime

    default = Runtime.load(Path("artifacts/default"), backend="torch", device="cpu")
    client = make_client(runtime_override=default)
    pattern = [3.0, -1.0, 0.5, -2.5]
    values = [20.0 + pattern[i % 4] + 0.01 * (i % 7) for i in range(60)]
    body = {"values": values, "season_length": 4}
    assert client.put("/v1/series/s1", json=body).status_code == 201
    shown = _adaptation(client)
    assert shown["season"] is True and len(shown["seasonal_profile"]) == 1
    profile = shown["seasonal_profile"][0]
    assert len(profile) == 4
    assert max(abs(p - q) for p, q in zip(profile, pattern, strict=True)) < 0.1
