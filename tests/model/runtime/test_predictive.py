"""Mixture CDF, quantiles, density and CRPS against closed forms and Monte Carlo (fixed seeds)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import scoringrules as sr
from scipy.special import logsumexp
from scipy.stats import norm
from scipy.stats import t as student_t

from model.filtering import predictive
from model.filtering.predictive import Mixture, summarize_samples
from training.metrics import interval_bounds


def _mixture(b: int, p: int, o: int, seed: int = 0, own_sd: bool = False) -> Mixture:
    """b mixtures of p components; sds shared by the components (per target), or each
    component its own (ModelConfig.obs_scale)."""
    rng = np.random.default_rng(seed)
    logits = 2 * rng.standard_normal((b, p))
    w = np.exp(logits - logsumexp(logits, axis=-1, keepdims=True))
    sd = rng.uniform(0.2, 1.5, (b, p, o)) if own_sd else np.linspace(0.3, 1.0, o)
    return Mixture(w, rng.standard_normal((b, p, o)), sd)


def test_one_component_is_the_normal_law() -> None:
    m = Mixture(np.ones((1, 1)), np.full((1, 1, 1), 2.0), np.array([0.5]))
    probs = np.array([0.025, 0.1, 0.5, 0.975])
    expected = 2.0 + 0.5 * norm.ppf(probs)
    np.testing.assert_allclose(m.quantile(probs)[0, :, 0], expected, rtol=0, atol=1e-9)
    y = np.array([[2.7]])
    assert float(m.log_density(y)[0]) == pytest.approx(
        -0.5 * (0.7 / 0.5) ** 2 - math.log(0.5 * math.sqrt(2 * math.pi)), abs=1e-12
    )
    assert float(m.crps(y)[0, 0]) == pytest.approx(float(sr.crps_normal(2.7, 2.0, 0.5)), abs=1e-12)


@pytest.mark.parametrize("own_sd", [False, True])
def test_quantiles_invert_the_mixture_cdf(own_sd: bool) -> None:
    """Exact to QUANTILE_TOL in probability, for multimodal mixtures in the tails too."""
    m = _mixture(64, 100, 2, own_sd=own_sd)
    probs = np.array([0.001, 0.025, 0.1, 0.5, 0.9, 0.975, 0.999])
    q = m.quantile(probs)  # (64, 7, 2)
    err = np.abs(m.cdf(q) - probs.reshape(1, -1, 1)).max()
    assert err < predictive.QUANTILE_TOL
    assert bool((np.diff(q, axis=1) > 0).all())


@pytest.mark.parametrize("own_sd", [False, True])
def test_mixture_cdf_matches_a_reference_sum(own_sd: bool) -> None:
    """The vectorised CDF and density against a loop over the components (scipy's normal)."""
    m = _mixture(3, 7, 2, seed=4, own_sd=own_sd)
    y = np.random.default_rng(5).normal(size=(3, 4, 2))
    cdf, pdf = m.cdf_pdf(y)
    mu, sd = m.mu[:, None], m.sd[:, None]  # (3, 1, 7, 2)
    ref_cdf = sum(m.w[:, k, None, None] * norm.cdf(y, mu[:, :, k], sd[:, :, k]) for k in range(7))
    ref_pdf = sum(m.w[:, k, None, None] * norm.pdf(y, mu[:, :, k], sd[:, :, k]) for k in range(7))
    np.testing.assert_allclose(cdf, ref_cdf, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(pdf, ref_pdf, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("own_sd", [False, True])
def test_crps_matches_monte_carlo_and_pooling_is_accurate(own_sd: bool) -> None:
    m = _mixture(6, 300, 2, seed=1, own_sd=own_sd)
    y = np.random.default_rng(2).standard_normal((6, 2))
    pooled = m.crps(y)
    exact_limit = predictive.CRPS_MAX_COMPONENTS
    try:
        predictive.CRPS_MAX_COMPONENTS = 10**6
        exact = m.crps(y)
    finally:
        predictive.CRPS_MAX_COMPONENTS = exact_limit
    assert float(np.abs((pooled - exact) / exact).max()) < (1e-2 if own_sd else 5e-3)
    rng = np.random.default_rng(0)  # Monte Carlo: 200k draws, relative error ~ 0.3 %
    n = 200_000
    idx = np.stack([rng.choice(300, n, p=m.w[i]) for i in range(6)])
    rows = np.arange(6)[:, None]
    draws = m.mu[rows, idx] + m.sd[rows, idx] * rng.standard_normal((6, n, 2))
    mc = sr.crps_ensemble(y, draws, m_axis=1)
    np.testing.assert_allclose(exact, mc, rtol=0.02)


@pytest.mark.parametrize("own_sd", [False, True])
def test_log_density_is_log_sum_exp_of_components(own_sd: bool) -> None:
    m = _mixture(3, 10, 2, own_sd=own_sd)
    y = np.random.default_rng(3).standard_normal((3, 2))
    comp = norm.logpdf(y[:, None], m.mu, m.sd).sum(-1)  # (3, 10)
    np.testing.assert_allclose(m.log_density(y), logsumexp(np.log(m.w) + comp, axis=-1))


def test_sample_summaries_use_the_metrics_definition() -> None:
    samples = np.random.default_rng(0).normal(size=(2, 501, 3, 1))
    s = summarize_samples(samples, [0.8, 0.95], quantiles=[0.1])
    lo, hi = interval_bounds(np.moveaxis(samples, 1, -1), 0.95)
    np.testing.assert_allclose(s.intervals[0.95][0], lo, rtol=0, atol=1e-12)
    np.testing.assert_allclose(s.intervals[0.95][1], hi, rtol=0, atol=1e-12)
    np.testing.assert_allclose(s.median, np.median(samples, axis=1), rtol=0, atol=1e-12)
    np.testing.assert_allclose(s.quantiles[0.1], s.intervals[0.8][0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(s.mean, samples.mean(axis=1))


def test_median_and_quantiles_are_numpys_very_numbers() -> None:
    """The summaries read the median and quantiles off one sort of the samples: the numbers
    np.quantile gives, to the last bit (its rounding of the interpolation too), for an even
    and an odd sample count, two targets, and one step and target (where the samples' lanes
    are contiguous already: they are sorted in a copy, the samples left as they were)."""
    for n, h, o in ((1162, 4, 2), (501, 1, 1)):
        samples = np.random.default_rng(n).normal(size=(3, n, h, o)) * 7.0 + 3.0
        probs = [0.1, 0.25, 0.5, 0.9]
        kept = samples.copy()
        s = summarize_samples(samples, [0.8, 0.95], quantiles=probs)
        assert np.array_equal(samples, kept)  # sorted apart from the samples
        assert np.array_equal(s.median, np.quantile(samples, 0.5, axis=1))
        for q in probs:
            assert np.array_equal(s.quantiles[q], np.quantile(samples, q, axis=1))


def test_per_series_scales_and_probabilities() -> None:
    """Each mixture its own sd (B, O) and its own probabilities (B, Q): the same answers as
    the mixtures one at a time."""
    m = _mixture(3, 5, 2, seed=7)
    sd = np.array([[0.2, 0.5], [1.0, 2.0], [0.7, 0.1]])
    per = predictive.Mixture(m.w, m.mu, sd)
    probs = np.array([[0.1, 0.9], [0.025, 0.975], [0.4, 0.6]])
    y = np.random.default_rng(8).standard_normal((3, 2))
    q = per.quantile(probs)  # (3, 2, 2)
    for b in range(3):
        one = predictive.Mixture(m.w[b : b + 1], m.mu[b : b + 1], sd[b])
        np.testing.assert_allclose(q[b], one.quantile(probs[b])[0], rtol=0, atol=1e-9)
        np.testing.assert_allclose(per.crps(y)[b], one.crps(y[b : b + 1])[0], rtol=1e-12)
        np.testing.assert_allclose(
            per.log_density(y)[b], one.log_density(y[b : b + 1])[0], rtol=1e-12
        )
    err = np.abs(per.cdf(q.reshape(3, -1, 2)) - probs[:, :, None]).max()
    assert err < predictive.QUANTILE_TOL


def test_sample_summaries_at_per_series_tails() -> None:
    """`alphas` moves each series' and step's interval to its own tails: numpy's sample
    quantiles there."""
    samples = np.random.default_rng(1).normal(size=(2, 1001, 3, 2))
    alphas = np.random.default_rng(2).uniform(0.01, 0.5, size=(2, 3, 2))
    s = summarize_samples(samples, [0.8, 0.95], alphas=alphas)
    for b in range(2):
        for h in range(3):
            for j, lv in enumerate([0.8, 0.95]):
                a = round(alphas[b, h, j] / 2, 12)  # probabilities to 12 decimals, as levels
                lo, hi = np.quantile(samples[b, :, h], [a, 1 - a], axis=0)
                np.testing.assert_allclose(s.intervals[lv][0][b, h], lo, rtol=0, atol=1e-12)
                np.testing.assert_allclose(s.intervals[lv][1][b, h], hi, rtol=0, atol=1e-12)


@pytest.mark.parametrize("law", [norm, student_t(3)], ids=["normal", "t3"])
def test_bound_errors_are_the_monte_carlo_spread_of_the_bounds(law: Any) -> None:
    """400 forecasts of 1,000 iid samples of a known law: the standard error each reports for
    its interval bounds matches the spread of those bounds over the forecasts and the
    asymptotic sqrt(p (1 - p) / N) / f(q_p). The sd of 400 bounds is itself known to
    1 / sqrt(2 x 399) = 3.5 %, the mean of 400 reported errors (each from about 20 spacings)
    to about 1 %: 10 % is three of those sds."""
    reps, n = 400, 1000
    samples = law.rvs(size=(reps, n, 1, 1), random_state=np.random.default_rng(4))
    s = summarize_samples(samples, [0.8, 0.95])
    for level in (0.8, 0.95):
        for k, p in enumerate(((1 - level) / 2, (1 + level) / 2)):
            bound, error = s.intervals[level][k], s.errors[level][k]
            theory = math.sqrt(p * (1 - p) / n) / law.pdf(law.ppf(p))
            assert float(error.mean()) == pytest.approx(theory, rel=0.1)
            assert float(bound.std(ddof=1)) == pytest.approx(theory, rel=0.1)
    # four times the samples, half the error
    more = summarize_samples(law.rvs(size=(reps, 4 * n, 1, 1), random_state=5), [0.8])
    ratio = float(s.errors[0.8][1].mean() / more.errors[0.8][1].mean())
    assert ratio == pytest.approx(2.0, rel=0.1)
