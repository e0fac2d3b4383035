"""The growth of a forecast's spread held to each series' local level (model/series/marginal.py):
the bound against its formula, the level's alpha fitted on a history of known alpha, and in the
runtime a random-walk model given a local level, whose paths would spread as sqrt(h) and are
held to sqrt(1 + (h - 1) alpha^2) times their first step's spread."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from model.runtime.runtime import Runtime
from model.series import marginal
from model.series.adaptation import AdaptConfig
from model.series.state import SeriesState
from model.series.trend import ALPHA_VALUES, fit
from tests.model.conftest import naive_lag_model

ON = AdaptConfig(mean=False, trend=False, revert=False)  # the bounds alone
H, ALPHA = 24, 0.5


@pytest.fixture(scope="module")
def walk_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """X_t = X_{t-1} + N(0, 1) in scaled units: its paths spread as sqrt(h)."""
    return naive_lag_model(tmp_path_factory.mktemp("growth") / "walk", sigma_obs=1.0)


def _local_level(seed: int, n: int = 400, alpha: float = ALPHA) -> np.ndarray:
    """ETS(A,N,N): y_t = l_{t-1} + e_t, l_t = l_{t-1} + alpha e_t, l_0 = 50."""
    e = np.random.default_rng(seed).standard_normal(n)
    level = 50.0 + alpha * np.concatenate([[0.0], np.cumsum(e[:-1])])
    return level + e


def test_the_growth_bound_is_a_local_levels() -> None:
    """first x sqrt(1 + (h - 1) alpha^2) at each step h; none (inf) for a level that hardly
    moves (alpha under 0.2, left to the marginal law's bound), for one that wanders as a walk
    (over 0.8, whose paths the network spreads as its own), or without a fitted alpha (0)."""
    law = marginal.Marginal.zeros((1, 5))._replace(alpha=np.array([[0.5, 0.2, 0.1, 0.9, 0.0]]))
    first = np.full((1, 5), 2.0)
    bound = marginal.growth_bound(law, first, np.array([1, 5, 24]))
    np.testing.assert_allclose(bound[:, 0, 0], 2.0 * np.sqrt(1 + np.array([0, 4, 23]) * 0.25))
    np.testing.assert_allclose(bound[:, 0, 1], 2.0 * np.sqrt(1 + np.array([0, 4, 23]) * 0.04))
    assert np.isinf(bound[:, 0, 2:]).all()


def test_the_levels_alpha_is_fitted_on_the_history() -> None:
    """Local levels of alpha 0.5 give 0.5 of the fit's grid in most of 20 histories (the
    neighbours 0.3 and 0.7 otherwise); white noise gives the grid's least, a walk its most."""
    fitted = np.array([fit(_local_level(seed)[:, None]).alpha[0] for seed in range(20)])
    assert np.mean(fitted == ALPHA) >= 0.7 and ((fitted >= 0.3) & (fitted <= 0.7)).all()
    noise = np.random.default_rng(0).standard_normal((400, 1))
    assert fit(noise).alpha[0] <= 0.1 and fit(np.cumsum(noise, 0)).alpha[0] >= 0.9


def _damped(seed: int, n: int = 400) -> np.ndarray:
    """ETS(A,Ad,N) of alpha 0.5, beta 0.1, phi 0.95 about 50."""
    e = np.random.default_rng(seed).standard_normal(n)
    y, level, slope = np.empty(n), 50.0, 0.0
    for t in range(n):
        y[t] = level + 0.95 * slope + e[t]
        level, slope = level + 0.95 * slope + 0.5 * e[t], 0.95 * slope + 0.1 * e[t]
    return y


def test_the_alpha_kept_is_that_of_the_level_the_paths_carry(walk_model: Path) -> None:
    """A damped trend's history: the fit keeps its trend, and the alpha of that form's level
    differs from the best form's without a trend (the trend's growth is then in the level).
    A runtime that carries the trend keeps the former, one with the trend off the latter; a
    history of fewer than ALPHA_VALUES observed values keeps none (0)."""
    y = _damped(0)[:, None]
    fitted = fit(y)
    assert fitted.trend["phi"][0] > 0 and fitted.alpha[0] != fitted.flat[0]
    for trend, expected in ((True, fitted.alpha[0]), (False, fitted.flat[0])):
        rt = Runtime.load(walk_model, backend="torch", adapt=AdaptConfig(mean=False, trend=trend))
        (state,) = rt.create([y])
        assert marginal.Marginal.of(state.marginal).alpha[0] == expected
    short = np.cumsum(np.random.default_rng(1).standard_normal((ALPHA_VALUES - 1, 1)), 0)
    assert fit(short).alpha[0] == fit(short).flat[0] == 0.0


def test_a_walk_model_on_a_local_level_spreads_as_its_alpha_says(walk_model: Path) -> None:
    """A random-walk model given local levels of alpha 0.5: the first step is untouched; after
    it the paths' spread is the least of what they had without this bound (the walk's, or
    the marginal law's bound) and first x sqrt(1 + (h - 1) alpha^2), to rounding, with the
    state's fitted alpha; at step 24 that bound binds on at least half the series
    (sqrt(1 + 23 x 0.25) = 2.6 first steps against the walk's sqrt(24) = 4.9, and the
    marginal law's bound, of the same order as the growth's for a level that wanders over the
    moments' memory of 100 steps: either may be the lesser); a state without its alpha (format
    9) keeps the spread it had without it. The means are unchanged: the paths are scaled
    about them."""
    rt = Runtime.load(walk_model, backend="torch", adapt=ON)
    histories = [_local_level(seed)[:, None] for seed in range(20)]
    # the floor of the series' own errors off (test_error_floor.py): the bounds alone
    states = [dataclasses.replace(s, error_growth=np.zeros_like(s.error_growth))
              for s in rt.create(histories, levels=[0.8])]
    bare = [
        dataclasses.replace(s, marginal=law._replace(alpha=np.zeros(1)).record())
        for s, law in ((s, marginal.Marginal.of(s.marginal)) for s in states)
    ]
    held, free = (
        np.stack([f.samples[:, :, 0] for f in fcs if f.samples is not None])
        for fcs in (rt.forecast(st, H, [0.8], 2000, return_samples=True, seed=0)
                    for st in (states, bare))
    )  # (S, N, H) each
    spread = marginal.spread(held.transpose(0, 2, 1)[..., None])[..., 0]  # (S, H)
    spread_free = marginal.spread(free.transpose(0, 2, 1)[..., None])[..., 0]
    np.testing.assert_array_equal(held[:, :, 0], free[:, :, 0])
    alpha = np.array([marginal.Marginal.of(s.marginal).alpha[0] for s in states])[:, None]
    growth = spread[:, :1] * np.sqrt(1 + np.arange(H)[None, :] * alpha**2)
    np.testing.assert_allclose(spread[:, 1:], np.minimum(spread_free, growth)[:, 1:], rtol=1e-6)
    assert np.mean(growth[:, -1] < spread_free[:, -1]) >= 0.5
    np.testing.assert_allclose(held.mean(1), free.mean(1), rtol=1e-9)
    assert all(SeriesState.from_bytes(s.to_bytes()) == s for s in states)
