"""Each series' damped trend (model/series/trend.py) against answers known in closed form or by
construction: the fit on generated histories, the carried sum, and forecasts that follow a
line, flatten as phi says, and add no drift to a random walk."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from model.runtime.runtime import Runtime
from model.series.adaptation import OFF
from model.series.state import SeriesState
from model.series.trend import PathTrend, Trend, _fit_starts, _run, fit

DEFAULT = Path(__file__).resolve().parents[3] / "artifacts" / "default"


def test_a_line_is_found_and_noise_or_a_walk_is_not() -> None:
    """0.5 t + N(0, 1): a trend, undamped or nearly (phi >= 0.95), its slope within 0.1 of 0.5
    and its sum within 3 of the line's rise; white noise and random walks get none in at
    least 18 of 20 seeded histories (the BIC's penalty: about 1 in 20 or fewer)."""
    t = np.arange(300.0)
    for seed in range(3):
        y = 0.5 * t + np.random.default_rng(seed).normal(size=300)
        trend, sums, *_ = fit(y[:, None])
        phi, _, slope, total = trend[0].tolist()
        assert phi >= 0.95 and abs(slope - 0.5) < 0.1, trend
        assert sums.shape == (300, 1) and sums[0, 0] == 0.0 and total == sums[-1, 0]
        assert abs(total - 0.5 * 299) < 0.5 * 299 * 0.5  # most of the rise is the trend's
    rng = np.random.default_rng(5)
    for walk in (False, True):
        found = 0
        for _ in range(20):
            x = rng.normal(size=300)
            found += bool(fit((np.cumsum(x) if walk else x)[:, None]).trend["phi"][0])
        assert found <= 2, (walk, found)


def test_the_first_level_and_slope_are_those_of_least_squares() -> None:
    """At each grid point the closed-form (l_0, b_0) give the recursion's smallest sum of
    squared errors: equal to the errors run from them, and below those from any nearby start
    (a missing value among them); without a trend (phi = 0) b_0 is 0."""
    rng = np.random.default_rng(7)
    y = 3.0 + 0.2 * np.arange(60.0) + rng.normal(size=60)
    y[10] = np.nan
    grid = np.array([[0.3, 0.03, 0.9], [0.5, 0.05, 1.0], [0.2, 0.0, 0.0]])
    l0, b0, sse, sse_ar = _fit_starts(y, grid)
    assert b0[2] == 0.0
    for g in range(len(grid)):
        def cost(level: float, slope: float, g: int = g) -> float:
            errors = _run(y, grid[g : g + 1], np.array([slope]), level=level)[0]
            return float((errors**2).sum())

        assert cost(l0[g], b0[g]) == pytest.approx(sse[g], rel=1e-9)
        # with AR(1) errors: the squares of e_t - rho e_{t-1}, rho = sum e_t e_{t-1} / e_{t-1}^2
        # over the pairs of observed values (y[10] is missing: e_9 is 0, e_10 counts alone)
        e = _run(y, grid[g : g + 1], np.array([b0[g]]), level=l0[g])[0][:, 0]
        pairs = [t for t in range(1, len(e)) if t not in (9, 10)]
        rho = np.clip(sum(e[t] * e[t - 1] for t in pairs) / sum(e[t - 1] ** 2 for t in pairs),
                      0.0, 0.95)
        expected = e[0] ** 2 + sum((e[t] - rho * e[t - 1]) ** 2 for t in pairs) + e[10] ** 2
        assert sse_ar[g] == pytest.approx(expected + e[9] ** 2)
        assert sse_ar[g] <= sse[g]
        for dl, db in ((0.1, 0.0), (-0.1, 0.0), (0.0, 0.02), (0.0, -0.02), (0.1, -0.02)):
            if grid[g, 2] == 0.0 and db:
                continue
            assert cost(l0[g] + dl, b0[g] + db) > sse[g]


def test_a_weak_line_is_found() -> None:
    """50 + 0.05 t + N(0, 1) over 320 steps (16 noise sds of rise): a trend in at least 18 of
    20 seeded histories, its slope within 0.02 of 0.05 (the first slope drawn from the first
    four steps found it in about one history of four)."""
    found = 0
    for seed in range(20):
        y = 50.0 + 0.05 * np.arange(320.0) + np.random.default_rng(seed).normal(size=320)
        trend = fit(y[:, None]).trend[0]
        found += trend["phi"] > 0 and abs(trend["slope"] - 0.05) < 0.02
    assert found >= 18, found


def test_a_line_under_persistent_noise_is_found() -> None:
    """A level, a line and AR(1) noise of coefficient 0.5 (sd 4 % of the level; the line rises
    0.1-0.7 % a month, 168 months): a local level that follows the noise (alpha 0.5-0.7) erred
    less one step ahead than the line with white errors and took the place of the trend in 7
    of 8 histories (those rising 0.3 % or more); with the errors' persistence in the fit and a
    fixed slope in its grid the line is kept, its level moving little (alpha <= 0.1) and its
    slope within 0.05 % of the level a month of the true one (4 standard errors of a line's
    slope fitted under that noise), in at least 18 of 20 seeded histories."""
    rng = np.random.default_rng(1)
    t = np.arange(168.0)
    found = 0
    for _ in range(20):
        level, rise = rng.uniform(50, 500), rng.uniform(0.001, 0.007)
        noise = np.zeros(len(t))
        for i in range(1, len(t)):
            noise[i] = 0.5 * noise[i - 1] + rng.normal(0.0, 0.04 * level)
        fitted = fit((level * (1.0 + rise * t) + noise)[:, None])
        phi, _, slope, _ = fitted.trend[0].tolist()
        found += bool(phi > 0 and fitted.alpha[0] <= 0.1 and abs(slope / level - rise) < 5e-4)
    assert found >= 18, found


def test_growth_that_stopped_is_not_carried_on_as_a_line() -> None:
    """0.05 t for 200 steps, then flat for 100, under unit noise: a line fitted on the whole
    history fits its one-step errors (AR(1) errors take the bend) and, checked in sample, had
    forecast well from values it was fitted on (a line in 89 of 100 histories, slope 0.034);
    checked out of sample, from the first two thirds, no line is kept and the slope carried is
    under 0.01 in at least 19 of 20 seeded histories."""
    t = np.arange(300.0)
    flat = 0
    for seed in range(20):
        y = np.where(t < 200, 0.05 * t, 10.0) + np.random.default_rng(seed).normal(size=300)
        phi, beta, slope, _ = fit(y[:, None]).trend[0].tolist()
        line = phi == 1.0 and beta == 0.0
        flat += bool(not line and abs(slope) < 0.01)
    assert flat >= 19, flat


def test_the_sum_carried_ahead_is_the_damped_series() -> None:
    """c_{t+h} = c_t + b (phi + ... + phi^h); phi = 1 is the straight line c_t + b h; a path's
    slope moves by beta times its innovation."""
    phi = np.array([[0.8], [1.0]])  # (B=2, O=1)
    packed = Trend(phi, np.full_like(phi, 0.1), np.full_like(phi, 2.0), np.full_like(phi, 5.0)
                   ).record()
    ahead = Trend.of(packed).ahead(np.array([[1, 2, 10], [1, 2, 10]]))
    geometric = [sum(0.8**j for j in range(1, h + 1)) for h in (1, 2, 10)]
    np.testing.assert_allclose(ahead[0, :, 0], 5.0 + 2.0 * np.array(geometric))
    np.testing.assert_allclose(ahead[1, :, 0], 5.0 + 2.0 * np.array([1, 2, 10]))
    paths = PathTrend(packed, 3)
    first = paths.step(np.array([[[1.0], [0.0], [-1.0]]] * 2))
    np.testing.assert_allclose(first[0, :, 0], 5.0 + 0.8 * 2.0)
    np.testing.assert_allclose(paths.slope[0, :, 0], 0.8 * 2.0 + 0.1 * np.array([1, 0, -1]))


@pytest.fixture(scope="module")
def default() -> Runtime:
    return Runtime.load(DEFAULT)


def test_a_linear_trend_is_forecast_along_its_line(default: Runtime) -> None:
    """0.5 t + N(0, 1) over 200 steps, then 40 more through online updates: the median of the
    24-step forecast stays within 1 + 0.1 h of the true line at steps h = 1, 6, 12 and 24 (it
    stayed flat: 12 below the line at step 24). The slope moves online by beta (about 0.006)
    times each unit error, a random walk of about 0.04 over 40 steps, 1 at step 24: the
    tolerance is three of those, and one noise standard deviation for the level."""
    t = np.arange(240.0)
    for seed in range(2):
        y = 0.5 * t + np.random.default_rng(seed).normal(size=240)
        (state,) = default.create([y[:200, None]], seeds=[1])
        assert state.trend.shape == (1,) and Trend.of(state.trend).phi[0] > 0
        ((state, _),) = default.update([state], [y[200:, None]], [0.8])
        (f,) = default.forecast([state], 24, [0.8], 1000, seed=1)
        steps = np.array([1, 6, 12, 24])
        error = f.median[steps - 1, 0] - 0.5 * (239 + steps)
        assert np.all(np.abs(error) < 1.0 + 0.1 * steps), error
        assert SeriesState.from_bytes(state.to_bytes()) == state


def test_a_damped_trend_flattens_as_its_phi_says(default: Runtime) -> None:
    """A state given the trend phi 0.9, beta 0, slope 1 on a walk's history, with every other
    correction off: the median rises by 0.9 + ... + 0.9^h over the median without it (the
    paths are the same draws), to 1e-6."""
    runtime = Runtime.load(DEFAULT, adapt=replace(OFF, trend=True))
    y = np.cumsum(np.random.default_rng(0).normal(size=200))
    (plain,) = runtime.create([y[:, None]], seeds=[1])
    trended = replace(plain, trend=Trend(*np.array([[0.9], [0.0], [1.0], [0.0]])).record())
    (a, b) = runtime.forecast([plain, trended], 24, [0.8], 500, seed=1)
    rise = np.cumsum(0.9 ** np.arange(1, 25))
    np.testing.assert_allclose(b.median[:, 0] - a.median[:, 0], rise, atol=1e-6)


def test_a_random_walk_gets_no_drift(default: Runtime) -> None:
    """Random walks of 300 unit steps: the 24-step median stays within half a standard
    deviation of that step (0.5 sqrt(24)) of the last value, in at least 9 of 10 seeds."""
    near = 0
    for seed in range(10):
        y = np.cumsum(np.random.default_rng(100 + seed).normal(size=300))
        (f,) = default.forecast_history([y[:, None]], 24, [0.8], 500, seed=1)
        near += abs(float(f.median[-1, 0]) - y[-1]) < 0.5 * np.sqrt(24)
    assert near >= 9, near
