"""A series' support: the values it can take (any real number, non-negative numbers, or counts:
non-negative integers), declared or read off its history, and its forecasts kept in it.

A forecast's paths are drawn on the real line (the network's law is Gaussian). A series whose
values cannot be negative gets its paths clipped at 0, a count series' also rounded to the
nearest integer (half up), before they are summarised (`summarized`, through
model/filtering/predictive.py's `summarize_samples`). Clipping and rounding are non-decreasing
maps, so the quantiles of the paths in the support are those maps of the paths' quantiles: the
mass the Gaussian puts below 0 becomes a mass at 0, no path and no bound falls below it, and
the mean is the mean of the law in the support (E max(X, 0), not max(E X, 0)). A sample
quantile interpolated between two counts is rounded to the nearer one, so that every quantile,
median and bound of a count series is a count.

A series sent without a support is read as counts where its history holds at least MIN_COUNTS
observed values, all of them non-negative integers, and two of them different (a history that
never moves, a stuck sensor at 100, says nothing of its support); otherwise as real. A history
of non-negative decimals is not read as non-negative: a temperature above 0 all summer goes
below it in winter; `nonnegative` is declared.

Shapes: B series, N paths, H horizon, O targets.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from model.filtering.predictive import Forecast, forecasts, summarize_samples
from model.series.inputs import InputError

SUPPORTS = ("real", "nonnegative", "counts")
REAL, NONNEGATIVE, COUNTS = range(len(SUPPORTS))
MIN_COUNTS = 8  # observed values a history needs before it is read as counts


def read_support(history: np.ndarray) -> str:
    """The support a history (T, F) shows in its first target (module docstring)."""
    x = np.asarray(history, dtype=np.float64).reshape(len(history), -1)[:, 0]
    x = x[np.isfinite(x)]
    counts = len(x) >= MIN_COUNTS and bool(np.all(x >= 0) and np.all(x == np.round(x)))
    return "counts" if counts and bool(np.ptp(x) > 0) else "real"


def support_names(
    supports: Sequence[str | None] | None, histories: Sequence[np.ndarray] | None, n: int
) -> list[str]:
    """Each of n series' support: the one given, else the one its history shows
    (`read_support`; real without a history). An unknown name is an InputError that lists the
    valid ones."""
    given = list(supports) if supports is not None else [None] * n
    if len(given) != n:
        raise InputError(f"got supports for {len(given)} series, not {n}")
    out = []
    for i, name in enumerate(given):
        if name is None:
            name = read_support(histories[i]) if histories is not None else "real"
        if name not in SUPPORTS:
            raise InputError(f"unknown support {name!r}; use one of {', '.join(SUPPORTS)}")
        out.append(name)
    return out


def support_codes(
    supports: Sequence[str | None] | None, histories: Sequence[np.ndarray] | None, n: int
) -> np.ndarray:
    """`support_names` as codes (n,) int64, indices into SUPPORTS."""
    names = support_names(supports, histories, n)
    return np.array([SUPPORTS.index(name) for name in names], np.int64)


def in_support(samples: np.ndarray, codes: np.ndarray | None) -> np.ndarray:
    """Paths (B, N, H, O) of each series in its support (codes (B,); None: all real): clipped
    at 0, counts also rounded half up. The same array where every series is real."""
    if codes is None or not np.any(codes != REAL):
        return samples
    bounded = (codes != REAL)[:, None, None, None]
    out = np.where(bounded, np.maximum(samples, 0.0), samples)
    return np.where((codes == COUNTS)[:, None, None, None], np.floor(out + 0.5), out)


def summarized(
    samples: np.ndarray,
    levels: Sequence[float],
    quantiles: Sequence[float],
    alphas: np.ndarray | None,
    codes: np.ndarray | None,
    return_samples: bool,
) -> list[Forecast]:
    """Per-series Forecasts of samples (B, N, H, O) kept in each series' support (`codes` (B,),
    None: all real; model/series/support.py), summarised by `summarize_samples`."""
    samples = in_support(samples, codes)
    integer = None if codes is None else codes == COUNTS
    summary = summarize_samples(samples, levels, quantiles, alphas, integer)
    return forecasts(samples, summary, return_samples)
