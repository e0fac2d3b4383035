"""Per-series online adaptation (model/series/adaptation.py): the EM of the observation scale and
the adaptive conformal correction against known answers, and both in the runtime."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.special import ndtri
from scipy.stats import norm

from model.filtering.predictive import Mixture
from model.runtime.runtime import Runtime
from model.series.adaptation import OFF, AdaptConfig
from model.series.coverage import ALPHA_MAX, ALPHA_MIN, effective_alphas, update_alpha
from model.series.spread import MAX_STAT, PRIOR_WEIGHT, spread_statistic, update_spread

W = np.array([[0.5, 0.3, 0.2]])
MU = np.array([[[-1.0], [0.0], [2.0]]])
BASE = np.array([0.25])  # the trained Sigma_obs (a variance)
LAW = Mixture(W, MU, np.sqrt(BASE))


def _draw(rng: np.random.Generator, n: int, factor: float) -> np.ndarray:
    """n values of the law LAW scaled about its mean by `factor`."""
    comp = rng.choice(3, size=n, p=W[0])
    y = MU[0, comp, 0] + np.sqrt(BASE[0]) * rng.standard_normal(n)
    mean = float(LAW.moments()[0][0, 0])
    return mean + factor * (y - mean)


def test_the_scaled_law() -> None:
    """`Mixture.scaled` is the law of m + f (Y - m): its CDF at m + f u is Y's at m + u, its
    mean stays, its variance is f^2 times and its mean absolute deviation f times; the
    statistic's mean under it is f (200k draws: a standard error of ~0.2 %)."""
    mean, var = LAW.moments()
    assert float(mean[0, 0]) == pytest.approx(0.5 * -1 + 0.3 * 0 + 0.2 * 2)
    f = np.array([[1.7]])
    big = LAW.scaled(f)
    u = np.array([[[-2.0], [0.1], [3.0]]])
    np.testing.assert_allclose(big.cdf(mean[:, None] + 1.7 * u), LAW.cdf(mean[:, None] + u))
    big_mean, big_var = big.moments()
    np.testing.assert_allclose(big_mean, mean)
    np.testing.assert_allclose(big_var, 1.7**2 * var)
    _, mad = LAW.mean_abs_dev()
    np.testing.assert_allclose(big.mean_abs_dev()[1], 1.7 * mad)
    y = _draw(np.random.default_rng(0), 200_000, 1.7)
    assert float(np.abs(y - mean[0, 0]).mean()) == pytest.approx(1.7 * mad[0, 0], rel=0.01)
    stat = spread_statistic(np.repeat(mean, len(y), 0), np.repeat(mad, len(y), 0), y[:, None])
    assert float(stat.mean()) == pytest.approx(1.7, rel=0.01)


@pytest.mark.parametrize("truth", [0.3, 1.0, 2.0])
def test_online_estimate_tracks_the_true_factor(truth: float) -> None:
    """Online, with forgetting 0.995 (memory 200 steps): after 4,000 steps the factor is within
    15 % of the truth. Its relative standard error at an effective sample of ~200 is
    sd(a) / sqrt(200) / s: about 5 % for a Gaussian (sd(|z|) / E|z| = 0.76), a little more for
    this three-bump law."""
    rng = np.random.default_rng(1)
    mean, mad = LAW.mean_abs_dev()
    s, weight = np.ones((1, 1)), np.array([PRIOR_WEIGHT])
    for y in _draw(rng, 4000, truth):
        s, weight = update_spread(s, weight, spread_statistic(mean, mad, np.array([[y]])), 0.995)
    assert float(s[0, 0]) == pytest.approx(truth, rel=0.15)
    assert float(weight[0]) == pytest.approx(1 / (1 - 0.995), rel=1e-3)


def test_default_memory_follows_noise_that_triples() -> None:
    """With the default forgetting (memory 1 / (1 - 0.9) = 10 steps), 30 steps after the noise
    of 400 series triples their mean factor is within 6 % of 3: its expected lag is
    2 x 0.9^30 = 0.08 and its standard error about 0.03 (a factor's relative sd ~0.17 at an
    effective sample of ~19). A memory of 50 steps (0.98) would still be near 1.9."""
    rng = np.random.default_rng(3)
    n_series, forget = 400, AdaptConfig().forget
    mean, mad = (np.repeat(a, n_series, 0) for a in LAW.mean_abs_dev())
    s, weight = np.ones((n_series, 1)), np.full(n_series, PRIOR_WEIGHT)
    for factor in [1.0] * 300 + [3.0] * 30:
        y = _draw(rng, n_series, factor)[:, None]
        s, weight = update_spread(s, weight, spread_statistic(mean, mad, y), forget)
    assert float(s.mean()) == pytest.approx(3.0, rel=0.06)


