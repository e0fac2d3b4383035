"""Tests of training/metrics.py against known distributions (fixed seeds, stated tolerances)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scoringrules as sr

from timeseries.series import SyntheticTruth
from training.datasets.synthetic import generate_synthetic
from training.metrics import (
    LEVELS,
    crps,
    dist_mse,
    interval_bounds,
    mpiw,
    mse,
    picp,
    picp_per_step,
    summarize,
)


def _gaussian_case(
    n_pos: int, n_samples: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions with means mu (S,), samples (S, N) from N(mu, 1) and truth y (S,) ~ N(mu, 1)."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(0.0, 3.0, n_pos)
    samples = mu[:, None] + rng.standard_normal((n_pos, n_samples))
    y = mu + rng.standard_normal(n_pos)
    return mu, samples, y


def test_interval_bounds_are_equal_tailed_quantiles() -> None:
    samples = np.tile(np.arange(101.0), (2, 1))  # (2, 101): quantile q is 100 q exactly
    lo, hi = interval_bounds(samples, 0.95)
    assert lo.shape == hi.shape == (2,)
    assert np.allclose(lo, 2.5) and np.allclose(hi, 97.5)
    with pytest.raises(ValueError, match="level"):
        interval_bounds(samples, 1.5)


@pytest.mark.parametrize("level", LEVELS)
def test_picp_of_the_true_law_matches_the_level(level: float) -> None:
    _, samples, y = _gaussian_case(n_pos=10_000, n_samples=500)
    # Coverage of 10,000 independent positions: binomial std sqrt(0.95 * 0.05 / 10,000) =
    # 0.0022 (0.004 at 0.8); the interval from 500 draws shifts the expected coverage by
    # O(1/500). Tolerance 0.015 is > 3.5 std plus that bias.
    assert abs(picp(samples, y, level) - level) < 0.015


def test_mpiw_of_standard_normal() -> None:
    samples = np.random.default_rng(1).standard_normal((2000, 2000))
    # 2 x 1.959964 = 3.919928. Each 2.5 % / 97.5 % sample quantile of 2000 draws has std
    # sqrt(0.025 * 0.975 / 2000) / phi(1.96) ~ 0.06; averaged over 2000 rows ~ 0.002 per
    # bound, so 0.02 is > 5 std.
    assert abs(mpiw(samples, 0.95) - 3.919928) < 0.02
    assert abs(mpiw(samples, 0.8) - 2 * 1.281552) < 0.02


def _crps_gaussian(y: np.ndarray) -> float:
    """Closed-form mean CRPS of N(0, 1) at y: y (2 Phi(y) - 1) + 2 phi(y) - 1 / sqrt(pi)."""
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(y / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * y**2) / math.sqrt(2.0 * math.pi)
    return float(np.mean(y * (2.0 * cdf - 1.0) + 2.0 * pdf - 1.0 / math.sqrt(math.pi)))


def test_crps_matches_the_gaussian_closed_form() -> None:
    rng = np.random.default_rng(2)
    y = rng.standard_normal(1000) * 1.5
    samples = rng.standard_normal((1000, 2000))
    exact = _crps_gaussian(y)  # about 0.7 for this spread of y
    # Empirical-law CRPS is biased by E|X - X'| / (2N) = 1 / (N sqrt(pi)) ~ 3e-4 with N = 2000;
    # its Monte Carlo error averaged over 1000 positions is ~ 1e-3. Tolerance 0.01.
    assert abs(crps(samples, y) - exact) < 0.01
    assert abs(crps(samples, y, fair=True) - exact) < 0.01
    # The fair correction matches scoringrules' own (quadratic-memory) "fair" estimator.
    small = samples[:50, :300]
    reference = sr.crps_ensemble(y[:50], small, estimator="fair", backend="numpy").mean()
    assert crps(small, y[:50], fair=True) == pytest.approx(float(reference), rel=1e-9)
    # A sharper, wrong forecast scores worse.
    assert crps(0.3 * samples + 1.0, y) > exact + 0.1


def test_dist_mse_of_the_true_predictive() -> None:
    rng = np.random.default_rng(3)
    x, truth = generate_synthetic(1, n=500, seed=3)  # (500, 25, 1)
    x_prev = x[:, :-1, 0].astype(np.float64)  # (500, 24), X_t
    samples = truth.sample(x_prev, 100, rng)  # (500, 24, 100), draws of X_{t+1}
    # 1.2 M squared Gaussian errors: std 0.5 sqrt(2 / 1.2e6) ~ 6e-4; tolerance 0.01.
    assert abs(dist_mse(samples, x_prev, truth) - 0.5) < 0.01
    # An overconfident forecaster (all samples on the mean) gets dist-mse ~ 0, far from 0.5.
    point = np.repeat(truth.mean(x_prev)[..., None], 100, axis=-1)
    assert dist_mse(point, x_prev, truth) < 1e-12
    two = SyntheticTruth.paper(2)
    x2, _ = generate_synthetic(2, n=500, seed=4)
    prev2 = x2[:, :-1, 0].astype(np.float64)
    samples2 = two.sample(prev2, 100, rng)
    assert abs(dist_mse(samples2, prev2, two) - two.dist_mse_truth(prev2)) < 0.01


def test_shifted_truth_bug_changes_picp_and_mse() -> None:
    """The paper's code scored the law of X_{t+1} against X_t; that must look different."""
    rng = np.random.default_rng(5)
    x, truth = generate_synthetic(1, n=1000, seed=5)
    x = x[..., 0].astype(np.float64)  # (1000, 25)
    samples = truth.sample(x[:, :-1], 400, rng)  # (1000, 24, 400): law of X_{t+1} | X_t
    aligned, shifted = x[:, 1:], x[:, :-1]  # X_{t+1} (right) and X_t (the bug)
    # Binomial std of the aligned PICP over 24,000 positions ~ 0.0014 (positions are
    # dependent within a sequence, so allow 0.015). The shifted truth X_t sits only
    # 0.2 X_t from the predictive centre, so its coverage is ~ 1 and its mse ~ 0.04.
    assert abs(picp(samples, aligned, 0.95) - 0.95) < 0.015
    assert picp(samples, shifted, 0.95) > 0.99
    assert abs(mse(samples.mean(-1), aligned) - 0.5) < 0.03
    assert mse(samples.mean(-1), shifted) < 0.1


