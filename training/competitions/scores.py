"""The competitions' scores, as fev scores the published zero-shot models (fev.metrics):

- WQL: the quantile loss 2 |(y - q_hat)((y <= q_hat) - q)| at q = 0.1 ... 0.9, averaged over
  series and steps, over the mean |y| of the test parts, averaged over the nine levels;
- MASE: the mean |y - point| of each series over its in-sample seasonal error (the mean
  |x_t - x_{t-m}| of its history, m the task's season), averaged over the series (a series whose
  seasonal error is 0 or undefined is left out, as fev leaves it);
- the coverage of the 80 % and 95 % intervals, by step and over the horizon (the 80 %'s also by
  the length of the series' histories), and the share of outcomes above each interval and above
  the point forecast (which side the misses fall on);
- sMAPE, the M3 competition's: 200 |y - point| / (|y| + |point|), averaged.

Shapes: N series, H horizon, Q quantile levels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

QUANTILES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
LEVELS = (0.8, 0.95)  # the intervals whose coverage is reported
#: the lengths of history the 80 % coverage is also reported by: [lo, hi) values
LENGTHS = ((0, 20), (20, 40), (40, None))


@dataclass(frozen=True)
class Forecasts:
    """A forecaster's answer for a task: `quantiles` (N, H, Q) at QUANTILES, `point` (N, H)
    (the median of a sampled law, the mean of a Gaussian one: fev's point forecast), and the
    intervals at LEVELS, level -> (lo, hi) each (N, H)."""

    quantiles: np.ndarray
    point: np.ndarray
    intervals: dict[float, tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Scores:
    """A forecaster's scores on a task; `coverage_by_step` level -> (H,); `above` level -> the
    share of outcomes above the interval (those below it: 1 - coverage - above), and
    `above_median` the share above the point forecast: a shortfall of coverage on one side
    is a biased median, not intervals too narrow; `by_length` the 80 % intervals' coverage of
    the series of each group of LENGTHS, with their number (NaN, 0 for a group without; none
    without 80 % intervals)."""

    wql: float
    mase: float
    smape: float
    coverage: dict[float, float]
    coverage_by_step: dict[float, np.ndarray]
    above: dict[float, float]
    above_median: float
    by_length: tuple[tuple[float, int], ...] = ()


def quantile_loss(truth: np.ndarray, quantiles: np.ndarray) -> np.ndarray:
    """fev's quantile loss (N, H, Q) of truth (N, H) under quantiles (N, H, Q) at QUANTILES."""
    y = truth[..., None]
    q = np.asarray(QUANTILES)
    return 2.0 * np.abs((y - quantiles) * ((y <= quantiles) - q))


def wql(truth: np.ndarray, quantiles: np.ndarray) -> float:
    """Weighted quantile loss: per level the mean quantile loss over the mean |y|, averaged."""
    per_level = np.nanmean(quantile_loss(truth, quantiles), axis=(0, 1)) / np.nanmean(
        np.abs(truth)
    )
    return float(np.mean(per_level))


def seasonal_error(histories: list[np.ndarray], season: int) -> np.ndarray:
    """The mean |x_t - x_{t-season}| of each history (N,); NaN where it has no such pair."""
    out = np.full(len(histories), np.nan)
    for i, x in enumerate(histories):
        if len(x) > season:
            out[i] = np.nanmean(np.abs(x[season:] - x[:-season]))
    return out


def mase(truth: np.ndarray, point: np.ndarray, histories: list[np.ndarray], season: int) -> float:
    """Mean absolute scaled error: each series' errors over its seasonal error, averaged over
    the series with a finite, non-zero scale (fev's safe mean)."""
    with np.errstate(divide="ignore", invalid="ignore"):  # a flat history: left out
        scaled = np.abs(truth - point) / seasonal_error(histories, season)[:, None]  # (N, H)
    scaled[~np.isfinite(scaled)] = np.nan
    return float(np.nanmean(scaled))


def smape(truth: np.ndarray, point: np.ndarray) -> float:
    """The M3 competition's symmetric MAPE in percent."""
    denominator = np.abs(truth) + np.abs(point)
    ratio = np.where(denominator > 0, np.abs(truth - point) / np.where(denominator > 0,
                                                                     denominator, 1.0), 0.0)
    return float(200.0 * np.mean(ratio))


def score(
    truth: np.ndarray, forecasts: Forecasts, histories: list[np.ndarray], season: int
) -> Scores:
    """Every score of `forecasts` against truth (N, H)."""
    by_step, above = {}, {}
    for level, (lo, hi) in forecasts.intervals.items():
        by_step[level] = np.mean((truth >= lo) & (truth <= hi), axis=0)  # (H,)
        above[level] = float(np.mean(truth > hi))
    return Scores(
        wql=wql(truth, forecasts.quantiles),
        mase=mase(truth, forecasts.point, histories, season),
        smape=smape(truth, forecasts.point),
        coverage={level: float(np.mean(v)) for level, v in by_step.items()},
        coverage_by_step=by_step,
        above=above,
        above_median=float(np.mean(truth > forecasts.point)),
        by_length=coverage_by_length(truth, forecasts.intervals[0.8], histories)
        if 0.8 in forecasts.intervals else (),
    )


def coverage_by_length(
    truth: np.ndarray, interval: tuple[np.ndarray, np.ndarray], histories: list[np.ndarray]
) -> tuple[tuple[float, int], ...]:
    """The share of outcomes (N, H) inside `interval` (lo, hi), each (N, H), over the series of
    each group of LENGTHS by their history's length, and the group's number of series."""
    lo, hi = interval
    inside = (truth >= lo) & (truth <= hi)
    n = np.array([len(h) for h in histories])
    out = []
    for first, last in LENGTHS:
        group = (n >= first) & (n < (np.inf if last is None else last))
        out.append((float(np.mean(inside[group])) if group.any() else math.nan,
                    int(group.sum())))
    return tuple(out)