def test_one_outlier_moves_the_factor_by_a_bounded_amount() -> None:
    mean, mad = LAW.mean_abs_dev()
    s, weight = np.ones((1, 1)), np.array([20.0])
    new, _ = update_spread(s, weight, spread_statistic(mean, mad, np.array([[1e6]])), 0.98)
    assert 1.0 < float(new[0, 0]) <= 1.0 + MAX_STAT / (0.98 * 20.0 + 1.0) + 1e-12


def test_aci_miss_rate_obeys_its_bound_and_converges() -> None:
    """A law twice too narrow (N(0, 1) issued, N(0, 4) seen): the miss rate over T steps is
    within |alpha_T - alpha_0| / (gamma T) of alpha (Gibbs and Candes' bound; exact here,
    where alpha_t stays inside ALPHA_RANGE), and over 5,000 steps near 0.2."""
    rng = np.random.default_rng(2)
    gamma, nominal = 0.02, np.array([0.2])
    alpha = nominal[None].copy()
    start, misses, low, n = alpha.copy(), 0, 0, 5000
    for y in 2.0 * rng.standard_normal(n):
        low += int(alpha[0, 0] < ALPHA_MIN and abs(y) > norm.ppf(1 - ALPHA_MIN / 2))
        half = norm.ppf(1 - np.clip(alpha[0, 0], ALPHA_MIN, ALPHA_MAX) / 2)
        missed = np.array([[abs(y) > half]])
        misses += int(missed[0, 0])
        alpha = update_alpha(alpha, nominal, missed, gamma)
    rate = misses / n
    # where alpha_t < ALPHA_MIN the issued 99.9 % interval may miss where the rule's infinite
    # one would not: count those misses apart
    assert abs(rate - 0.2) <= abs(float(alpha[0, 0] - start[0, 0])) / (gamma * n) + low / n
    assert rate == pytest.approx(0.2, abs=0.01)
    # the interval it settles on is the true law's 80 % one: alpha_t near 2 (1 - Phi(1.28 * 2))
    assert float(alpha[0, 0]) == pytest.approx(2 * norm.sf(2 * norm.ppf(0.9)), abs=0.02)


def test_effective_alphas() -> None:
    levels = np.array([[0.8, 0.95], [np.nan, np.nan], [0.8, np.nan]], np.float32)
    alphas = np.array([[0.3, 0.1], [np.nan, np.nan], [0.1, np.nan]], np.float32)
    got = effective_alphas(levels, alphas, [0.8, 0.95, 0.9, 0.5])
    np.testing.assert_allclose(got[0, :2], [0.3, 0.1], rtol=1e-6)
    np.testing.assert_allclose(got[1], [0.2, 0.05, 0.1, 0.5], rtol=1e-12)
    # 0.9 lies between 0.8 and 0.95: its logit shift is interpolated, so it stays between
    assert 0.1 < got[0, 2] < 0.3 and got[0, 3] > 0.5  # 0.5: the shift of 0.8 (narrower)
    logit = np.log(got[2, 3] / (1 - got[2, 3])) - np.log(1.0)
    assert logit == pytest.approx(np.log(0.1 / 0.9) - np.log(0.2 / 0.8), rel=1e-5)
    with pytest.raises(ValueError, match="forget"):
        AdaptConfig(forget=1.0)


def test_effective_alphas_interpolate_each_series_as_np_interp() -> None:
    """Batched, against the definition row by row: a monitored level takes its alpha; another
    the logit shift of the monitored ones interpolated in the level by np.interp (the nearest
    one's outside them); none monitored: 1 - level. Levels in any order, unused slots NaN."""
    rng = np.random.default_rng(3)
    b, k = 200, 4
    levels = rng.choice([0.5, 0.8, 0.9, 0.95, 0.99], size=(b, k))
    for row in levels:  # distinct levels per series, some slots unused
        _, first = np.unique(row, return_index=True)
        row[np.setdiff1d(np.arange(k), first)] = np.nan
    levels[rng.random((b, k)) < 0.3] = np.nan
    alphas = np.where(np.isnan(levels), np.nan, rng.uniform(0.005, 0.6, (b, k)))
    asked = [0.5, 0.6, 0.8, 0.85, 0.95, 0.97, 0.995]
    logit = lambda p: np.log(p) - np.log1p(-p)  # noqa: E731
    expected = np.empty((b, len(asked)))
    for i in range(b):
        keep = np.isfinite(levels[i])
        lv, al = levels[i][keep], alphas[i][keep]
        order = np.argsort(lv)
        lv, al = lv[order], al[order]
        for j, a in enumerate(asked):
            if not keep.any():
                expected[i, j] = 1.0 - a
            elif np.isclose(lv, a, rtol=0, atol=1e-9).any():
                expected[i, j] = al[np.isclose(lv, a, rtol=0, atol=1e-9)][0]
            else:
                shift = np.interp(a, lv, logit(al) - logit(1.0 - lv))
                expected[i, j] = 1.0 / (1.0 + np.exp(-(logit(1.0 - a) + shift)))
    got = effective_alphas(levels, alphas, asked)
    np.testing.assert_allclose(got, np.clip(expected, ALPHA_MIN, ALPHA_MAX), rtol=1e-9)
    assert (~np.isfinite(levels)).all(axis=1).any()  # every case is met: none monitored,
    assert np.isin(levels, [0.8, 0.95]).any()  # an asked level monitored, and one interpolated


