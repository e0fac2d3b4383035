"""Season lengths from a frequency, from timestamps, and from the values (known answers)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from timeseries.seasons import detect_season, season_for, season_of_freq, season_of_timestamps


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
    """On white residuals, the harmonic test's p-value, adjusted R^2 and BIC are those of the
    least-squares regression on a constant and the first harmonic's cosine and sine
    (statsmodels' OLS), with missing values left out."""
    import statsmodels.api as sm

    from timeseries.seasons import WHITE, _harmonic_test

    rng = np.random.default_rng(5)
    t = np.arange(120.0)
    r = 0.5 * np.sin(2 * np.pi * t / 12) + rng.normal(size=120)
    r[[5, 50]] = np.nan
    seen = np.isfinite(r)
    angle = 2 * np.pi * np.outer(t[seen], [1]) / 12
    fit = sm.OLS(r[seen], sm.add_constant(np.column_stack([np.cos(angle), np.sin(angle)]))).fit()
    u = fit.resid  # white: their lag-one correlation within WHITE standard errors of 0
    assert abs(u[:-1] @ u[1:] / (u[:-1] @ u[:-1])) * np.sqrt(len(u)) < WHITE
    p, share, bic = _harmonic_test(r, 12, 0)
    assert p == pytest.approx(fit.f_pvalue, rel=1e-9)
    assert share == pytest.approx(fit.rsquared_adj, rel=1e-9)
    assert fit.bic - bic == pytest.approx(118 * (1 + np.log(2 * np.pi)), rel=1e-9)  # its constant


def test_the_harmonic_test_of_autocorrelated_residuals_is_cochrane_orcutts() -> None:
    """Residuals that follow an AR(1) of 0.7: the p-value is the F-test of the regression of
    r_t - rho r_(t-1) on the transformed constant, cosine and sine (statsmodels' OLS), rho the
    lag-one correlation of the plain regression's residuals less its bias, a degree of freedom
    fewer for it. 1,000 such series without a season: found seasonal at a 2 % level in 15 % by
    the plain test, in at most 6 % by this one (what is left: rho estimated from 96 values)."""
    import statsmodels.api as sm
    from scipy import stats

    from timeseries.seasons import _harmonic_test

    def ar(n: int, rng: np.random.Generator) -> np.ndarray:
        e, x = rng.normal(size=n), np.zeros(n)
        for i in range(1, n):
            x[i] = 0.7 * x[i - 1] + e[i]
        return x

    rng = np.random.default_rng(6)
    t = np.arange(96.0)
    r = 0.3 * np.sin(2 * np.pi * t / 24) + ar(96, rng)
    design = sm.add_constant(np.column_stack([np.cos(2 * np.pi * t / 24),
                                              np.sin(2 * np.pi * t / 24)]))
    u = sm.OLS(r, design).fit().resid
    rho = float(u[:-1] @ u[1:] / (u[:-1] @ u[:-1]))
    rho += (1 + 3 * rho) / 95  # less the estimate's bias (Kendall 1954)
    fit = sm.OLS(r[1:] - rho * r[:-1], design[1:] - rho * design[:-1]).fit()
    restricted = sm.OLS(r[1:] - rho * r[:-1], design[1:, :1] - rho * design[:-1, :1]).fit()
    df2 = 96 - 3 - 1 - 1 - 2  # the plain test's (2 trend terms fitted), a row and rho fewer
    stat = ((restricted.ssr - fit.ssr) / 2) / (fit.ssr / df2)
    p, _, _ = _harmonic_test(r, 24, 2)
    assert p == pytest.approx(float(stats.f.sf(stat, 2, df2)), rel=1e-9)
    found = [_harmonic_test(ar(96, rng), 24, 0)[0] < 0.02 for _ in range(1000)]
    assert np.mean(found) <= 0.06


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


@pytest.mark.parametrize(
    ("freq", "lengths"),
    [("QS", (40, 80)), ("MS", (48, 120, 240)), ("W", (156, 260)), ("D", (365, 730)),
     ("h", (720,))],
)
def test_a_calendar_season_is_kept_only_where_the_values_show_it(
    freq: str, lengths: tuple[int, ...]
) -> None:
    """Told the frequency, white noise and random walks of its usual lengths (1,000 each) get
    a season in at most 5 % (the test's level is 4 %; 1,000 draws put a 5 % upper bound 2.3
    standard errors above it); a seasonal series of that length gets the calendar's."""
    calendar = season_of_freq(freq)
    rng = np.random.default_rng(calendar)
    for n in lengths:
        noise = [season_for(rng.normal(size=n), calendar, 400) for _ in range(1000)]
        walks = [season_for(np.cumsum(rng.normal(size=n)), calendar, 400) for _ in range(1000)]
        for found in (noise, walks):
            assert set(found) <= {0, calendar}
            assert np.mean(np.asarray(found) > 0) <= 0.05, (freq, n)
        seasonal = _seasonal(rng, calendar, n) * 2  # signal-to-noise 2
        assert season_for(seasonal, calendar, 400) == calendar, (freq, n)


def test_seasonally_adjusted_quarters_have_no_season_nor_a_multiple_of_one() -> None:
    """The last 80 quarters of statsmodels' seasonally adjusted US macro series: told they are
    quarterly, none (their quarters do not differ), never a multiple of 4; from the values
    alone, realgdp and unemp were given 24 quarters before the harmonic test whitened
    autocorrelated residuals, and are given none."""
    import statsmodels.api as sm

    macro = sm.datasets.macrodata.load_pandas().data
    for column in ("realgdp", "realcons", "unemp", "tbilrate", "cpi", "realinv", "infl"):
        y = macro[column].to_numpy(np.float64)[-80:]
        assert season_for(y, 4, 400) == 0, column
    for column in ("realgdp", "unemp"):
        assert season_for(macro[column].to_numpy(np.float64)[-80:], 0, 400) == 0, column


def test_a_weekly_year_needs_three_years() -> None:
    rng = np.random.default_rng(5)
    yearly = np.sin(2 * np.pi * np.arange(200) / 52) * 3 + rng.normal(size=200)
    assert season_for(yearly[:150], 52, 400) == 0  # under three years
    longer = np.sin(2 * np.pi * np.arange(160) / 52) * 3 + rng.normal(size=160)
    assert season_for(longer, 52, 400) == 52  # three years and more


@pytest.mark.parametrize("period, length", [(4, 136), (7, 140)])
def test_a_season_on_a_wandering_level_is_read_at_its_period_not_a_multiple(
    period: int, length: int
) -> None:
    """A random profile of unit sd and unit noise on a random-walk level (steps of sd 0.3), sent
    without a calendar: the phase means of a long multiple (48 or 52 quarters, under four
    seasons of them) also absorb the slow wander, and were preferred in 9 % of quarterly series;
    weighed against their divisors on the series' steps where what they leave is
    autocorrelated, the period is read in 95-98.5 % (three seeds of 200; 7: all). The bound,
    0.92 over 300 series, is 3.5 standard errors under the least of those."""
    rng = np.random.default_rng(1)
    t = np.arange(length)
    read = []
    for _ in range(300):
        profile = rng.standard_normal(period)
        profile = (profile - profile.mean()) / profile.std()
        level = np.cumsum(rng.normal(0.0, 0.3, length))
        read.append(detect_season(50 + level + profile[t % period] + rng.standard_normal(length),
                                  400))
    assert np.mean(np.array(read) == period) >= 0.92, np.unique(read, return_counts=True)


@pytest.mark.parametrize("period, length, kind, series, bound", [
    (12, 240, "profile", 200, 0.90), (24, 720, "sine", 100, 0.95)])
def test_a_season_whose_multiples_the_history_holds_is_read_at_its_period(
    period: int, length: int, kind: str, series: int, bound: float
) -> None:
    """A random profile of 12 or a sine of 24 (unit sd, unit noise) on a random-walk level
    (steps of sd 0.3), sent without a calendar, over a history that holds the candidates'
    multiples of it (24 to 96 months, 48 to 336 hours): the profile was read as 6 or 4 in 10 %
    of series (its short harmonics weigh more in the steps the divisors were compared on), the
    sine as 48 to 336 in 18 % (their phase means absorb the wander); compared by how well each
    forecasts the values it was not fitted on, the period is read in 93.5-96 % and 99-99.5 %
    (three seeds of 200). The bounds are 2 and 4 standard errors (of 200 and 100 series) under
    the least of those."""
    rng = np.random.default_rng(1)
    t = np.arange(length)
    read = []
    for _ in range(series):
        if kind == "sine":
            season = np.sqrt(2.0) * np.sin(2 * np.pi * t / period + rng.uniform(0, 2 * np.pi))
        else:
            profile = rng.standard_normal(period)
            season = ((profile - profile.mean()) / profile.std())[t % period]
        level = np.cumsum(rng.normal(0.0, 0.3, length))
        read.append(detect_season(50 + level + season + rng.standard_normal(length), 400))
    assert np.mean(np.array(read) == period) >= bound, np.unique(read, return_counts=True)


def test_a_quarterly_peak_on_a_falling_level_is_read_as_four() -> None:
    """136 quarters of a falling random walk with a first-quarter peak (a real quarterly
    series' shape) were read as 24, 48 or 52 in 41 % of 200 series; now as 4 in all but one or
    two."""
    rng = np.random.default_rng(0)
    t = np.arange(136)
    read = [
        detect_season(100 + np.cumsum(rng.normal(-0.5, 1.5, 136)) + 8.0 * (t % 4 == 0)
                      + rng.normal(0.0, 2.0, 136), 400)
        for _ in range(200)
    ]
    assert np.mean(np.array(read) == 4) >= 0.97
