"""The model's horizon growth (model/series/spread.horizon_factors, an artifact's calibration):
the factor's formula, the artifact's record read and checked, and in the runtime a random-walk
model whose paths, grown by h^g, keep their means and their first step and are spread about
their means by exactly h^g at step h."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from model.artifacts.artifact import Artifact, ArtifactError, write_calibration
from model.runtime.runtime import Runtime
from model.series.adaptation import AdaptConfig
from model.series.spread import horizon_factors, series_growth
from tests.model.conftest import naive_lag_model, variant

H = 12
FREE = AdaptConfig(bound=False, trend=False, mean=False, revert=False)  # no bound on the spread


@pytest.fixture(scope="module")
def walk_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return naive_lag_model(tmp_path_factory.mktemp("horizon") / "walk", sigma_obs=1.0)


def test_the_factor_is_the_one_step_factors_root_times_h_to_the_growth() -> None:
    factor = np.array([[4.0], [0.25]])
    h = np.arange(1, 7, dtype=np.float64)
    np.testing.assert_allclose(horizon_factors(factor, 6, 0.3)[:, :, 0],
                               factor ** (1.0 / h)[None] * h[None] ** 0.3, rtol=1e-12)
    np.testing.assert_array_equal(horizon_factors(factor, 6), horizon_factors(factor, 6, 0.0))
    np.testing.assert_allclose(horizon_factors(factor, 6)[:, :, 0], factor ** (1.0 / h)[None])
    each = horizon_factors(factor, 6, np.array([0.3, 0.0]))  # a growth per series
    np.testing.assert_allclose(each[0, :, 0], 4.0 ** (1.0 / h) * h**0.3, rtol=1e-12)
    np.testing.assert_allclose(each[1, :, 0], 0.25 ** (1.0 / h), rtol=1e-12)


def test_a_series_growth_fades_past_the_record_length() -> None:
    """g up to `length` values seen, g length / t after; never with an infinite length."""
    seen = np.array([0, 10, 50, 100, 400])
    np.testing.assert_allclose(series_growth(0.2, 50.0, seen), [0.2, 0.2, 0.2, 0.1, 0.025])
    np.testing.assert_array_equal(series_growth(0.2, np.inf, seen), np.full(5, 0.2))
    np.testing.assert_array_equal(series_growth(0.0, 50.0, seen), np.zeros(5))


def test_an_artifact_holds_its_growth_and_refuses_one_out_of_range(
    walk_model: Path, tmp_path: Path
) -> None:
    """None recorded: 0, never fading. Written by write_calibration: read back, the model id as
    it was. A growth outside [0, 1] or not a number, a length not a positive number: refused at
    open."""
    plain = Artifact.open(walk_model)
    assert plain.horizon_growth == 0.0 and plain.growth_length == np.inf
    copy = variant(walk_model, tmp_path / "calibrated")
    write_calibration(copy, {"horizon_growth": 0.25, "growth_length": 60, "fitted_on": "test"})
    opened = Artifact.open(copy)
    assert opened.horizon_growth == 0.25 and opened.model_id == plain.model_id
    forecaster = Runtime.load(copy, backend="torch").forecaster
    assert (forecaster.growth, forecaster.growth_length) == (0.25, 60.0)
    for wrong in (1.5, -0.1, "0.2", None, True):
        bad = variant(walk_model, tmp_path / f"bad-{wrong}", calibration={"horizon_growth": wrong})
        with pytest.raises(ArtifactError, match="horizon_growth"):
            Artifact.open(bad)
    for wrong in (0, -5, "50", None):
        bad = variant(walk_model, tmp_path / f"bad-length-{wrong}",
                      calibration={"horizon_growth": 0.2, "growth_length": wrong})
        with pytest.raises(ArtifactError, match="growth_length"):
            Artifact.open(bad)
    assert json.loads((copy / "manifest.json").read_text())["calibration"]["fitted_on"] == "test"


def test_grown_paths_spread_by_h_to_the_growth_about_the_same_means(walk_model: Path) -> None:
    """A walk's paths with the growth 0.3 fading past 30 values against the same paths without
    it (same seeds): the first step's values and every step's mean unchanged, each path's
    distance from its step's mean times h^g, g = 0.3 min(1, 30 / t) for a history of t values
    (0.3, 0.15, 0.075), to rounding."""
    rt = Runtime.load(walk_model, backend="torch", adapt=FREE)
    rng = np.random.default_rng(0)
    lengths = np.array([30, 60, 120])
    states = rt.create([np.cumsum(rng.standard_normal(n))[:, None] for n in lengths])
    grown = dataclasses.replace(rt.forecaster, growth=0.3, growth_length=30.0)
    plain, wide = (
        np.stack([f.samples[:, :, 0] for f in fc.forecast(states, H, [0.8], 500,
                                                           return_samples=True, seed=1)])
        for fc in (rt.forecaster, grown)
    )  # (S, N, H)
    np.testing.assert_allclose(wide.mean(1), plain.mean(1), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(wide[:, :, 0], plain[:, :, 0], rtol=1e-12)
    growth = 0.3 * np.minimum(1.0, 30.0 / lengths)
    steps = np.arange(1, H + 1)[None, None, :] ** growth[:, None, None]
    np.testing.assert_allclose(wide - wide.mean(1, keepdims=True),
                               (plain - plain.mean(1, keepdims=True)) * steps, rtol=1e-6,
                               atol=1e-9)
