"""The floor of a forecast's spread from each series' own errors over the steps ahead
(model/series/trend.py `error_growth`, model/series/marginal.py `error_floor`): the growth of
the errors on histories of known law against its closed form, the floor against its formula,
and in the runtime a random-walk model of half the walks' noise, whose paths spread too slowly
many steps ahead and the floor holds to the walks' own errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from scipy.special import ndtr

from model.runtime.runtime import Runtime
from model.series import marginal
from model.series.adaptation import OFF, AdaptConfig
from model.series.state import SeriesState
from model.series.trend import ERROR_STEPS, FIT_VALUES, fit
from tests.model.conftest import naive_lag_model

ON = AdaptConfig(mean=False, trend=False, revert=False)  # the bound and the floor alone
STEPS = np.asarray(ERROR_STEPS[1:], np.float64)


@pytest.fixture(scope="module")
def narrow_walk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """X_t = X_{t-1} + N(0, 0.5^2) in scaled units: its paths spread as 0.5 sqrt(h)."""
    return naive_lag_model(tmp_path_factory.mktemp("floor") / "walk", sigma_obs=0.5)


def _ar(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    e, x = rng.standard_normal(n), np.zeros(n)
    for t in range(1, n):
        x[t] = phi * x[t - 1] + e[t]
    return x


def test_the_errors_grow_as_the_law_says() -> None:
    """Over 24 histories of FIT_VALUES (512) values each, the most a fit reads (no trend kept on
    any), the one-step root mean square error e_1 and the ratios e_h / e_1 at steps 2, 3, 6, 12
    and 24 against the true h-step standard deviations over the first: a random walk's sqrt(h)
    (its level's alpha 1), an AR(1)'s sqrt((1 - phi^2h) / (1 - phi^2)) at phi 0.7 (the AR(1)
    about the mean errs less than any level there), white noise's 1. The means over the
    histories within 0.03 of e_1 = 1 and, relative to the ratios, within 0.03 / 0.03 / 0.05 /
    0.08 / 0.12: a walk's h-step errors overlap, so 512 values hold about 512 / h independent
    ones (a root mean square's relative standard error about 1 / sqrt(2 x 512 / h) a history,
    0.03 at step 24 over 24 of them), and in-sample they run a few percent short at long steps
    (-0.05 at step 24 on average over six seeds of this test; -0.10 at the worst)."""
    rng = np.random.default_rng(0)
    n = FIT_VALUES
    laws = {
        "walk": (lambda: np.cumsum(rng.standard_normal(n)), np.sqrt(STEPS)),
        "ar": (lambda: 50.0 + _ar(rng, n, 0.7), np.sqrt((1 - 0.49**STEPS) / (1 - 0.49))),
        "noise": (lambda: 50.0 + rng.standard_normal(n), np.ones(len(STEPS))),
    }
    tolerance = np.array([0.03, 0.03, 0.05, 0.08, 0.12])
    for name, (draw, want) in laws.items():
        fits = [fit(draw()[:, None]) for _ in range(24)]
        assert not any(f.trend["phi"][0] for f in fits), name
        growth = np.stack([f.flat_errors[0] for f in fits])
        np.testing.assert_array_equal(growth, np.stack([f.errors[0] for f in fits]))
        assert abs(growth[:, 0].mean() - 1.0) < 0.03, (name, growth[:, 0])
        assert (np.abs(growth[:, 1:].mean(axis=0) / want - 1.0) < tolerance).all(), (name, growth)


def test_a_step_needs_min_errors_and_a_gap_is_skipped() -> None:
    """A step's root mean square is read from MIN_ERRORS errors or more: a history of 14
    values (errors from its third value on: 11 one step ahead, 10 two, 9 three) keeps e_3 / e_1
    and every later ratio at e_2 / e_1; a history with every other value missing still gives
    finite ratios (the AR(1)'s errors at odd steps have no pairs: left out)."""
    rng = np.random.default_rng(5)
    short = fit(np.cumsum(rng.standard_normal(14))[:, None]).flat_errors[0]
    assert short[0] > 0 and (short[3:] == short[1]).all() and short[2] == short[1]
    gappy = 50.0 + rng.standard_normal(400)
    gappy[1::2] = np.nan
    growth = fit(gappy[:, None]).flat_errors[0]
    assert np.isfinite(growth).all() and growth[0] > 0


def test_too_short_a_history_has_no_growth() -> None:
    """Under 3 START values observed, no fit and no growth (zeros: no floor)."""
    fitted = fit(np.arange(10.0)[:, None])
    assert not fitted.errors.any() and not fitted.flat_errors.any()


def test_the_floor_is_the_geometric_mean_grown_by_the_ratios() -> None:
    """sqrt(e_1 s_1) r_h at the kept steps; between them r interpolated linearly in log h and
    log r; the last step's ratio beyond it; 0 where a series has no growth (e_1 = 0)."""
    growth = np.zeros((2, 1, len(ERROR_STEPS)))
    growth[0, 0] = [4.0, 1.2, 1.5, 2.0, 3.0, 4.0]
    first = np.array([[1.0], [3.0]])
    ahead = np.array([2, 3, 4, 6, 12, 24, 48])
    got = marginal.error_floor(growth, first, ahead)  # (S, B, O)
    base = np.sqrt(4.0 * 1.0)
    between = np.exp(np.log(1.5) + (np.log(2.0) - np.log(1.5)) * np.log(4 / 3) / np.log(2))
    want = base * np.array([1.2, 1.5, between, 2.0, 3.0, 4.0, 4.0])
    np.testing.assert_allclose(got[:, 0, 0], want, rtol=1e-12)
    assert not got[:, 1].any()


def test_paths_under_the_floor_are_widened_to_it() -> None:
    """Paths whose spread (the 10-90 % range as a Gaussian's) is under the floor are scaled
    about their mean to it; those as wide keep theirs; the means do not move."""
    rng = np.random.default_rng(1)
    x = rng.normal(5.0, [[1.0], [3.0]], size=(2, 1000))[..., None]  # (B, N, O)
    floor = np.array([[2.0], [2.0]])
    held = marginal.floored(x, floor)
    np.testing.assert_allclose(marginal.spread(held[:1])[0, 0], 2.0, rtol=1e-12)
    np.testing.assert_array_equal(held[1], x[1])
    np.testing.assert_allclose(held.mean(axis=1), x.mean(axis=1), rtol=1e-12)


def test_the_floor_holds_a_walk_to_its_own_errors(narrow_walk: Path) -> None:
    """A random-walk model whose noise is half the walks' (it is given walks of 400 unit
    steps): one step ahead the series' scaling and spread factor calibrate it, but many steps
    ahead its paths spread too slowly (the factor fades as s^(1/h)): its 80 % intervals at
    step 24 cover about 0.70 of the true law N(last, 24) on average over 100 walks without
    the floor (the state's growth set to 0; under 0.74 asserted). With the floor (the walks'
    own errors: e_1 about 1, e_h / e_1 about sqrt(h)) the mean coverage is within 0.05 of 0.80
    (100 walks: its standard error about 0.01), and the first step is untouched."""
    rng = np.random.default_rng(3)
    walks = [np.cumsum(rng.standard_normal(400)) for _ in range(100)]
    rt = Runtime.load(narrow_walk, backend="torch", adapt=ON)
    states = rt.create([w[:, None] for w in walks], levels=[0.8])
    bare = [dataclasses.replace(s, error_growth=np.zeros_like(s.error_growth)) for s in states]
    last = np.array([w[-1] for w in walks])
    cover = {}
    for name, st in (("floor", states), ("none", bare)):
        fcs = rt.forecast(st, 24, [0.8], 1000, seed=0)
        lo, hi = (np.array([f.intervals[0.8][k][[0, 23], 0] for f in fcs]) for k in (0, 1))
        sd = np.sqrt([1.0, 24.0])
        cover[name] = (ndtr((hi - last[:, None]) / sd) - ndtr((lo - last[:, None]) / sd)).mean(0)
    assert cover["none"][1] < 0.74, cover
    assert abs(cover["floor"][1] - 0.80) < 0.05, cover
    assert cover["floor"][0] == cover["none"][0]
    assert all(SeriesState.from_bytes(s.to_bytes()) == s for s in states)


@pytest.fixture(scope="module")
def level_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """X_t = N(0, 0.5^2) in scaled units, whatever came before (the random walk's network with
    its skip 0): its paths do not spread with the steps ahead."""
    import torch

    from model.artifacts.export import export_artifact
    from model.network.config import ModelConfig
    from model.network.smc_transformer import random_walk

    cfg = ModelConfig(d_model=8, n_heads=2, window=12, d_ff=8, lags=True, skip=True,
                      lag_inputs=True, sigma_init=1e-6, sigma_obs_init=0.5)
    model = random_walk(cfg, 0.5)
    with torch.no_grad():
        model.skip.fill_(0.0)
    out = tmp_path_factory.mktemp("floor") / "level"
    export_artifact(model, out, particles=10, scaling={"mode": "per_series"},
                    features={"inputs": ["x"], "targets": ["x"]}, metrics={}, training={})
    return out


def test_a_young_series_spreads_at_least_as_a_random_walk(level_model: Path) -> None:
    """A model whose paths do not spread, given 15 values (its moments weigh under MIN_WEIGHT:
    the bound does not hold, nor may anyone tell a walk from a level yet): its 80 % intervals
    widen as a random walk's from the first step, 3 times as wide 9 steps ahead (the paths'
    quantiles read from 1000 of them: within 0.1). Given 100 values, its own law holds them
    and they keep about their first step's width. The floor of the series' own errors is set
    to 0 in both, so that this floor alone acts, and the spread factor and the coverage
    correction are off, so that the first step's interval is the spread the floor grows. A
    state kept without its own law (created with the layer off: its moments weigh nothing) is
    not taken for a young one. Series units: values about 1000, steps of 100."""
    rng = np.random.default_rng(5)
    bare = dataclasses.replace(ON, spread=False, coverage=False)
    rt = Runtime.load(level_model, backend="torch", adapt=bare)
    off = Runtime.load(level_model, backend="torch", adapt=OFF)
    ratios = {}
    for n, make in ((15, rt), (100, rt), (0, off)):
        histories = [1000.0 + 100.0 * rng.standard_normal((n or 15, 1)) for _ in range(20)]
        states = make.create(histories, levels=[0.8])
        states = [dataclasses.replace(s, error_growth=np.zeros_like(s.error_growth))
                  for s in states]
        weight = np.array([marginal.Marginal.of(s.marginal[None]).weight[0, 0]
                           if s.marginal.size else 0.0 for s in states])  # none kept: 0
        young = (weight > 0) & (weight < marginal.MIN_WEIGHT)
        assert young.all() == (n == 15) and young.any() == (n == 15)
        fcs = rt.forecast(states, 9, [0.8], 1000, seed=0)
        width = np.array([f.intervals[0.8][1][:, 0] - f.intervals[0.8][0][:, 0] for f in fcs])
        ratios[n] = width[:, 8] / width[:, 0]
    np.testing.assert_allclose(ratios[15], 3.0, atol=0.1)
    assert ratios[100].max() < 1.3, ratios[100]
    assert ratios[0].max() < 1.3, ratios[0]
