"""Tests of training/datasets/synthetic.py: the laws of Models I and II, their splits, the
mixture of laws, and window scaling of the generated sets."""

from __future__ import annotations

import numpy as np
import pytest

from timeseries.series import SPLITS, Scaler, SyntheticTruth
from training.datasets import load_dataset
from training.datasets.synthetic import generate_synthetic


def _pairs(model: int) -> tuple[np.ndarray, np.ndarray, SyntheticTruth]:
    x, truth = generate_synthetic(model, n=20_000, seed=123)
    assert x.shape == (20_000, 25, 1) and x.dtype == np.float32
    x = x[..., 0].astype(np.float64)
    return x[:, :-1].ravel(), x[:, 1:].ravel(), truth  # 480,000 pairs (X_t, X_{t+1})


def _ols(u: np.ndarray, v: np.ndarray) -> tuple[float, float]:
    """Intercept and slope of v on u."""
    slope, intercept = np.polyfit(u, v, 1)
    return float(intercept), float(slope)


# Tolerances: 480,000 pairs with Var(X_t) ~ 1 give a slope standard error of about
# sigma / sqrt(480,000) ~ 0.001 and a residual-variance standard error of about
# sigma2 * sqrt(2 / 480,000) ~ 0.001 (a few times more with the serial dependence); 0.02 is
# therefore > 10 standard errors, while a wrong parameter (e.g. sigma = 0.5 instead of
# sigma2 = 0.5) would be off by far more.
def test_model_i_is_the_paper_ar1() -> None:
    prev, nxt, truth = _pairs(1)
    intercept, slope = _ols(prev, nxt)
    resid = nxt - intercept - slope * prev
    assert abs(slope - 0.8) < 0.02
    assert abs(intercept) < 0.02
    assert abs(resid.var() - 0.5) < 0.02
    assert truth == SyntheticTruth(alpha=0.8, beta=0.8, p=1.0, sigma2=0.5)


def test_model_ii_is_the_paper_mixture() -> None:
    prev, nxt, truth = _pairs(2)
    assert truth == SyntheticTruth(alpha=0.9, beta=0.6 * 0.9, p=0.7, sigma2=0.3)
    intercept, slope = _ols(prev, nxt)
    # E[X_{t+1} | X_t] = (p alpha + (1 - p) beta) X_t = 0.792 X_t; same 0.02 reasoning as above.
    assert abs(slope - (0.7 * 0.9 + 0.3 * 0.54)) < 0.02
    # Mixture signature: E[resid^2 | X_t] = sigma2 + p (1 - p) (alpha - beta)^2 X_t^2, i.e.
    # intercept 0.3 and slope 0.0272 against X_t^2. Standard errors: about 0.001 on both
    # (the squared residuals have variance ~ 2 sigma2^2); tolerances 0.02 and 0.006 are
    # > 5 of them, and a pure Gaussian AR(1) (slope 0) fails the second one.
    resid = nxt - intercept - slope * prev
    c0, c1 = _ols(prev**2, resid**2)
    assert abs(c0 - 0.3) < 0.02
    assert abs(c1 - 0.7 * 0.3 * (0.9 - 0.54) ** 2) < 0.006


def test_synthetic_dataset_splits_and_limit() -> None:
    data = load_dataset("synthetic-1", seed=7)
    assert (data.train.shape, data.val.shape, data.test.shape) == (
        (800, 25, 1),
        (100, 25, 1),
        (100, 25, 1),
    )
    assert data.history == 12 and data.target_dim == 1 and data.truth == SyntheticTruth.paper(1)
    assert data.scaler == Scaler.identity(1)
    again = load_dataset("synthetic-1", seed=7)
    assert np.array_equal(data.test, again.test)
    assert not np.array_equal(data.test, load_dataset("synthetic-1", seed=8).test)
    small = load_dataset("synthetic-2", seed=7, limit=80)
    assert [small.split(s).shape[0] for s in SPLITS] == [80, 10, 10]
    half = load_dataset("synthetic-2", seed=7, limit=400)
    assert [half.split(s).shape[0] for s in SPLITS] == [400, 50, 50]


def test_synthetic_mix_is_seeded_windowed_and_scaled_per_window() -> None:
    a, b = load_dataset("synthetic-mix", seed=0), load_dataset("synthetic-mix", seed=0)
    np.testing.assert_array_equal(a.train, b.train)
    assert not np.array_equal(a.train, load_dataset("synthetic-mix", seed=1).train)
    assert a.train.shape[1:] == (25, 1) and a.history == 12 and a.unistep_from == 12
    head = a.train[:, :12, 0]
    np.testing.assert_allclose(head.mean(axis=1), 0.0, atol=1e-5)
    # every window ends after every training window of its series (time-ordered splits)
    for split in ("val", "test"):
        for series in range(0, 200, 37):
            train_ends = a.window_index["train"][a.window_index["train"][:, 0] == series, 1]
            later = a.window_index[split][a.window_index[split][:, 0] == series, 1]
            assert later.size and train_ends.size and later.min() > train_ends.max()
    levels = np.abs(a.window_loc["train"][:, 0])
    assert levels.max() / max(np.median(levels), 1e-9) > 10  # many levels: only per window
    with pytest.raises(ValueError, match="unknown scaling 'global'"):
        load_dataset("synthetic-mix", scaling="global")


def test_synthetic_window_scaling_standardises_each_history() -> None:
    data = load_dataset("synthetic-1", scaling="window")
    head = data.train[:, :12, 0]
    np.testing.assert_allclose(head.mean(axis=1), 0.0, atol=1e-5)
    np.testing.assert_allclose(head.std(axis=1), 1.0, atol=1e-4)
    assert data.truth is None and data.unistep_from == 12
    with pytest.raises(ValueError, match="unknown scaling 'county'"):
        load_dataset("synthetic-1", scaling="county")