def test_picp_per_step_and_missing_truth() -> None:
    rng = np.random.default_rng(6)
    samples = rng.standard_normal((400, 5, 2, 300))  # (S, H, F, N)
    y = rng.standard_normal((400, 5, 2))  # (S, H, F)
    y[:, 4, :] *= 3.0  # the last step is badly calibrated
    y[0, 0, 0] = np.nan  # missing observations are ignored
    per_step = picp_per_step(samples, y, 0.95)
    assert per_step.shape == (5,)
    # 800 positions per step: binomial std 0.008; tolerance 0.035 (> 4 std).
    assert np.all(np.abs(per_step[:4] - 0.95) < 0.035)
    assert per_step[4] < 0.7
    assert np.isfinite(picp(samples, y, 0.8)) and np.isfinite(crps(samples, y))
    with pytest.raises(ValueError, match=r"\(S, H, F\)"):
        picp_per_step(samples[0], y[0], 0.95)


def test_summarize_keys_and_options() -> None:
    mu, samples, y = _gaussian_case(n_pos=2000, n_samples=300, seed=7)
    out = summarize(samples, y)
    assert set(out) == {"mse", "dist_mse", "picp", "mpiw", "crps"}
    assert out["dist_mse"] is None
    assert set(out["picp"]) == set(out["mpiw"]) == {"0.8", "0.95"}
    assert all(isinstance(v, float) for v in (out["mse"], out["crps"], *out["picp"].values()))
    assert abs(out["mse"] - 1.0) < 0.1  # Var(y - mu) = 1, std of the estimate ~ 0.03
    assert summarize(samples, y, mean=mu)["mse"] == pytest.approx(mse(mu, y))
    truth = SyntheticTruth.paper(1)
    x_prev = (mu / truth.alpha)[:, None]  # (S, 1), so alpha x_prev = mu
    with_truth = summarize(samples[:, None], y[:, None], x_prev=x_prev, truth=truth)
    assert abs(with_truth["dist_mse"] - 1.0) < 0.02  # unit-variance samples around alpha x_prev
    with pytest.raises(ValueError, match="x_prev"):
        summarize(samples, y, truth=truth)
    with pytest.raises(ValueError, match="must match"):
        summarize(samples, y[:-1])
