"""Forecast metrics from predictive samples: mse, PICP, MPIW, CRPS, dist-mse (paper section 4).

Conventions: ``samples`` have the sample axis LAST, shape (..., N); the truth ``y`` has the
leading shape (...). Intervals are the equal-tailed sample quantiles at (1 - level) / 2 and
(1 + level) / 2, derived in one place (:func:`interval_bounds`). Positions where ``y`` is NaN
are left out of every average. Inputs are numpy arrays; results are python floats.

Alignment: ``samples[..., n]`` must be draws of the very observation ``y[...]`` - the law of
X_{t+1} scored against X_{t+1}. The paper's published code compared the predictive law of
X_{t+1} with X_t (an off-by-one shift), which inflates or deflates PICP and mse in ways that say
nothing about calibration. Shift the *truth* to the forecast step before calling these
functions, never the samples; ``x_prev`` of :func:`dist_mse` is the conditioning value X_t.

Shape legend: S windows, H horizon, F features, N samples.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scoringrules as sr

from timeseries.series import SyntheticTruth

LEVELS: tuple[float, ...] = (0.8, 0.95)


def _check(samples: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Float arrays and the mask of observed positions; the shapes must line up."""
    samples = np.asarray(samples, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if samples.ndim < 1 or samples.shape[:-1] != y.shape:
        raise ValueError(
            f"samples (..., N) must match y (...): got samples {samples.shape}, y {y.shape}"
        )
    if samples.shape[-1] < 1:
        raise ValueError("samples need at least one draw on the last axis")
    observed = np.isfinite(y)
    if not observed.any():
        raise ValueError("y has no finite value to score")
    return samples, y, observed


def _level_key(level: float) -> str:
    """Dictionary key of a level: 0.8 -> "0.8", 0.95 -> "0.95"."""
    return f"{level:g}"


def interval_bounds(samples: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Equal-tailed central interval of probability ``level``: samples (..., N) -> lo, hi (...)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(np.asarray(samples, dtype=np.float64), [tail, 1.0 - tail], axis=-1)
    return lo, hi


def mse(mean: np.ndarray, y: np.ndarray) -> float:
    """Mean squared error of a point forecast ``mean`` (...) against ``y`` (...)."""
    mean = np.asarray(mean, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if mean.shape != y.shape:
        raise ValueError(f"mean and y must have the same shape, got {mean.shape} and {y.shape}")
    observed = np.isfinite(y)
    return float(np.mean(np.square(mean - y)[observed]))


def picp(samples: np.ndarray, y: np.ndarray, level: float) -> float:
    """Prediction interval coverage probability: share of ``y`` inside the ``level`` interval."""
    samples, y, observed = _check(samples, y)
    lo, hi = interval_bounds(samples, level)
    return float(np.mean(((lo <= y) & (y <= hi))[observed]))


def mpiw(samples: np.ndarray, level: float) -> float:
    """Mean prediction interval width of the ``level`` interval, in the units of the samples."""
    lo, hi = interval_bounds(samples, level)
    return float(np.mean(hi - lo))


def _mean_abs_diff(samples: np.ndarray) -> np.ndarray:
    """sum_{i,j} |x_i - x_j| / N^2 over the last axis in O(N log N): (..., N) -> (...)."""
    ordered = np.sort(samples, axis=-1)
    n = ordered.shape[-1]
    rank_weight = 2.0 * np.arange(1, n + 1) - n - 1  # (N,)
    return 2.0 * (ordered @ rank_weight) / n**2


def crps(samples: np.ndarray, y: np.ndarray, *, fair: bool = False) -> float:
    """Mean CRPS of the sample law (scoringrules.crps_ensemble, "qd" estimator, m_axis=-1).

    The default scores the empirical distribution of the N draws exactly (O(N log N)).
    ``fair=True`` removes its finite-ensemble bias, E|X - X'| / (2N), by the same correction
    as scoringrules' "fair" estimator, whose own (..., N, N) implementation is too large.
    """
    samples, y, observed = _check(samples, y)
    scores = np.asarray(
        sr.crps_ensemble(
            np.where(observed, y, 0.0), samples, m_axis=-1, estimator="qd", backend="numpy"
        )
    )
    if fair:
        n = samples.shape[-1]
        if n < 2:
            raise ValueError("the fair CRPS needs at least two samples")
        scores = scores - _mean_abs_diff(samples) / (2.0 * (n - 1))
    return float(np.mean(scores[observed]))


def picp_per_step(samples: np.ndarray, y: np.ndarray, level: float) -> np.ndarray:
    """Coverage per forecast step: samples (S, H, F, N), y (S, H, F) -> (H,) float64."""
    samples, y, observed = _check(samples, y)
    if y.ndim != 3:
        raise ValueError(f"picp_per_step needs y of shape (S, H, F), got {y.shape}")
    lo, hi = interval_bounds(samples, level)  # (S, H, F)
    inside = ((lo <= y) & (y <= hi)) & observed
    counts = observed.sum(axis=(0, 2))  # (H,)
    with np.errstate(invalid="ignore", divide="ignore"):
        return inside.sum(axis=(0, 2)) / counts


def dist_mse(samples: np.ndarray, x_prev: np.ndarray, truth: SyntheticTruth) -> float:
    """Paper 4.2 dist-mse of draws of X_{t+1} (..., N) given X_t = ``x_prev`` (...).

    p mean((x - alpha x_prev)^2) + (1 - p) mean((x - beta x_prev)^2), averaged over samples
    and positions; Model I (beta = alpha, p = 1) reduces to mean((x - alpha x_prev)^2). The
    true predictive scores sigma2 (0.5) for Model I and about 0.35 for Model II.
    """
    samples, x_prev, observed = _check(samples, x_prev)
    x_prev = x_prev[..., None]  # (..., 1)
    err_alpha = np.mean(np.square(samples - truth.alpha * x_prev), axis=-1)  # (...)
    err_beta = np.mean(np.square(samples - truth.beta * x_prev), axis=-1)  # (...)
    per_position = truth.p * err_alpha + (1.0 - truth.p) * err_beta
    return float(np.mean(per_position[observed]))


def summarize(
    samples: np.ndarray,
    y: np.ndarray,
    *,
    x_prev: np.ndarray | None = None,
    truth: SyntheticTruth | None = None,
    levels: tuple[float, ...] = LEVELS,
    mean: np.ndarray | None = None,
) -> dict[str, Any]:
    """All metrics of samples (..., N) against y (...), as a JSON-ready dict.

    Keys: "mse" (of ``mean``, default the sample mean), "dist_mse" (None without ``truth`` and
    ``x_prev``), "picp" and "mpiw" ({"0.8": .., "0.95": ..}), "crps".
    """
    samples, y, _ = _check(samples, y)
    point = samples.mean(axis=-1) if mean is None else mean
    dist = None
    if truth is not None:
        if x_prev is None:
            raise ValueError("dist_mse needs x_prev (the conditioning values X_t) with truth")
        dist = dist_mse(samples, x_prev, truth)
    return {
        "mse": mse(point, y),
        "dist_mse": dist,
        "picp": {_level_key(lv): picp(samples, y, lv) for lv in levels},
        "mpiw": {_level_key(lv): mpiw(samples, lv) for lv in levels},
        "crps": crps(samples, y),
    }
