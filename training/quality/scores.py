"""Scores of one-step and multistep forecasts, per point and per series, scale-free.

Every method hands its forecasts of the evaluation points over in one shape (`OneStep`,
`MultiStep`): a median, equal-tailed 80 % and 95 % bounds and the CRPS of each point, NaN where
the observation is missing. The scores divide by the series' scale, the in-sample MAE of the
seasonal naive over the history before the evaluation part (as MASE does), so that they can be
compared and averaged across series: CRPS, interval width and MAE of the median in those units.

Shapes: n evaluation points, N samples, K origins, H horizon.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri

LEVELS: tuple[float, float] = (0.8, 0.95)
ROLLING = 200  # observations of the rolling coverage (the last of the evaluation part)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@dataclass(frozen=True)
class OneStep:
    """One method's one-step forecasts of the n evaluation points: median (n,), bounds per
    level ((n,), (n,)), CRPS (n,) in the series' units (NaN where the value is missing)."""

    median: np.ndarray
    bounds: dict[float, tuple[np.ndarray, np.ndarray]]
    crps: np.ndarray


@dataclass(frozen=True)
class MultiStep:
    """One method's forecasts from K origins over H steps: median, bounds per level and CRPS,
    each (K, H) in the series' units; `origins` (K,) index the first forecast value."""

    origins: np.ndarray
    median: np.ndarray
    bounds: dict[float, tuple[np.ndarray, np.ndarray]]
    crps: np.ndarray


# --------------------------------------------------------------------------- laws


def gaussian_crps(mu: np.ndarray, sigma: np.ndarray, y: np.ndarray) -> np.ndarray:
    """CRPS of N(mu, sigma^2) at y, closed form (Gneiting & Raftery 2007):
    sigma (z (2 Phi(z) - 1) + 2 phi(z) - 1 / sqrt(pi)), z = (y - mu) / sigma; |y - mu| where
    sigma is 0. Broadcasts."""
    mu, sigma, y = (np.asarray(a, dtype=np.float64) for a in (mu, sigma, y))
    point = sigma == 0.0  # a point mass: the absolute error
    scale = np.where(point, 1.0, sigma)
    z = (y - mu) / scale
    pdf = _INV_SQRT_2PI * np.exp(-0.5 * z * z)
    law = scale * (z * (2.0 * ndtr(z) - 1.0) + 2.0 * pdf - 1.0 / math.sqrt(math.pi))
    return np.asarray(np.where(point, np.abs(y - mu), law))


def gaussian_bounds(
    mu: np.ndarray, sigma: np.ndarray, levels: tuple[float, ...] = LEVELS
) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    """Equal-tailed central intervals of N(mu, sigma^2) at each level."""
    out = {}
    for level in levels:
        z = float(ndtri(0.5 + level / 2.0))
        out[level] = (mu - z * sigma, mu + z * sigma)
    return out


def sample_crps(samples: np.ndarray, y: np.ndarray) -> np.ndarray:
    """CRPS of the empirical law of samples (..., N) at y (...), exactly:
    mean |X - y| - 1/2 mean |X - X'|, the second term from the sorted samples in O(N log N).
    NaN where y is NaN."""
    x = np.sort(np.asarray(samples, dtype=np.float64), axis=-1)
    y = np.asarray(y, dtype=np.float64)
    n = x.shape[-1]
    first = np.abs(x - y[..., None]).mean(axis=-1)
    rank_weight = 2.0 * np.arange(1, n + 1) - n - 1  # (N,)
    spread = 2.0 * (x @ rank_weight) / n**2  # mean |X - X'|
    return np.asarray(first - 0.5 * spread)


def sample_bounds(
    samples: np.ndarray, levels: tuple[float, ...] = LEVELS
) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    """Equal-tailed sample intervals over the last axis of samples (..., N) (numpy's linear
    quantiles, as model.filtering.predictive.summarize_samples)."""
    out = {}
    for level in levels:
        lo, hi = np.quantile(samples, [0.5 - level / 2.0, 0.5 + level / 2.0], axis=-1)
        out[level] = (lo, hi)
    return out


# --------------------------------------------------------------------------- per series


def future(values: np.ndarray, start: int, horizon: int) -> np.ndarray:
    """values[start : start + horizon], NaN past the end of the series: (H,)."""
    out = np.full(horizon, np.nan)
    part = values[start : start + horizon]
    out[: len(part)] = part
    return out


