"""Each series' seasonal profile (model/series/adaptation.py): the classical decomposition that
estimates it, and in the runtime a random-walk model that forecasts a season it could not read
from its window."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from model.runtime.runtime import Runtime
from model.series.adaptation import AdaptConfig
from model.series.season import season_decomposition, season_offsets, season_profile
from model.series.state import SeriesState
from tests.model.series.test_mean_adaptation import random_walk  # noqa: F401 (fixture)

PATTERN = np.array([3.0, -1.0, 2.0, -4.0, 0.5, -0.5])  # sums to 0


@pytest.mark.parametrize("missing", [False, True])
def test_the_decomposition_finds_the_pattern_under_a_trend(missing: bool) -> None:
    """Known answer: y = 5 + 0.3 t + pattern[t mod 6] + N(0, 0.01^2); the centred moving
    average of one season removes the trend exactly, so each index is the pattern's within
    0.02, with a tenth of the values missing too."""
    rng = np.random.default_rng(0)
    t = np.arange(120)
    y = 5.0 + 0.3 * t + PATTERN[t % 6] + 0.01 * rng.standard_normal(120)
    if missing:
        y[rng.choice(120, 12, replace=False)] = np.nan
    got = season_profile(y[:, None], 6)
    np.testing.assert_allclose(got[:, 0], PATTERN, atol=0.02)
    odd = season_profile(np.tile([1.0, 2.0, -3.0], 10)[:, None], 3)  # an odd season
    np.testing.assert_allclose(odd[:, 0], [1.0, 2.0, -3.0], atol=1e-12)
    assert not season_profile(y[:11, None], 6).any()  # under two seasons: none


def test_offsets() -> None:
    profile = np.zeros((2, 6, 1))
    profile[0, :, 0] = PATTERN
    profile[1, :4, 0] = [1.0, 2.0, 3.0, 4.0]
    season = np.array([6, 4])
    np.testing.assert_array_equal(season_offsets(profile, season, np.array([7, 6]))[:, 0],
                                  [PATTERN[1], 3.0])
    ahead = season_offsets(profile, season, np.array([[0, 1, 2], [3, 4, 5]]))
    np.testing.assert_array_equal(ahead[1, :, 0], [4.0, 1.0, 2.0])
    assert not season_offsets(profile, np.array([0, 0]), np.array([3, 3])).any()


def _series(n: int, seed: int = 1) -> np.ndarray:
    t = np.arange(n)
    noise = 0.05 * np.random.default_rng(seed).standard_normal(n)
    return 10.0 + 3.0 * np.sin(2 * np.pi * t / 12) + noise


def test_a_random_walk_model_forecasts_the_season(random_walk: Path) -> None:  # noqa: F811
    """Known answer: a pure random walk repeats its last value; with the profile of a period
    12 sine the series it models is flat, and its 12-step forecast is the season, through
    both backends: median errors under 0.3 against up to 6 without."""
    y = _series(96 + 12)
    for backend in ("torch", "onnx"):
        rt = Runtime.load(random_walk, backend=backend)
        (state,) = rt.create([y[:96, None]], seasons=[12])
        assert state.profile.shape == (12, 1)
        np.testing.assert_allclose(
            state.profile[:, 0], 3.0 * np.sin(2 * np.pi * np.arange(12) / 12), atol=0.15
        )
        (fc,) = rt.forecast([state], 12, [0.8], 200, seed=0)
        assert np.abs(fc.median[:, 0] - y[96:]).max() < 0.3
        off = Runtime.load(
            random_walk, backend=backend, adapt=AdaptConfig(season=False, trend=False)
        )  # nothing else to follow the season
        (plain,) = off.create([y[:96, None]], seasons=[12])
        (flat,) = off.forecast([plain], 12, [0.8], 200, seed=0)
        assert np.abs(flat.median[:, 0] - y[96:]).max() > 3.0
        # the one-step laws put the season back: updates are scored in series units
        ((_, results),) = rt.update([state], [y[96:, None]], [0.8])
        errors = [abs(float(r.median[0]) - v) for r, v in zip(results, y[96:], strict=True)]
        assert max(errors) < 0.3


def test_the_profile_is_kept_in_the_state(random_walk: Path) -> None:  # noqa: F811
    rt = Runtime.load(random_walk, backend="torch")
    (state,) = rt.create([_series(60)[:, None]], seasons=[12])
    back = SeriesState.from_bytes(state.to_bytes())
    assert back == state and back.profile.shape == (12, 1)
    ((s1, r1),) = rt.update([state], [np.array([[11.0], [12.0]])], [0.8])
    ((s2, r2),) = rt.update([back], [np.array([[11.0], [12.0]])], [0.8])
    assert s1.to_bytes() == s2.to_bytes()
    assert np.array_equal(s1.profile, state.profile)  # estimated once, from the history
    (short,) = rt.create([_series(20)[:, None]], seasons=[12])  # under two seasons: none
    assert short.profile.size == 0


def test_a_noisy_profile_is_shrunk() -> None:
    """James-Stein: a pattern of amplitude 0.1 under noise of sd 1 over three seasons is mostly
    noise, and its profile shrinks to a fraction of the raw means' spread; a clear pattern over
    ten seasons keeps over 95 % of it."""
    rng = np.random.default_rng(7)
    t = np.arange(36)
    noisy = 0.1 * PATTERN[t % 6] + rng.standard_normal(36)
    t10 = np.arange(60)
    clear = PATTERN[t10 % 6] + 0.05 * rng.standard_normal(60)
    assert np.abs(season_profile(noisy[:, None], 6)).max() < 0.5
    got = season_profile(clear[:, None], 6)[:, 0]
    assert (got**2).sum() > 0.95**2 * (PATTERN**2).sum()


def _growing(n: int, amplitude: float = 0.4, seed: int = 3) -> np.ndarray:
    """A season that grows with the level: (50 + t) (1 + amplitude sin(2 pi t / 12)), with
    noise of sd 1 % of the value."""
    t = np.arange(n)
    noise = 1.0 + 0.01 * np.random.default_rng(seed).standard_normal(n)
    return (50.0 + t) * (1.0 + amplitude * np.sin(2 * np.pi * t / 12)) * noise


def test_a_season_that_grows_with_the_level_is_multiplicative() -> None:
    """Known answer: on (50 + t)(1 + 0.4 sin(2 pi t / 12)) the seasonal part of each value is
    0.4 sin(...) times the level there (within 3 % of the level, the trend's moving average
    carried flat over the last half season), and the profile a forecast carries is the season
    at the last level; an additive season under the same rising level stays additive, and a
    series with values below 0 can only be."""
    y = _growing(120)
    t = np.arange(120)
    profile, part = season_decomposition(y[:, None], 12)
    truth = 0.4 * np.sin(2 * np.pi * t / 12) * (50.0 + t)
    inside = slice(6, 114)  # where the centred average is the level, not carried past an end
    assert np.abs(part[inside, 0] - truth[inside]).max() < 0.03 * (50.0 + t[inside]).max()
    end = 50.0 + 119 - 6  # the level the average last reads: half a season before the end
    np.testing.assert_allclose(
        profile[:, 0], 0.4 * np.sin(2 * np.pi * np.arange(12) / 12) * end, atol=0.03 * end
    )
    additive = 50.0 + t + 20.0 * np.sin(2 * np.pi * t / 12)
    got = season_profile(additive[:, None], 12)[:, 0]
    np.testing.assert_allclose(got, 20.0 * np.sin(2 * np.pi * np.arange(12) / 12), atol=0.05)
    below = _growing(120) - 100.0  # the same shape, some values negative: additive
    _, part = season_decomposition(below[:, None], 12)
    assert np.ptp(part[:12, 0]) == pytest.approx(np.ptp(part[-12:, 0]), rel=1e-6)


def test_a_random_walk_model_forecasts_a_growing_season(random_walk: Path) -> None:  # noqa: F811
    """Known answer: with a multiplicative profile the random walk's 12-step forecast of a
    season that grows with the level carries the season's amplitude at the last level (about
    0.4 x 165 = 66): median errors within 8 % of the level (the additive profile of the whole
    history's mean amplitude, about 0.4 x 107, would miss the peaks by over 20)."""
    y = _growing(132)
    rt = Runtime.load(random_walk, backend="torch")
    (state,) = rt.create([y[:120, None]], seasons=[12])
    (fc,) = rt.forecast([state], 12, [0.8], 400, seed=0)
    level = 50.0 + np.arange(120, 132)
    assert np.abs(fc.median[:, 0] - y[120:]).max() < 0.08 * level.max()
