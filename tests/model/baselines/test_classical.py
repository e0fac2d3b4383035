"""Local AutoETS reference (statsmodels)."""

from __future__ import annotations

import numpy as np

from model.baselines.classical import ETSForecaster, fit_ets


def test_auto_ets_picks_the_damped_trend_for_a_trending_series() -> None:
    rng = np.random.default_rng(0)
    trend = 0.5 * np.arange(40) + 0.1 * rng.standard_normal(40)
    level = rng.standard_normal(40) * 0.3
    assert fit_ets(trend).model.trend == "add"
    assert fit_ets(level).model.trend is None


def test_intervals_cover_a_random_walk() -> None:
    rng = np.random.default_rng(1)
    x = np.cumsum(rng.standard_normal((20, 30, 1)), axis=1)  # 20 random walks
    f = ETSForecaster(d_out=1, history=20)
    m = f.sample_multistep(x, 20, 200, seed=0)
    assert m.shape == (20, 10, 1, 200)
    assert f.sample_unistep(x[:2], 7).shape == (2, 29, 1, 7)
    lo, hi = np.quantile(m, [0.025, 0.975], axis=-1)
    cover = ((lo <= x[:, 20:]) & (x[:, 20:] <= hi)).mean()
    # 95 % intervals fitted on 20 points, 200 scored points; parameter uncertainty is
    # not in the intervals: tolerance 0.7
    assert 0.7 < cover <= 1.0


def test_constant_windows_fall_back_without_error() -> None:
    x = np.zeros((2, 10, 1))
    f = ETSForecaster(d_out=1, history=5)
    assert np.isfinite(f.sample_unistep(x, 5)).all()
    assert np.isfinite(f.sample_multistep(x, 5, 5)).all()
