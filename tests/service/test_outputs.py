"""The runtime's numbers as the API renders them (service/outputs.py)."""

from __future__ import annotations

import numpy as np
import pytest

from model.runtime.forecasting import Forecast
from service.inputs import ForecastParams
from service.outputs import series_forecast, significant


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
    assert out.intervals["80"].lo == lo[0.8].tolist()
    assert out.intervals["95"].hi == (2 * mean - lo[0.95]).tolist()
    assert out.intervals["80"].lo_se == [[0.012, 0.012]] * h
    assert out.intervals["80"].hi_se == [[0.025, 0.025]] * h
    assert out.intervals["95"].lo_se == [[None, 0.025], [0.025, 0.025], [0.025, 0.025]]
