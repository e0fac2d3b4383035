"""Missing values at the end of a series (model/series/gaps.py) and a large level
(model/series/scaling.py), against answers known in closed form.

A random-walk model (skip 1, readout 0, Sigma_obs 1, global identity scaling) forecasts
X_{t+h} ~ N(X_t, h): after k missing values its next 80 % interval is 2 z_0.9 sqrt(k + 1)
wide. 2,000 paths estimate an 80 % width within about 3 % (Monte Carlo), so 15 % is the
mechanism's tolerance, not the sampling's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from model.runtime.runtime import Runtime
from model.series.adaptation import OFF
from model.series.gaps import MAX_PENDING
from model.series.state import SeriesState

Z80 = 1.2815515655446004  # the 0.9 quantile of N(0, 1)
DEFAULT = Path(__file__).resolve().parents[3] / "artifacts" / "default"


@pytest.fixture(scope="module")
def random_walk_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from model.artifacts.export import export_artifact
    from model.network.config import ModelConfig
    from model.network.smc_transformer import random_walk

    model = random_walk(ModelConfig(d_model=4, window=8, head="linear", skip=True), sigma_obs=1.0)
    out = tmp_path_factory.mktemp("random-walk") / "a"
    export_artifact(
        model, out, particles=10, scaling={"mode": "global", "loc": [0.0], "scale": [1.0]},
        features={"inputs": ["x"], "targets": ["x"]},
    )
    return out


@pytest.fixture(scope="module", params=["torch", "onnx"])
def random_walk(random_walk_artifact: Path, request: pytest.FixtureRequest) -> Runtime:
    return Runtime.load(random_walk_artifact, backend=request.param, adapt=OFF)


def _width(f: object, h: int = 0) -> float:
    lo, hi = f.intervals[0.8]  # type: ignore[attr-defined]
    return float(hi[h, 0] - lo[h, 0])


def _walk(n: int = 300, seed: int = 0) -> np.ndarray:
    return np.cumsum(np.random.default_rng(seed).standard_normal(n))


@pytest.mark.parametrize("k", [0, 4, 16])
def test_missing_values_at_the_end_widen_the_intervals_as_the_gap_does(
    random_walk: Runtime, k: int
) -> None:
    """A history ending in k missing values gets the width of k + 1 steps, stateless and
    online, and its median stays at the last value (it shrank to one step's width: the filter
    filled every particle with the same predictive mean)."""
    walk = _walk()
    oracle = 2 * Z80 * np.sqrt(k + 1)
    history = np.r_[walk, np.full(k, np.nan)][:, None]
    (stateless,) = random_walk.forecast_history([history], 1, [0.8], 2000, seed=1)
    assert abs(_width(stateless) / oracle - 1) < 0.15, (_width(stateless), oracle)
    assert abs(float(stateless.median[0, 0]) - walk[-1]) < 0.15 * np.sqrt(k + 1)
    (state,) = random_walk.create([walk[:, None]], seeds=[3])
    ((state, results),) = random_walk.update([state], [np.full((k, 1), np.nan)], [0.8])
    assert state.pending == k and state.seq == 300 + k
    for j, r in enumerate(results):  # the law issued for each missing value: j + 1 steps
        lo, hi = r.intervals[0.8]
        assert r.value is None and r.covered is None and r.seq == 300 + j
        assert abs(float(hi[0] - lo[0]) / (2 * Z80 * np.sqrt(j + 1)) - 1) < 0.15
    (online,) = random_walk.forecast([state], 3, [0.8], 2000, seed=1)
    for h in range(3):
        assert abs(_width(online, h) / (2 * Z80 * np.sqrt(k + h + 1)) - 1) < 0.15


def test_the_value_after_a_gap_filters_it_as_a_history_would(random_walk: Runtime) -> None:
    """Pending steps are filtered when the next value comes: the state equals the one built
    from the whole history, and a round trip through bytes keeps the pending count."""
    walk = _walk(60)
    gap = np.full((5, 1), np.nan)
    (state,) = random_walk.create([walk[:40, None]], seeds=[3])
    ((state, first),) = random_walk.update([state], [np.r_[walk[40:50, None], gap]], [0.8])
    assert state.pending == 5 and len(first) == 15
    assert SeriesState.from_bytes(state.to_bytes()) == state
    ((state, second),) = random_walk.update([state], [walk[50:52, None]], [0.8])
    assert state.pending == 0 and state.t == 57 and [r.seq for r in second] == [55, 56]
    whole = np.r_[walk[:50, None], gap, walk[50:52, None]]
    (direct,) = random_walk.create([whole], seeds=[3])
    np.testing.assert_array_equal(direct.logw, state.logw)
    np.testing.assert_array_equal(direct.x_hist, state.x_hist)


def test_pending_steps_are_in_the_bytes_only_where_there_are_some(random_walk: Runtime) -> None:
    """A state with nothing pending writes no section for it (model/series/state_format.py);
    one with pending steps keeps them through its bytes, and at most MAX_PENDING stay pending."""
    import dataclasses

    from model.series.state import SeriesState

    (gapped,) = random_walk.create([np.r_[_walk(40)[:, None], np.full((200, 1), np.nan)]],
                                   seeds=[3])
    assert gapped.pending == MAX_PENDING and gapped.seq == 240
    assert SeriesState.from_bytes(gapped.to_bytes()) == gapped
    none = dataclasses.replace(gapped, pending=0)
    assert len(none.to_bytes()) == len(gapped.to_bytes()) - 5  # tag, dtype, ndim, u16


@pytest.fixture(scope="module")
def default() -> Runtime:
    return Runtime.load(DEFAULT)


def test_a_seasonal_series_with_gaps_is_not_forecast_away_from_its_data(default: Runtime) -> None:
    """Weekly CO2 readings (statsmodels' co2: 320 weeks, 42 missing, the last 16 in a row) with
    the season the service detects (5): the forecast ran to 451, 480, 516 from a last value
    of 319.8 (the correction of the mean, applied whole at every imputed step, fed its own
    output back). It stays within the last year's range, give or take 2 ppm."""
    import statsmodels.api as sm

    from timeseries.seasons import detect_season

    co2 = sm.datasets.co2.load_pandas().data.co2.to_numpy()[:320]
    season = detect_season(co2, default.max_season)
    year = co2[-68:-16][np.isfinite(co2[-68:-16])]
    for m in (season, 52 if default.max_season >= 52 else 0, 0):
        (f,) = default.forecast_history([co2[:, None]], 12, [0.8], 1000, seed=1, seasons=[m])
        median = f.median[:, 0]
        assert year.min() - 2 < median.min() and median.max() < year.max() + 2, (m, median)
        lo, hi = f.intervals[0.8]
        assert np.all(hi[:, 0] - lo[:, 0] < 20), (m, hi - lo)


@pytest.mark.parametrize("offset", [1e3, 1e6, 1e9])
def test_a_large_level_does_not_swamp_the_variation(default: Runtime, offset: float) -> None:
    """An AR(1) with unit noise moved to a level of 1e3, 1e6 or 1e9 is forecast as at level 0:
    the same one-step interval (its window's spread of about 1 had been taken for float32
    rounding of the level, and the series scaled by 1 % of it: intervals 460 times too
    wide), within 1.3 times the true width 2 z_0.9 of N(0, 1) and above 0.6 of it (one
    forecast's width follows the spread correction's last ten or so errors: 0.65 to 1.13 of the
    true width over seeds 0 to 5 of this series)."""
    rng = np.random.default_rng(0)
    e = rng.standard_normal(400)
    x = np.zeros(400)
    for t in range(1, 400):
        x[t] = 0.6 * x[t - 1] + e[t]
    x = x[100:]
    widths = []
    for level in (0.0, offset):
        (state,) = default.create([(x + level)[:, None]], seeds=[7], levels=[0.8])
        (f,) = default.forecast([state], 1, [0.8], 4000, seed=1)
        widths.append(_width(f))
        assert abs(float(f.median[0, 0]) - level - x[-1] * 0.6) < 1.0
    assert abs(widths[1] / widths[0] - 1) < 1e-3, widths
    assert 0.6 < widths[1] / (2 * Z80) < 1.3, widths


@pytest.mark.parametrize(("k", "batched"), [(1, True), (4, False), (8, False), (8, True)])
def test_the_value_after_an_online_gap_is_issued_the_law_of_the_gap(
    random_walk_artifact: Path, k: int, batched: bool
) -> None:
    """A unit random walk posted online with gaps of k nulls (one request each, or the nulls
    and the next value in one): the 80 % interval issued for the value after each gap is that
    of k + 1 steps (2 z sqrt(k + 1) wide, within 0.8-1.25 on average and 0.7-1.4 each: 500
    paths' Monte Carlo error), and covers it on 0.8 of 200 gaps within 0.05 (binomial sd
    0.028)."""
    rt = Runtime.load(random_walk_artifact, backend="torch", adapt=OFF)
    rng = np.random.default_rng(k + 10 * batched)
    history = np.cumsum(rng.standard_normal(60))
    (state,) = rt.create([history[:, None]], seeds=[5])
    walk = float(history[-1])
    widths, covered = [], []
    oracle = 2 * Z80 * np.sqrt(k + 1)
    for _ in range(200):
        walk += rng.standard_normal()
        ((state, _),) = rt.update([state], [np.array([[walk]])], [0.8])
        walk += float(rng.standard_normal(k + 1).sum())  # k unseen steps, then the next
        nulls = np.full((k, 1), np.nan)
        if batched:
            ((state, res),) = rt.update([state], [np.r_[nulls, [[walk]]]], [0.8])
        else:
            for j in range(k):
                ((state, res),) = rt.update([state], [nulls[j : j + 1]], [0.8])
            ((state, res),) = rt.update([state], [np.array([[walk]])], [0.8])
        after = res[-1]
        assert after.value is not None and after.covered is not None
        lo, hi = after.intervals[0.8]
        widths.append(float(hi[0] - lo[0]) / oracle)
        covered.append(after.covered[0.8])
    assert 0.8 <= np.mean(widths) <= 1.25, np.mean(widths)
    assert 0.7 <= min(widths) and max(widths) <= 1.4, (min(widths), max(widths))
    assert abs(np.mean(covered) - 0.8) <= 0.05, np.mean(covered)
