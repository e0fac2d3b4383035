"""The runtime's numbers as the API renders them (service/outputs.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from model.runtime.rollout.forecaster import Forecast
from model.series import marginal
from model.series.adaptation import AdaptConfig
from service.inputs import ForecastParams
from service.outputs import adaptation_of, answer_bytes, series_forecast, significant
from service.schemas.forecasts import SeriesForecast
from service.schemas.series import SeriesAdaptation


def _formatted(a: np.ndarray, digits: int) -> np.ndarray:
    """What the API rendered before it rounded in arrays: each number formatted and read."""
    return np.vectorize(lambda v: float(f"{v:.{digits}g}"), otypes=[np.float64])(a)


@pytest.mark.parametrize("digits", [1, 2, 3, 6])
def test_significant_digits_are_the_formatted_numbers(digits: int) -> None:
    """Rounded in array arithmetic, every number is the one formatting to `digits`
    significant digits gives, bit for bit: numbers of every size from 1e-30 to 1e30, decimals
    that lie on a tie (0.125, 0.145, 2.5, 99.5, ...), zeros, subnormals, the largest float
    and the non-finite."""
    rng = np.random.default_rng(digits)
    spread = rng.standard_normal(50_000) * 10.0 ** rng.uniform(-30, 30, 50_000)
    ties = np.round(rng.uniform(0, 1000, 20_000)) / 1000  # 3 decimals: many ties at 1, 2 digits
    edges = [0.0, -0.0, 0.125, -0.0125, 2.5, 3.5, 0.145, 99.5, 995.0, 9.95, 1e22, 1e23, 5e-324,
             1e-320, 1.7976931348623157e308, np.nan, np.inf, -np.inf]
    a = np.concatenate([spread, ties, edges])
    got, want = significant(a, digits), _formatted(a, digits)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))
    small = np.concatenate([edges, spread[:12], ties[:6]]).reshape(4, 9)  # formatted whole
    assert np.array_equal(significant(small, digits), _formatted(small, digits), equal_nan=True)
    assert significant(small, digits).shape == (4, 9)


def test_a_forecast_renders_its_bounds_and_errors_by_level() -> None:
    """Two levels, two targets: each level's bounds and their errors (to 2 significant
    digits) where they belong, a non-finite number as null."""
    h = 3
    mean = np.arange(2 * h, dtype=np.float64).reshape(h, 2)
    lo = {lv: mean - k for k, lv in enumerate((0.8, 0.95), start=1)}
    se = {lv: np.full((h, 2), 0.012345 * k) for k, lv in enumerate((0.8, 0.95), start=1)}
    se[0.95][0, 0] = np.nan
    f = Forecast(
        mean=mean, median=mean,
        intervals={lv: (lo[lv], 2 * mean - lo[lv]) for lv in lo},
        errors={lv: (se[lv], se[lv] * 2) for lv in se},
    )
    params = ForecastParams(horizon=h, levels=(80.0, 95.0), n_samples=10, return_samples=False)
    out = series_forecast("s", f, params)
    assert out["intervals"]["80"]["lo"] == lo[0.8].tolist()
    assert out["intervals"]["95"]["hi"] == (2 * mean - lo[0.95]).tolist()
    assert out["intervals"]["80"]["lo_se"] == [[0.012, 0.012]] * h
    assert out["intervals"]["80"]["hi_se"] == [[0.025, 0.025]] * h
    assert out["intervals"]["95"]["lo_se"] == [[None, 0.025], [0.025, 0.025], [0.025, 0.025]]
    # the schema's own dict: it validates, and FastAPI would write the same bytes
    schema = SeriesForecast.model_validate(out)
    assert answer_bytes(out) == schema.model_dump_json().encode()
    assert list(out) == ["id", "mean", "median", "intervals"]  # no samples: none asked for


@pytest.mark.parametrize("flags", [{}, {"spread": False, "season": False, "trend": False},
                                   {"bound": False, "revert": False, "mean": False}])
def test_the_adaptation_report_is_the_schemas_own_dict(
    runtime: Any, flags: dict[str, bool]
) -> None:
    """The report stored with each write is the dict SeriesAdaptation validates to, field for
    field and in its order, for a series with a season, a trend and every correction learned
    (and with some of them off)."""
    rng = np.random.default_rng(3)
    t = np.arange(150)
    history = 20 + 0.05 * t + 3 * np.sin(2 * np.pi * t / 12) + rng.standard_normal(150)
    (state,) = runtime.create([history[:, None]], levels=[0.8, 0.95], seasons=[12])
    (state, _), = runtime.update([state], [history[-20:, None] + 1.0], [0.8, 0.95])
    report = adaptation_of(state, replace(AdaptConfig(), **flags))
    assert list(report) == list(SeriesAdaptation.model_fields)
    assert SeriesAdaptation(**report).model_dump() == report
    assert report["season"] == flags.get("season", True) and report["issued_levels"]
    assert bool(report["seasonal_profile"]) == flags.get("season", True)
    assert bool(report["marginal"]) == (flags.get("bound", True) or flags.get("revert", True))
    own = marginal.Marginal.of(state.marginal)
    phis = zip(marginal.persistence(own).tolist(), marginal.persistence(own, "mean").tolist(),
               strict=True)
    want = [(round(phi, 6), round(phi_m, 6)) for phi, phi_m in phis] if report["marginal"] else []
    assert [(law["persistence"], law["mean_persistence"]) for law in report["marginal"]] == want