def naive_scale(history: np.ndarray, season: int) -> float:
    """In-sample MAE of the seasonal naive y_t = y_{t - season} over `history` (pairs with both
    values observed); the naive of lag 1 where the seasonal one has no pair or no error."""
    for lag in dict.fromkeys((season, 1)):
        diff = np.abs(history[lag:] - history[:-lag]) if len(history) > lag else np.array([])
        diff = diff[np.isfinite(diff)]
        if diff.size and diff.mean() > 0:
            return float(diff.mean())
    return 1.0


def last_values(values: np.ndarray, start: int) -> np.ndarray:
    """The last observed value before each point from `start` on: (T - start,), NaN before the
    first observation."""
    filled = np.asarray(values, dtype=np.float64).copy()
    for t in range(1, len(filled)):
        if not np.isfinite(filled[t]):
            filled[t] = filled[t - 1]
    return np.concatenate([[np.nan], filled[:-1]])[start:]


def picp(lo: np.ndarray, hi: np.ndarray, y: np.ndarray) -> float:
    """Share of the observed y inside [lo, hi] (NaN: left out)."""
    seen = np.isfinite(y)
    return float(np.mean((lo[seen] <= y[seen]) & (y[seen] <= hi[seen])))


def mpiw(lo: np.ndarray, hi: np.ndarray, y: np.ndarray) -> float:
    """Mean width of the intervals issued for the observed y."""
    seen = np.isfinite(y)
    return float(np.mean(hi[seen] - lo[seen]))


def mae(point: np.ndarray, y: np.ndarray) -> float:
    """Mean absolute error over the positions where both are finite."""
    err = np.abs(np.asarray(point) - np.asarray(y))
    return float(np.mean(err[np.isfinite(err)]))


def rolling_picp(lo: np.ndarray, hi: np.ndarray, y: np.ndarray, window: int = ROLLING) -> float:
    """Coverage over the last `window` observed values (all of them when fewer)."""
    seen = np.flatnonzero(np.isfinite(y))[-window:]
    return float(np.mean((lo[seen] <= y[seen]) & (y[seen] <= hi[seen])))


def one_step_scores(
    one: OneStep, y: np.ndarray, last: np.ndarray, scale: float, skip: int = 0
) -> dict[str, float]:
    """Scores of one method's one-step forecasts of y (n,): CRPS, the 80 % width and MASE over
    `scale`; PICP 80 and 95 %; the rolling PICP 80 of the last ROLLING values; the median's
    MAE over that of the last observed value `last` (n,). `width80_late` is the mean 80 %
    width, unscaled, of the points after the first `skip` (the oracle check); `observed` the
    count of observed values the PICPs are over."""
    lo80, hi80 = one.bounds[0.8]
    lo95, hi95 = one.bounds[0.95]
    seen = np.isfinite(y)
    late = seen & (np.arange(len(y)) >= skip)
    return {
        "crps": float(np.mean(one.crps[seen])) / scale,
        "picp80": picp(lo80, hi80, y),
        "picp95": picp(lo95, hi95, y),
        "mpiw80": mpiw(lo80, hi80, y) / scale,
        "mase": mae(one.median, y) / scale,
        "mae_vs_last": mae(one.median, y) / mae(last, y),
        "rolling_picp80": rolling_picp(lo80, hi80, y),
        "width80_late": float(np.mean((hi80 - lo80)[late])) if late.any() else math.nan,
        "observed": float(seen.sum()),
    }


def multi_step_scores(multi: MultiStep, truth: np.ndarray, scale: float) -> dict[str, float]:
    """Scores of forecasts from several origins against truth (K, H): mean CRPS over the
    observed values over `scale`, PICP 80 and 95 %."""
    seen = np.isfinite(truth)
    lo80, hi80 = multi.bounds[0.8]
    lo95, hi95 = multi.bounds[0.95]
    return {
        "crps": float(np.mean(multi.crps[seen])) / scale,
        "picp80": picp(lo80.ravel(), hi80.ravel(), truth.ravel()),
        "picp95": picp(lo95.ravel(), hi95.ravel(), truth.ravel()),
    }


def geometric_mean(ratios: list[float]) -> float:
    """exp(mean(log r)) of the finite, positive ratios (NaN when there is none)."""
    r = np.asarray([v for v in ratios if np.isfinite(v) and v > 0], dtype=np.float64)
    return float(np.exp(np.log(r).mean())) if r.size else math.nan
