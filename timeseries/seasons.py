"""A series' season length: declared, implied by its timestamps' frequency, or detected.

The season length m is the number of steps after which a series tends to repeat itself: 24 for
hourly data with a daily cycle, 12 for monthly data, 7 for daily data with a weekly one. A model
with lag inputs (model/config.py) reads the values one and two seasons back; ETS and the
seasonal naive need it too. Where a user gives none, it follows from the frequency of the
timestamps (`season_of_freq`, the periods GluonTS and statsforecast use), or, with no
timestamps either, from the values: a common period at which the autocorrelation r_m of the
differenced series passes the 90 % seasonality test of the M4 competition's benchmarks,
r_m > 1.645 sqrt((1 + 2 sum_{k<m} r_k^2) / n) (`detect_season`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

#: season length per pandas offset family, for one step of that offset (n = 1)
_PER_FAMILY = {"D": 7, "B": 5, "W": 52, "M": 12, "Q": 4}
#: older pandas aliases, still common in users' code
_LEGACY = {"M": "ME", "Q": "QE", "A": "YE", "Y": "YE", "H": "h", "T": "min"}
#: lags a series without timestamps is tested at (the common periods)
CANDIDATES = (4, 5, 6, 7, 12, 24, 48, 52, 168)
Z_90 = 1.645
NEAR_BEST = 0.8  # a multiple of the season repeats it as well, up to noise


def season_of_freq(freq: str) -> int:
    """The season length of a pandas frequency ("h", "30min", "D", "W-SUN", "MS", "QS-DEC",
    "YS" ...): steps in a day for sub-daily data (in an hour for steps under 10 minutes), 7 for
    daily, 5 for business days, 52 for weekly, 12 monthly, 4 quarterly, 0 (none) for yearly or
    other frequencies. ValueError for a string that is not a frequency."""
    try:
        offset = pd.tseries.frequencies.to_offset(_LEGACY.get(freq, freq))
    except (ValueError, TypeError):
        raise ValueError(
            f"{freq!r} is not a frequency; use a pandas alias such as h, 30min, D, W, MS, QS"
        ) from None
    code = offset.rule_code.split("-")[0]
    n = max(int(offset.n), 1)
    if code == "min":
        if n < 10 and 60 % n == 0:
            return 60 // n  # steps in an hour
        return 1440 // n if 1440 % n == 0 else 0  # steps in a day
    if code == "h":
        return 24 // n if 24 % n == 0 and n < 24 else 0
    if code in ("D", "B", "W"):
        family = code
    elif code.rstrip("SE") in ("M", "BM", "Q", "BQ"):
        family = "Q" if "Q" in code else "M"
    else:
        return 0
    base = _PER_FAMILY[family]
    return base // n if base % n == 0 and n < base else 0


def declared(season_length: int) -> int:
    """A season length as a user gives it: 0 or 1 is none (statsforecast's 1), as 0."""
    return 0 if season_length == 1 else season_length


def season_of_timestamps(stamps: Sequence[object]) -> int:
    """The season length implied by regular timestamps (0 where no frequency is found)."""
    index = pd.DatetimeIndex(pd.to_datetime(list(stamps)))
    if len(index) < 3:
        return 0
    with warnings.catch_warnings():  # pandas 3 announces an offset instead of a string
        warnings.simplefilter("ignore")
        freq = pd.infer_freq(index)
    return 0 if freq is None else season_of_freq(getattr(freq, "freqstr", str(freq)))


def detect_season(
    values: np.ndarray, max_season: int, candidates: Sequence[int] = CANDIDATES
) -> int:
    """Of the candidate lags m <= max_season at which the differenced series (NaN skipped)
    passes the 90 % seasonality test (module docstring), is more autocorrelated than half a
    season back (a cycle's trough; the tail of a slow swing is not a season) and holds three
    seasons, the shortest whose autocorrelation is near the highest; else 0."""
    y = np.asarray(values, np.float64).reshape(-1)
    y = y[np.isfinite(y)]
    d = np.diff(y)
    n = len(d)
    if n < 12 or not np.std(d) > 0:
        return 0
    d = d - d.mean()
    denom = float(d @ d)
    passing: dict[int, float] = {}
    for m in sorted(candidates):
        if m > max_season or 3 * m > n:
            continue
        r = np.array([float(d[k:] @ d[:-k]) / denom for k in range(1, m + 1)])  # lags 1..m
        limit = Z_90 * np.sqrt((1.0 + 2.0 * float(np.sum(r[:-1] ** 2))) / n)
        trough = r[m // 2 - 1]  # half a season back: low in a cycle, high in a slow swing
        if r[-1] > limit and r[-1] > trough:
            passing[m] = float(r[-1])
    if not passing:
        return 0
    best = max(passing.values())  # the shortest of the near-best: 24, not its multiple 48
    return min(m for m, r_m in passing.items() if r_m >= NEAR_BEST * best)
