"""Season lengths from a frequency, from timestamps, and from the values (known answers)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from timeseries.seasons import detect_season, season_of_freq, season_of_timestamps


@pytest.mark.parametrize(
    ("freq", "season"),
    [
        ("h", 24), ("H", 24), ("2h", 12), ("30min", 48), ("15min", 96), ("5min", 12),
        ("min", 60), ("D", 7), ("B", 5), ("W", 52), ("W-SUN", 52), ("MS", 12), ("M", 12),
        ("ME", 12), ("QS", 4), ("QS-DEC", 4), ("Q", 4), ("YS", 0), ("7h", 0),
    ],
)
def test_season_of_freq(freq: str, season: int) -> None:
    assert season_of_freq(freq) == season


def test_a_string_that_is_no_frequency_is_refused_with_examples() -> None:
    with pytest.raises(ValueError, match="not a frequency; use a pandas alias such as h"):
        season_of_freq("fortnightly")


def test_season_of_timestamps() -> None:
    assert season_of_timestamps(pd.date_range("2024-01-01", periods=30, freq="h")) == 24
    assert season_of_timestamps(pd.date_range("2024-01-01", periods=30, freq="MS")) == 12
    irregular = pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-05", "2024-01-11"])
    assert season_of_timestamps(irregular) == 0


def _seasonal(rng: np.random.Generator, m: int, n: int) -> np.ndarray:
    """A random seasonal profile of unit standard deviation plus unit noise (signal-to-noise
    1), n values."""
    profile = rng.standard_normal(m)
    return ((profile - profile.mean()) / profile.std())[np.arange(n) % m] + rng.normal(size=n)


def test_detect_season_finds_the_period_of_a_noisy_cycle() -> None:
    """Sines of period 7, 12 and 24 with unit noise (amplitude 10) over 200 steps are found at
    their period, and so are the long seasons of half-hourly, weekly and hourly data (48, 52,
    168) at signal-to-noise 1 from three seasons: each in at least 18 of 20 seeded series (it
    finds about 97 %, bench/bench_seasons.py)."""
    t = np.arange(200)
    for period in (7, 12, 24):
        found = [
            detect_season(50 + 10 * np.sin(2 * np.pi * t / period)
                          + np.random.default_rng(s).normal(size=200), 48)
            for s in range(5)
        ]
        assert found == [period] * 5
    rng = np.random.default_rng(0)
    for m in (48, 52, 168):
        hits = sum(detect_season(_seasonal(rng, m, 3 * m), 1 << 16) == m for _ in range(20))
        assert hits >= 18, (m, hits)


def test_a_smooth_season_is_found_from_three_seasons() -> None:
    """A sine of period 12, 24 or 48 and unit variance under unit noise (signal-to-noise 1) over
    three seasons: the harmonic test finds it in at least 18 of 20 seeded series of each, and
    52 for a sine of 52 (an oracle that knew the period would in 99.9 %;
    bench/bench_seasons.py: 97 to 100 %: 48 and 52 told apart by their first harmonics)."""
    rng = np.random.default_rng(3)
    for m, least in ((12, 18), (24, 18), (48, 18), (52, 18)):
        t = np.arange(3 * m)
        hits = sum(
            detect_season(np.sqrt(2.0) * np.sin(2 * np.pi * t / m + rng.uniform(0, 2 * np.pi))
                          + rng.normal(size=3 * m), 1 << 16) == m
            for _ in range(20)
        )
        assert hits >= least, (m, hits)


def test_near_periods_are_told_apart_only_when_tested_alike() -> None:
    """A sine of 52 (signal-to-noise 1) over 150 values holds three seasons of 48 but not of
    52: only 48 gets the harmonic test, and a harmonic's BIC against 52 phase means would pick
    48 whatever the fit; compared by their first harmonics' fit, 52 is found in at least 18 of
    20 seeded series (100 of 100 in a check; by the phases' shares alone, 84 %)."""
    rng = np.random.default_rng(6)
    t = np.arange(150)
    hits = sum(
        detect_season(np.sqrt(2.0) * np.sin(2 * np.pi * t / 52 + rng.uniform(0, 2 * np.pi))
                      + rng.normal(size=150), 1 << 16) == 52
        for _ in range(20)
    )
    assert hits >= 18, hits


def test_the_harmonic_test_is_the_regression_f_test() -> None:
    """The harmonic test's p-value, adjusted R^2 and BIC are those of the least-squares
    regression on a constant and the first harmonic's cosine and sine (statsmodels' OLS), with
    missing values left out."""
    import statsmodels.api as sm

    from timeseries.seasons import _harmonic_test

    rng = np.random.default_rng(4)
    t = np.arange(120.0)
    r = 0.5 * np.sin(2 * np.pi * t / 12) + rng.normal(size=120)
    r[[5, 50]] = np.nan
    seen = np.isfinite(r)
    angle = 2 * np.pi * np.outer(t[seen], [1]) / 12
    fit = sm.OLS(r[seen], sm.add_constant(np.column_stack([np.cos(angle), np.sin(angle)]))).fit()
    p, share, bic = _harmonic_test(r, 12, 0)
    assert p == pytest.approx(fit.f_pvalue, rel=1e-9)
    assert share == pytest.approx(fit.rsquared_adj, rel=1e-9)
    assert fit.bic - bic == pytest.approx(118 * (1 + np.log(2 * np.pi)), rel=1e-9)  # its constant


def test_detect_season_rarely_finds_one_in_noise_or_a_random_walk() -> None:
    """White noise and random walks are found seasonal at most as often as the test's 5 %
    level allows: of 100 seeded series of each kind (lengths 30 to 600), at most 10 (twice
    the level: a binomial count of mean 5 exceeds 10 with probability under 2 %)."""
    rng = np.random.default_rng(1)
    for walk in (False, True):
        series = [rng.normal(size=int(n)) for n in rng.integers(30, 600, size=100)]
        found = sum(detect_season(np.cumsum(x) if walk else x, 1 << 16) > 0 for x in series)
        assert found <= 10, (walk, found)


def test_detect_season_needs_two_seasons_and_keeps_to_its_bound() -> None:
    """A history shorter than two seasons keeps none; a season longer than `max_season` is not
    looked for (nor its divisors mistaken for it); a constant series has none; missing
    values are skipped."""
    t = np.arange(200)
    assert detect_season(10 * np.sin(2 * np.pi * np.arange(23) / 12), 48) == 0
    assert detect_season(10 * np.sin(2 * np.pi * np.arange(24) / 12), 48) == 12
    assert detect_season(np.sin(2 * np.pi * t / 24) + 0.0, 12) == 0
    assert detect_season(np.full(100, 3.0), 48) == 0
    gappy = 10 * np.sin(2 * np.pi * t / 12) + np.random.default_rng(2).normal(size=200)
    gappy[::7] = np.nan
    assert detect_season(gappy, 48) == 12
