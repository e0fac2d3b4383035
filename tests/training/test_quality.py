"""`smct quality` (training/quality/): the scores against known answers, the statsforecast
peers against statsforecast's own forecasts and known laws, the seasonal naive's empirical
intervals, the served model and its ablation through the runtime, the acceptance checks, the
report's tables, and the quick command end to end."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scoringrules as sr
import torch
import typer
from scipy import integrate, stats
from typer.testing import CliRunner

from cli.app import app
from model.runtime.runtime import Runtime
from model.series.adaptation import AdaptConfig
from tests.docs.test_manual import TABLE_HEADING
from tests.model.conftest import artifact, per_series_artifact  # noqa: F401 (fixtures)
from tests.paper_data import needs_data
from training.quality import ablation, checks, peers, report, scores, served
from training.quality.run import SeriesResult, origins
from training.quality.scores import MultiStep, OneStep
from training.quality.suite import ORACLE_WIDTH80, Series, SuiteConfig, sine, with_eval_part

# --------------------------------------------------------------------------- scores


def test_gaussian_crps_is_the_integral_of_the_squared_cdf_difference() -> None:
    for mu, sigma, y in ((0.0, 1.0, 0.3), (5.0, 2.5, -1.0), (-3.0, 0.1, -3.05)):
        cdf, sf = stats.norm(mu, sigma).cdf, stats.norm(mu, sigma).sf
        below, _ = integrate.quad(lambda x, f=cdf: f(x) ** 2, mu - 12 * sigma, y, limit=200)
        above, _ = integrate.quad(lambda x, f=sf: f(x) ** 2, y, mu + 12 * sigma, limit=200)
        assert scores.gaussian_crps(mu, sigma, y) == pytest.approx(below + above, rel=1e-7)
    # at the mean of N(0, 1): (sqrt 2 - 1) / sqrt pi
    at_mean = (math.sqrt(2) - 1) / math.sqrt(math.pi)
    assert scores.gaussian_crps(0.0, 1.0, 0.0) == pytest.approx(at_mean)


def test_sample_crps_is_the_crps_of_the_empirical_law() -> None:
    rng = np.random.default_rng(0)
    samples, y = rng.normal(size=(5, 7, 101)), rng.normal(size=(5, 7))
    expected = sr.crps_ensemble(y, samples, m_axis=-1, estimator="nrg", backend="numpy")
    np.testing.assert_allclose(scores.sample_crps(samples, y), expected, rtol=1e-10)
    # two points {0, 2} at y = 1: E|X - 1| - E|X - X'| / 2 = 1 - 1/2
    assert scores.sample_crps(np.array([0.0, 2.0]), np.array(1.0)) == pytest.approx(0.5)
    # many draws of N(0, 1): the closed form, within sampling error
    draws = rng.normal(size=200_000)
    assert scores.sample_crps(draws, np.array(0.7)) == pytest.approx(
        float(scores.gaussian_crps(0.0, 1.0, 0.7)), abs=5e-3
    )


def test_picp_mpiw_and_rolling_coverage_on_constructed_intervals() -> None:
    y = np.array([0.0, 1.0, 2.0, np.nan, 4.0, 5.0])
    lo = np.array([-1.0, 1.5, 2.0, 0.0, 0.0, 6.0])
    hi = np.array([1.0, 2.0, 3.0, 9.0, 4.0, 7.0])
    # inside: 0 in [-1, 1], 2 in [2, 3] (a bound counts), 4 in [0, 4]; 1 and 5 out; NaN left out
    assert scores.picp(lo, hi, y) == pytest.approx(3 / 5)
    assert scores.mpiw(lo, hi, y) == pytest.approx((2 + 0.5 + 1 + 4 + 1) / 5)
    assert scores.rolling_picp(lo, hi, y, window=2) == pytest.approx(1 / 2)  # 4 in, 5 out
    assert scores.geometric_mean([2.0, 0.5, math.nan]) == pytest.approx(1.0)


def test_naive_scale_and_last_values() -> None:
    y = np.array([1.0, 3.0, 2.0, 6.0, 3.0, np.nan, 4.0])
    # season 2: |2 - 1|, |6 - 3|, |3 - 2|, |4 - 3| (pairs with a NaN left out)
    assert scores.naive_scale(y, 2) == pytest.approx((1 + 3 + 1 + 1) / 4)
    assert scores.naive_scale(np.full(10, 5.0), 1) == 1.0  # no error: unit scale
    np.testing.assert_array_equal(scores.last_values(y, 4), [6.0, 3.0, 3.0])


def test_one_step_scores_divide_by_the_scale() -> None:
    y = np.array([1.0, 2.0, 3.0, 4.0])
    one = OneStep(y + 1.0, {0.8: (y - 1, y + 1), 0.95: (y - 2, y + 2)}, np.full(4, 0.6))
    s = scores.one_step_scores(one, y, last=y - 2.0, scale=2.0)
    assert s["crps"] == pytest.approx(0.3) and s["mpiw80"] == pytest.approx(1.0)
    assert s["mase"] == pytest.approx(0.5) and s["mae_vs_last"] == pytest.approx(0.5)
    assert s["picp80"] == s["picp95"] == s["rolling_picp80"] == 1.0


# --------------------------------------------------------------------------- peers


def _local_level(n: int, alpha: float, seed: int) -> np.ndarray:
    """y_t = l_{t-1} + e_t, l_t = l_{t-1} + alpha e_t, e ~ N(0, 1): ETS(A,N,N) exactly."""
    rng = np.random.default_rng(seed)
    level, out = 10.0, np.empty(n)
    for t in range(n):
        e = rng.standard_normal()
        out[t] = level + e
        level += alpha * e
    return out


def test_ets_on_its_own_law_is_calibrated_and_near_the_true_crps() -> None:
    y = _local_level(2500, alpha=0.3, seed=1)
    series = with_eval_part(Series("ann", "generated", y, season=1, horizon=12), SuiteConfig())
    assert series.n_eval == 750
    one, multi, form = peers.statsforecast_peer("ETS", series, origins(series, 10), 2000)
    truth = y[series.eval_start :]
    assert form in ("ETS(A,N,N)", "ETS(A,Ad,N)"), form
    assert scores.picp(*one.bounds[0.8], truth) == pytest.approx(0.8, abs=0.04)
    assert scores.picp(*one.bounds[0.95], truth) == pytest.approx(0.95, abs=0.025)
    # the true one-step law is N(., 1), whose expected CRPS is 1 / sqrt(pi)
    assert float(np.mean(one.crps)) == pytest.approx(1 / math.sqrt(math.pi), rel=0.05)
    # h steps ahead the variance grows as 1 + alpha^2 (h - 1)
    width = multi.bounds[0.8][1][0] - multi.bounds[0.8][0][0]
    np.testing.assert_allclose(width / width[0], np.sqrt(1 + 0.3**2 * np.arange(12)), rtol=0.1)


@pytest.mark.parametrize("name", ["ETS", "ARIMA", "Theta", "naive"])
def test_peers_issue_statsforecasts_own_forecasts(name: str) -> None:
    """One step ahead: statsforecast's forecast from the values before t with the parameters
    fixed (its mean, to 1e-5: ARIMA's Kalman filter then runs over more values; its standard
    deviation within 5 %: statsforecast re-estimates sigma on the values it is given, the peer
    keeps the fit's). From an origin: statsforecast's mean and the width of its 80 % interval
    exactly (Theta's intervals are quantiles of simulated paths: read as Gaussian, centred on
    the mean). A level-proportional noise makes AutoETS take multiplicative errors."""
    from statsforecast.models import AutoARIMA, AutoETS, AutoTheta, SeasonalNaive

    rng = np.random.default_rng(11)
    t = np.arange(400)
    level = 100 + 0.2 * t + 10 * np.sin(2 * np.pi * t / 12)
    y = level * (1 + 0.05 * rng.standard_normal(400))
    series = Series("m", "test", y, season=12, horizon=12, eval_start=300)
    one, multi, form = peers.statsforecast_peer(name, series, np.array([300, 350]), 2000)
    kind = {"ETS": AutoETS, "ARIMA": AutoARIMA, "Theta": AutoTheta, "naive": SeasonalNaive}
    model = kind[name](season_length=12).fit(y[:300])
    if name == "ETS":
        assert form == model.model_["method"] and form.startswith("ETS(M"), form
    for k in (0, 17, 99):
        own = model.forward(y[: 300 + k], h=1, level=[80])
        assert one.median[k] == pytest.approx(own["mean"][0], rel=1e-5)
        lo, hi = one.bounds[0.8][0][k], one.bounds[0.8][1][k]
        assert hi - lo == pytest.approx(own["hi-80"][0] - own["lo-80"][0], rel=0.05)
    for i, origin in enumerate((300, 350)):
        own = model.forward(y[:origin], h=12, level=[80])
        np.testing.assert_allclose(multi.median[i], own["mean"], rtol=1e-9)
        width = multi.bounds[0.8][1][i] - multi.bounds[0.8][0][i]
        np.testing.assert_allclose(width, own["hi-80"] - own["lo-80"], rtol=1e-9)


def test_missing_values_are_filled_from_the_past_only() -> None:
    y = np.array([np.nan, 2.0, np.nan, np.nan, 5.0, np.nan])
    np.testing.assert_array_equal(peers.filled(y), [2.0, 2.0, 2.0, 2.0, 5.0, 5.0])
    gapped = _local_level(500, alpha=0.5, seed=4)
    gapped[[20, 320, 321]] = np.nan
    series = Series("gap", "test", gapped, season=1, horizon=12, eval_start=300)
    for name in ("ETS", "ARIMA"):
        one, multi, _ = peers.statsforecast_peer(name, series, np.array([300, 400]), 2000)
        assert np.isfinite(one.median).all() and np.isfinite(multi.median).all()
        assert np.isnan(one.crps[[20, 21]]).all() and np.isfinite(one.crps[22])


def test_the_seasonal_naive_issues_the_law_of_a_seasonal_random_walk() -> None:
    """y_t = y_{t-7} + e_t, e ~ N(0, 1): one step ahead the law N(y_{t-7}, 1) (sigma from 693
    residuals: within 0.08); h steps ahead the sd grows as sqrt(floor((h - 1) / 7) + 1), the
    seasons ahead the forecast leans on; a repeating season is forecast exactly."""
    rng = np.random.default_rng(6)
    y = np.tile(rng.normal(0, 5, 7), 143)[:1000] + 0.0
    for t in range(7, 1000):
        y[t] = y[t - 7] + rng.standard_normal()
    series = Series("srw", "generated", y, season=7, horizon=14, eval_start=700)
    one, multi, form = peers.statsforecast_peer("naive", series, np.array([700, 800]), 2000)
    assert form == "SeasonalNaive(7)"
    np.testing.assert_allclose(one.median, y[693:-7])
    sd = (one.bounds[0.8][1] - one.bounds[0.8][0]) / (2 * stats.norm.ppf(0.9))
    np.testing.assert_allclose(sd, 1.0, rtol=0.08)
    width = multi.bounds[0.8][1][0] - multi.bounds[0.8][0][0]
    np.testing.assert_allclose(width / width[0], np.sqrt(np.arange(14) // 7 + 1), rtol=1e-9)
    np.testing.assert_allclose(multi.median[1], np.r_[y[793:800], y[793:800]])
    periodic = np.tile([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0], 30)
    exact, _, _ = peers.statsforecast_peer(
        "naive", Series("p", "test", periodic, 7, 12, eval_start=150), np.array([150]), 2000)
    np.testing.assert_allclose(exact.median, periodic[150:])
    assert np.abs(exact.crps).max() < 1e-12  # a point mass on the value: no error


# --------------------------------------------------------------------------- ARIMA


def _ar1(n: int, phi: float, seed: int) -> np.ndarray:
    """y_t = phi y_{t-1} + e_t, e ~ N(0, 1), from the stationary law."""
    rng = np.random.default_rng(seed)
    e = rng.standard_normal(n)
    y = np.empty(n)
    y[0] = e[0] / math.sqrt(1 - phi**2)
    for t in range(1, n):
        y[t] = phi * y[t - 1] + e[t]
    return y


def test_arima_on_an_ar1_issues_its_one_step_law() -> None:
    """An AR(1), phi 0.6, sigma 1, 700 values of history: the one-step law N(phi y, 1) within
    about three standard errors of the estimates (phi: sqrt((1 - phi^2) / 700) = 0.03, times
    sd(y) = 1.25; the mean's part (1 - phi) sd(mean) = 0.04: 0.15 in all; sigma: 1 / sqrt(1400)
    = 0.027 relative, 0.08)."""
    phi = 0.6
    y = _ar1(1000, phi, seed=5)
    series = Series("ar1", "generated", y, season=1, horizon=12, eval_start=700)
    one, multi, name = peers.statsforecast_peer("ARIMA", series, origins(series, 3), 2000)
    assert re.match(r"ARIMA\(\d,0,\d\)", name), name  # d = 0
    law = phi * y[699:-1]
    assert float(np.sqrt(np.mean((one.median - law) ** 2))) < 0.15, name
    sd = (one.bounds[0.8][1] - one.bounds[0.8][0]) / (2 * stats.norm.ppf(0.9))
    np.testing.assert_allclose(sd, 1.0, rtol=0.08)
    # h steps ahead the variance grows as sum_{j<h} phi^(2 j), towards 1 / (1 - phi^2)
    width = multi.bounds[0.8][1][0] - multi.bounds[0.8][0][0]
    expected = np.sqrt(np.cumsum(phi ** (2 * np.arange(12))))
    np.testing.assert_allclose(width / width[0], expected, rtol=0.1)


def test_arima_on_a_random_walk_issues_the_last_value() -> None:
    """A Gaussian random walk: the one-step law N(last value, 1), within a few standard errors
    (a drift of 1 / sqrt(600) = 0.04; sigma 1 / sqrt(1200) relative)."""
    walk = 100 + np.cumsum(np.random.default_rng(8).standard_normal(800))
    series = Series("walk", "generated", walk, season=1, horizon=12, eval_start=600)
    one, _, name = peers.statsforecast_peer("ARIMA", series, origins(series, 2), 2000)
    assert re.match(r"ARIMA\(\d,1,\d\)", name), name
    assert np.abs(one.median - walk[599:-1]).max() < 0.15
    sd = (one.bounds[0.8][1] - one.bounds[0.8][0]) / (2 * stats.norm.ppf(0.9))
    np.testing.assert_allclose(sd, 1.0, rtol=0.08)


def test_a_long_season_enters_arima_as_fourier_pairs() -> None:
    """A season of 52 with one harmonic: AutoARIMA without a seasonal part, on the Fourier pair
    the least-squares AIC picks, and its one-step law that of the noise (sd 1 within 0.08)."""
    rng = np.random.default_rng(2)
    t = np.arange(1200)
    y = 50 + 10 * np.sin(2 * np.pi * t / 52) + rng.standard_normal(1200)
    series = Series("s52", "generated", y, season=52, horizon=52, eval_start=900)
    one, multi, name = peers.statsforecast_peer("ARIMA", series, origins(series, 2), 2000)
    assert name.endswith("+ 1 Fourier pairs of 52"), name
    sd = (one.bounds[0.8][1] - one.bounds[0.8][0]) / (2 * stats.norm.ppf(0.9))
    np.testing.assert_allclose(sd, 1.0, rtol=0.08)
    assert float(np.mean(one.crps)) == pytest.approx(1 / math.sqrt(math.pi), rel=0.08)
    o = int(multi.origins[0])
    season = 50 + 10 * np.sin(2 * np.pi * t[o : o + 52] / 52)
    assert np.abs(multi.median[0] - season).max() < 0.5  # the season carried a year ahead


# --------------------------------------------------------------------------- the model


def test_the_model_is_scored_as_if_fed_one_observation_per_call(
    per_series_artifact: Path,  # noqa: F811
) -> None:
    torch.set_num_threads(1)
    runtime = Runtime.load(per_series_artifact)
    series = with_eval_part(sine(12, length=120), SuiteConfig.make(quick=True))
    starts = origins(series, 2)
    one, multi = served.model(runtime, series, starts, samples=50)
    assert one.median.shape == (series.n_eval,) and multi.crps.shape == (len(starts), 12)
    lo80, hi80 = one.bounds[0.8]
    lo95, hi95 = one.bounds[0.95]
    assert (lo95 <= lo80).all() and (lo80 <= one.median).all() and (one.median <= hi80).all()
    assert (hi80 <= hi95).all() and np.isfinite(one.crps).all()
    # the same answers, one observation per update call, as the service sees a series
    y = series.values
    (state,) = runtime.create([y[: series.eval_start, None]], seasons=[series.season])
    crps = []
    for value in y[series.eval_start :]:
        ((state, (res,)),) = runtime.update([state], [np.array([[value]])], [0.8, 0.95])
        crps.append(res.crps)
        assert res.covered is not None
    np.testing.assert_allclose(one.crps, crps, rtol=1e-6)


@pytest.fixture(scope="session")
def cache_home(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """XDG_CACHE_HOME of these tests, in pytest's cache: the ablation of the test model is
    exported once (half a minute), as the model is trained once (tests/model/conftest.py)."""
    cache = getattr(request.config, "cache", None)
    return cache.mkdir("smct-cache-home") if cache else tmp_path_factory.mktemp("cache")


def test_the_ablation_is_the_per_series_layer_around_the_last_value(
    per_series_artifact: Path, cache_home: Path,  # noqa: F811
) -> None:
    torch.set_num_threads(1)
    cache = cache_home / "smct" / "ablation"
    out = ablation.ablation_artifact(per_series_artifact, cache=cache)
    built = (out / "weights.pt").stat().st_mtime_ns
    assert ablation.ablation_artifact(per_series_artifact, cache=cache) == out
    assert (out / "weights.pt").stat().st_mtime_ns == built  # built once
    source = json.loads((per_series_artifact / "manifest.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["training"]["ablation_of"] == source["model_id"]
    assert manifest["scaling"] == source["scaling"] and manifest["model_config"]["skip"]
    walk = 50 + np.cumsum(np.random.default_rng(9).standard_normal(300))
    series = Series("walk", "generated", walk, season=1, horizon=6, eval_start=240)
    starts = origins(series, 2)
    # without the corrections of the mean (season, trend, regression, reverting): the last
    # value, to float32 precision at a level of 50
    bare = Runtime.load(
        out, adapt=AdaptConfig(mean=False, season=False, trend=False, revert=False)
    )
    one, multi = served.model(bare, series, starts, samples=400)
    np.testing.assert_allclose(one.median, walk[239:-1], atol=1e-3)
    # the median of 400 paths: within 4 of its standard errors (1.25 sd / 20) of the value
    # before the origin, 0.2 of the 80 % width (2.56 sd)
    width = multi.bounds[0.8][1] - multi.bounds[0.8][0]
    assert (np.abs(multi.median - walk[starts - 1, None]) < 0.2 * width).all()
    # with every correction on, a random walk's own regression finds little: close to it
    served_one, _ = served.model(Runtime.load(out), series, starts, samples=50)
    assert np.abs(served_one.median - walk[239:-1]).mean() < 0.1


def _result(name: str, model: dict[str, float], ets: dict[str, float],
            oracle: float | None = None) -> SeriesResult:
    """ARIMA scores 0.9 of ETS's CRPS, the ablation 1.2, Theta 1.1, the naive 2."""
    series = Series(name, "test", np.zeros(10), 1, 2, oracle_width80=oracle)
    others = {m: {**ets, "crps": f * ets["crps"]}
              for m, f in (("ARIMA", 0.9), ("ablation", 1.2), ("Theta", 1.1), ("naive", 2.0))}
    empty = MultiStep(np.zeros(1, np.int64), np.zeros((1, 2)), {}, np.zeros((1, 2)))
    one = {"model": model, "ETS": ets, **others}
    return SeriesResult(
        series, 1.0, {"ETS": "ANN", "ARIMA": "(0,1,0)", "Theta": "STM"}, one,
        {m: {"crps": s["crps"], "picp80": 0.8, "picp95": 0.95} for m, s in one.items()}, {},
        {m: empty for m in one}, 0.0,
    )


def test_acceptance_checks_report_their_figures() -> None:
    good = {"crps": 0.8, "picp80": 0.8, "picp95": 0.95, "rolling_picp80": 0.81,
            "mae_vs_last": 0.9, "width80_late": ORACLE_WIDTH80, "observed": 20}
    ets = {**good, "crps": 1.0}
    bad = {**good, "crps": 1.5, "picp80": 0.99, "rolling_picp80": 0.99, "mae_vs_last": 1.2,
           "width80_late": 2 * ORACLE_WIDTH80}
    found = checks.acceptance_checks(
        [_result("a", good, ets), _result("b", good, ets), _result("sine 12", bad, ets, 2.5)],
        {"refused": "a first death after zeros"},
    )

    def check(start: str) -> checks.Check:
        (only,) = [c for c in found if c.name.startswith(start)]
        return only

    assert len(found) == 9 and check("series the model forecasts").measured.startswith("3 of 4")
    assert not check("series the model forecasts").passed
    geo = check("one-step CRPS model/ETS, geometric mean")  # 0.8, 0.8 and 1.5
    assert geo.measured == f"{(0.8 * 0.8 * 1.5) ** (1 / 3):.3f}" == "0.986" and not geo.passed
    assert geo.peers == "ARIMA/ETS 0.900, ablation/ETS 1.200, naive/ETS 2.000"
    worst = check("one-step CRPS model/ETS, worst")
    assert worst.measured == "1.500 (sine 12)" and not worst.passed
    assert check("multistep").measured == "0.986"
    assert check("multistep").peers == "ARIMA/ETS 0.900, ablation/ETS 1.200"
    picp80 = check("PICP80")
    assert picp80.measured == "67%" and not picp80.passed
    # 15, 16 or 17 of 20 inside: 60 % of a calibrated forecaster's series
    assert picp80.peers == "ETS 100%, ARIMA 100%, ablation 100%; a calibrated forecaster 60%"
    assert check("rolling").measured == "67% (farthest 0.99, sine 12)"
    width = check("sine 12")
    assert width.measured == f"{2 * ORACLE_WIDTH80 / 2.5:.2f}" and not width.passed
    assert check("median").measured == "67% (worst 1.20, sine 12)"
    lenient = checks.acceptance_checks([_result("a", good, ets)], {})
    assert all(c.passed for c in lenient), [c for c in lenient if not c.passed]


def test_a_calibrated_forecaster_misses_a_narrow_coverage_range_on_short_series() -> None:
    # 19 of 20 inside is the only count in [0.92, 0.98]: 20 x 0.95^19 x 0.05
    assert checks.calibrated_share([20], 0.95, (0.92, 0.98)) == pytest.approx(
        20 * 0.95**19 * 0.05, rel=1e-12)
    # 15..17 of 20 at 0.8, by the binomial law's own sum
    exact = sum(math.comb(20, k) * 0.8**k * 0.2 ** (20 - k) for k in (15, 16, 17))
    assert checks.calibrated_share([20], 0.8, (0.75, 0.85)) == pytest.approx(exact, rel=1e-12)
    # 1,000 values: sd 0.0126, the range is four of them away: nearly every series
    assert checks.calibrated_share([1000], 0.8, (0.75, 0.85)) > 0.9999
    assert checks.calibrated_share([20, 1000], 0.95, (0.92, 0.98)) == pytest.approx(
        (checks.calibrated_share([20], 0.95, (0.92, 0.98))
         + checks.calibrated_share([1000], 0.95, (0.92, 0.98))) / 2)


def test_the_report_has_the_columns_and_ratios_of_every_method() -> None:
    good = {"crps": 0.8, "picp80": 0.8, "picp95": 0.95, "rolling_picp80": 0.81, "mpiw80": 1.0,
            "mase": 1.0, "mae_vs_last": 0.9, "width80_late": ORACLE_WIDTH80}
    results = [_result("a", good, {**good, "crps": 1.0})]
    one, multi = report.one_step_table(results), report.multi_step_table(results)
    for table in (one, multi):
        header = table.splitlines()[0]
        for column in ("CRPS model", "CRPS ablation", "CRPS ETS", "CRPS ARIMA", "model/ETS",
                       "model/ARIMA", "ARIMA/ETS", "model/ablation",
                       "PICP80 model / ablation / ETS / ARIMA"):
            assert f"| {column}" in header, (column, header)
        # model 0.8, ETS 1, ARIMA 0.9, ablation 1.2, Theta 1.1: the ratios and their
        # geometric means
        assert "| 0.800 | 0.889 | 0.900 | 0.667 | 0.727 |" in table
        assert "| **0.800** | **0.889** | **0.900** | **0.667** | **0.727** |" in table
    assert "| ANN | (0,1,0) | STM |" in one
    assert "CRPS Theta" in multi and "CRPS naive" in multi
    assert "model / ablation / ETS / ARIMA / Theta / naive" in report.point_table(results)
    # model 0.8 against ablation 1.2 on both tables: a third better than its random walk
    verdict = report.network_verdict(results)
    assert "one step ahead the trained network is 33.3% better than" in verdict
    assert "(model/ablation 0.667;" in verdict and "it (0.667)" in verdict


# --------------------------------------------------------------------------- the command


@needs_data("air-quality", "covid", "stock")
def test_quick_command_end_to_end(
    per_series_artifact: Path, tmp_path: Path, cache_home: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))  # where the ablation is kept
    out = tmp_path / "quality.md"
    res = CliRunner().invoke(app, [
        "quality", "--quick", "--artifact", str(per_series_artifact), "--output", str(out),
    ])
    assert res.exit_code == 0, res.output
    for name in ("air T", "GE close", "covid New York, New York", "co2", "elnino",
                 "macro realgdp", "sine 12"):
        assert f"| {name} |" in res.output
    assert "| model/ARIMA | ARIMA/ETS | model/ablation |" in res.output
    model_id = json.loads((per_series_artifact / "manifest.json").read_text())["model_id"]
    assert list((cache_home / "smct" / "ablation").glob(f"{model_id[:32]}-v*/manifest.json"))
    verdicts = re.findall(r"\| (PASS|FAIL) \|$", res.output, flags=re.M)
    assert len(verdicts) == 9  # one generated series in the quick suite
    text = out.read_text()
    headings = [line for line in text.splitlines() if line.startswith("`smct quality --quick")]
    assert len(headings) == 5 and all(TABLE_HEADING.match(line) for line in headings)
    by_step = text[text.index("### Coverage by step") :]
    assert "| step | model PICP80 | model MPIW80 | ablation PICP80 |" in by_step
    assert "\n| 1 | " in by_step and "\n| 12 | " in by_step and "\n| 13 | " not in by_step
    figures = sorted((tmp_path / "figures" / "quality").glob("*.png"))
    assert len(figures) == 7 and all(f.stat().st_size > 10_000 for f in figures)
    assert "](figures/quality/hourly.png)" in text and "](figures/quality/weekly.png)" in text
    # --no-write prints the tables and writes nothing; --adapt-off switches corrections off in
    # the model and its ablation, and the heading says so
    loaded = []
    real_load = Runtime.load

    def load(*args: Any, **kwargs: Any) -> Runtime:
        loaded.append(kwargs.get("adapt"))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(Runtime, "load", load)
    res = CliRunner().invoke(app, ["quality", "--quick", "--no-write", "--artifact",
                                   str(per_series_artifact), "--output", str(tmp_path / "x.md"),
                                   "--adapt-off", "season,trend"])
    assert res.exit_code == 0 and not (tmp_path / "x.md").exists()
    assert "--adapt-off season,trend`" in res.output
    off = AdaptConfig(season=False, trend=False)
    assert loaded == [off, off]


def test_adapt_off_names_the_corrections_it_knows() -> None:
    from cli.quality import _adapt_off

    assert _adapt_off(None) is None
    assert _adapt_off("mean, bound") == AdaptConfig(mean=False, bound=False)
    with pytest.raises(typer.BadParameter, match="unknown correction.*forget"):
        _adapt_off("mean,forget")


def test_quick_command_names_a_missing_artifact(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["quality", "--quick", "--artifact", str(tmp_path / "none")])
    assert res.exit_code == 2 and "error:" in res.output


def test_the_report_keeps_the_panels_section_of_the_one_it_replaces(tmp_path: Path) -> None:
    from training.quality.report import write

    path = tmp_path / "quality.md"
    write(path, "# Q", "old body")
    assert path.read_text() == "# Q\n\nold body\n"
    path.write_text(path.read_text() + "\n## Panels\n\n| panel |\n")
    write(path, "# Q", "new body")
    assert path.read_text() == "# Q\n\nnew body\n\n## Panels\n\n| panel |\n"
