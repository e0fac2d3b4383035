"""Mixture CDF, quantiles, density and CRPS against closed forms and Monte Carlo (fixed seeds)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scoringrules as sr
import torch

from model import predictive
from model.predictive import Mixture, summarize_samples
from training.metrics import interval_bounds


def _mixture(b: int, p: int, o: int, seed: int = 0) -> Mixture:
    gen = torch.Generator().manual_seed(seed)
    w = torch.softmax(2 * torch.randn(b, p, generator=gen, dtype=torch.float64), -1)
    mu = torch.randn(b, p, o, generator=gen, dtype=torch.float64)
    return Mixture(w, mu, torch.linspace(0.3, 1.0, o, dtype=torch.float64))


def test_one_component_is_the_normal_law() -> None:
    m = Mixture(
        torch.ones(1, 1, dtype=torch.float64),
        torch.full((1, 1, 1), 2.0, dtype=torch.float64),
        torch.tensor([0.5], dtype=torch.float64),
    )
    probs = torch.tensor([0.025, 0.1, 0.5, 0.975], dtype=torch.float64)
    expected = 2.0 + 0.5 * torch.special.ndtri(probs)
    torch.testing.assert_close(m.quantile(probs)[0, :, 0], expected, rtol=0, atol=1e-9)
    y = torch.tensor([[2.7]], dtype=torch.float64)
    assert float(m.log_density(y)) == pytest.approx(
        -0.5 * (0.7 / 0.5) ** 2 - math.log(0.5 * math.sqrt(2 * math.pi)), abs=1e-12
    )
    assert float(m.crps(y)) == pytest.approx(float(sr.crps_normal(2.7, 2.0, 0.5)), abs=1e-12)


def test_quantiles_invert_the_mixture_cdf() -> None:
    """Exact to QUANTILE_TOL in probability, for multimodal mixtures in the tails too."""
    m = _mixture(64, 100, 2)
    probs = torch.tensor([0.001, 0.025, 0.1, 0.5, 0.9, 0.975, 0.999], dtype=torch.float64)
    q = m.quantile(probs)  # (64, 7, 2)
    err = (m.cdf(q) - probs.view(1, -1, 1)).abs().max()
    assert float(err) < predictive.QUANTILE_TOL
    assert bool((q.diff(dim=1) > 0).all())


def test_crps_matches_monte_carlo_and_pooling_is_accurate() -> None:
    m = _mixture(6, 300, 2, seed=1)
    y = torch.randn(6, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    pooled = m.crps(y)
    exact_limit = predictive.CRPS_MAX_COMPONENTS
    try:
        predictive.CRPS_MAX_COMPONENTS = 10**6
        exact = m.crps(y)
    finally:
        predictive.CRPS_MAX_COMPONENTS = exact_limit
    assert float(((pooled - exact) / exact).abs().max()) < 5e-3
    rng = np.random.default_rng(0)  # Monte Carlo: 200k draws, relative error ~ 0.3 %
    n = 200_000
    idx = np.stack([rng.choice(300, n, p=m.w[i].numpy()) for i in range(6)])
    draws = m.mu.numpy()[np.arange(6)[:, None], idx] + m.sd.numpy() * rng.standard_normal((6, n, 2))
    mc = sr.crps_ensemble(y.numpy(), draws, m_axis=1)
    np.testing.assert_allclose(exact.numpy(), mc, rtol=0.02)


def test_log_density_is_log_sum_exp_of_components() -> None:
    m = _mixture(3, 10, 2)
    y = torch.randn(3, 2, dtype=torch.float64)
    comp = torch.distributions.Normal(m.mu, m.sd).log_prob(y.unsqueeze(1)).sum(-1)  # (3, 10)
    torch.testing.assert_close(m.log_density(y), torch.logsumexp(torch.log(m.w) + comp, -1))


def test_sample_summaries_use_the_metrics_definition() -> None:
    samples = np.random.default_rng(0).normal(size=(2, 501, 3, 1))
    s = summarize_samples(samples, [0.8, 0.95], quantiles=[0.1])
    lo, hi = interval_bounds(np.moveaxis(samples, 1, -1), 0.95)
    np.testing.assert_allclose(s.intervals[0.95][0], lo, rtol=0, atol=1e-12)
    np.testing.assert_allclose(s.intervals[0.95][1], hi, rtol=0, atol=1e-12)
    np.testing.assert_allclose(s.median, np.median(samples, axis=1), rtol=0, atol=1e-12)
    np.testing.assert_allclose(s.quantiles[0.1], s.intervals[0.8][0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(s.mean, samples.mean(axis=1))