def _ar(n: int, length: int, sd: float, seed: int) -> list[np.ndarray]:
    """n AR(1) paths X_t = 0.8 X_{t-1} + N(0, sd^2): the test model learnt sd^2 = 0.5."""
    rng = np.random.default_rng(seed)
    x = np.zeros((n, length))
    for t in range(1, length):
        x[:, t] = 0.8 * x[:, t - 1] + sd * rng.standard_normal(n)
    return [row[:, None] for row in x]


@pytest.mark.parametrize("sd", [0.25, 1.5])
def test_adapted_series_reach_nominal_coverage(artifact: Any, sd: float) -> None:
    """Series whose noise is 2.8 times narrower, or 2.1 times wider, than the model learnt: its
    80 % intervals cover about all or about half of them; adapted, 6 series x 300 observations
    (after 100 to learn from) are covered 0.8 +- 0.06 (the binomial standard error of 1,800
    correlated hits is ~ 0.01-0.02), with intervals as wide as the truth's."""
    series = _ar(6, 400, sd, seed=3)

    def run(adapt: AdaptConfig) -> tuple[float, float, Any]:
        rt = Runtime.load(artifact, backend="onnx", adapt=adapt)
        states = rt.create([s[:2] for s in series], levels=[0.8])
        out = rt.update(states, [s[2:] for s in series], [0.8])
        res = [r for _, rs in out for r in rs[98:]]
        cover = np.mean([r.covered[0.8] for r in res])
        width = np.mean([float(r.intervals[0.8][1][0] - r.intervals[0.8][0][0]) for r in res])
        return float(cover), float(width), out[0][0]

    cover_off, width_off, _ = run(OFF)
    cover_on, width_on, state = run(AdaptConfig())
    assert abs(cover_off - 0.8) > 0.1  # the unadapted model is far off here
    assert cover_on == pytest.approx(0.8, abs=0.06)
    narrower = sd < np.sqrt(0.5)
    # the true one-step 80 % interval of Gaussian innovations is 2.563 sd wide: adapted, within
    # 10 % of it (measured 0.98 and 1.02 of it; the unadapted model's 4.9 and 0.81)
    assert width_on == pytest.approx(2.0 * float(ndtri(0.9)) * sd, rel=0.1)
    assert (float(state.spread_factor[0]) < 1.0) == narrower
    assert state.cover_levels.tolist() == [np.float32(0.8)]


def test_forecasts_use_the_adapted_law(artifact: Any) -> None:
    """A forecast's samples are scaled about their mean at each step h by the series' factor to
    the power 1 / h: with factor 0.5 the first step's interval is exactly half as wide as the
    model's own (the same draws), the third's 0.5^(1/3) times, the mean stays, and factor 1 is
    the model as trained."""
    import dataclasses

    series = _ar(1, 300, 0.25, seed=4)
    plain = Runtime.load(artifact, backend="torch", adapt=OFF)
    spread = Runtime.load(artifact, backend="torch", adapt=AdaptConfig(coverage=False))
    (state,) = plain.create(series)
    half = dataclasses.replace(state, spread_factor=np.array([0.5], np.float32))
    (ref,) = plain.forecast([state], 3, [0.8], 2000, seed=0)
    (got,) = spread.forecast([half], 3, [0.8], 2000, seed=0)
    (same,) = spread.forecast([state], 3, [0.8], 2000, seed=0)
    width = lambda f: f.intervals[0.8][1] - f.intervals[0.8][0]  # noqa: E731
    fade = 0.5 ** (1.0 / np.arange(1, 4))[:, None]  # (H, O)
    np.testing.assert_allclose(width(got), fade * width(ref), rtol=1e-9)
    np.testing.assert_allclose(got.mean, ref.mean, rtol=1e-9, atol=1e-12)
    # a fresh state: factor 1 (scaled about the mean by 1.0: equal to the last bits)
    np.testing.assert_allclose(width(same), width(ref), rtol=1e-12)
