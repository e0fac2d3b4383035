"""A level shift at the end of a series' history, taken out of the history before the series is
created from it.

The per-series layer fits its level, mean, trend and spread on the whole history (model/series/
marginal.py, trend.py), and a series created a few steps after its level stepped holds the old
level: white noise whose level stepped by 5 standard deviations 5 steps before the end was
forecast 1.7 standard deviations off one step ahead and 3.4 six steps ahead, its 80 % intervals
covering 0.44. A local level follows such a step within a few steps; here the step is found in
the history and the values before it are moved by it, so that the history the series is
created from is at its new level throughout.

The step: for each k in K_MIN..K_MAX, the mean of the last k values against the mean of the
REF values before them, in standard errors (the noise's standard deviation from the median
absolute one-step difference, / 0.6745 / sqrt 2; missing values left out); the k of the largest.
It is taken where that statistic is beyond Z and beyond EXCEPTIONAL times the largest the same
comparison (the same k) reaches anywhere earlier in the history: a series that wanders (a random
walk, a persistent AR process, a trend) makes such comparisons large everywhere, and its end is
then nothing new. Measured on 200 seeded series each (205 values): 5-sd steps 5 and 15 steps
before the end found in all; white noise never shifted, random walks in 4.5 %, AR(1)s of 0.9 in
2 %; the default model's forecasts 5 steps after the step cover 0.76 at 80 % with medians 0.4
standard deviations off (15 steps after: 0.74, 0.2).

Shapes: T steps, F features, O targets.
"""

from __future__ import annotations

import numpy as np

K_MIN, K_MAX = 3, 24  # values after a step the test looks for
REF = 48  # values before them it compares with
Z = 4.5  # standard errors a step needs
EXCEPTIONAL = 1.5  # times the largest the same comparison reaches earlier
MIN_VALUES = 4 * K_MAX  # the history a test needs
_MAD_SD = 0.6745 * np.sqrt(2.0)  # median |difference| of unit white noise


def recent_shift(x: np.ndarray) -> tuple[int, float]:
    """(k, d): the step d of the last k values of x (T,) (NaN: missing), or (0, 0.0) where none
    is taken (module docstring)."""
    x = np.asarray(x, dtype=np.float64)
    steps = np.diff(x)
    steps = steps[np.isfinite(steps)]
    if len(x) < MIN_VALUES or len(steps) < REF:
        return 0, 0.0
    sd = float(np.median(np.abs(steps))) / _MAD_SD
    if not sd > 0:
        return 0, 0.0
    total = np.r_[0.0, np.cumsum(np.nan_to_num(x))]
    count = np.r_[0.0, np.cumsum(np.isfinite(x))]
    ks = np.arange(K_MIN, K_MAX + 1)
    z, d = _statistic(total, count, np.full(len(ks), len(x)), ks, sd)  # every k, at the end
    best = int(np.argmax(z))
    z_end, k_end, d_end = float(z[best]), int(ks[best]), float(d[best])
    if z_end < Z:
        return 0, 0.0
    before = np.arange(k_end + 8, len(x) - k_end + 1)  # comparisons ending before the step
    earlier = _statistic(total, count, before, k_end, sd)[0]
    if z_end < EXCEPTIONAL * float(np.max(earlier, initial=0.0)):
        return 0, 0.0
    return k_end, d_end


def _statistic(
    total: np.ndarray, count: np.ndarray, t: np.ndarray, k: np.ndarray | int, sd: float
) -> tuple[np.ndarray, np.ndarray]:
    """For each end t (t >= k; k one, or one per t): the mean of x[t - k:t] less that of the
    up to REF values before them, in standard errors (0 where too few are observed), and the
    difference itself; from the cumulative sums and counts of x (T + 1,)."""
    start = np.maximum(t - k - REF, 0)
    n_after, n_before = count[t] - count[t - k], count[t - k] - count[start]
    ok = (n_after >= np.maximum(2, np.asarray(k) // 2)) & (n_before >= 8)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = (total[t] - total[t - k]) / n_after - (total[t - k] - total[start]) / n_before
        z = np.abs(d) / (sd * np.sqrt(1.0 / n_after + 1.0 / n_before))
    return np.where(ok, z, 0.0), np.where(ok, d, 0.0)


def level_shifted(rows: np.ndarray, targets: int) -> np.ndarray:
    """A history (T, F) with each of its first `targets` columns' values before a recent level
    shift moved by it (`recent_shift`); the same array where none is found."""
    out = rows
    for o in range(targets):
        k, d = recent_shift(rows[:, o])
        if k:
            out = out.copy() if out is rows else out
            out[:-k, o] += d
    return out
