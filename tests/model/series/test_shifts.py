"""A level shift at the end of a history (model/series/shifts.py): found where it is, not where
a series wanders, and the default model's forecasts after it covering as they say."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from model.runtime.runtime import Runtime
from model.series.shifts import MIN_VALUES, level_shifted, recent_shift

DEFAULT = Path(__file__).resolve().parents[3] / "artifacts" / "default"


def _ar(n: int, phi: float, rng: np.random.Generator) -> np.ndarray:
    e, x = rng.standard_normal(n), np.zeros(n)
    for t in range(1, n):
        x[t] = phi * x[t - 1] + e[t]
    return x


def test_a_step_at_the_end_is_found_with_its_size() -> None:
    """A 5-sd step 5 and 15 values before the end of white noise: found at its place (within a
    value) with its size (within 3 standard errors, 3 sqrt(1/k + 1/48)); the values before it
    moved by it, the targets only; a missing value skipped; too short a history left alone."""
    rng = np.random.default_rng(3)
    for after in (5, 15):
        y = rng.standard_normal(200 + after)
        y[200:] += 5.0
        y[50] = np.nan
        k, d = recent_shift(y)
        assert abs(k - after) <= 1 and abs(d - 5.0) < 3 * np.sqrt(1 / after + 1 / 48), (k, d)
        rows = np.c_[y, np.arange(len(y), dtype=np.float64)]
        moved = level_shifted(rows, targets=1)
        np.testing.assert_array_equal(moved[-k:], rows[-k:])
        np.testing.assert_allclose(moved[:-k, 0], rows[:-k, 0] + d)
        np.testing.assert_array_equal(moved[:, 1], rows[:, 1])
    assert recent_shift(np.r_[np.zeros(MIN_VALUES - 6), np.full(5, 9.0)]) == (0, 0.0)


@pytest.mark.parametrize(("kind", "most"), [("noise", 0.02), ("walk", 0.08), ("ar9", 0.06)])
def test_no_shift_is_taken_where_a_series_wanders(kind: str, most: float) -> None:
    """200 seeded series of 205 values each: white noise (measured: never), random walks
    (4.5 %) and AR(1)s of 0.9 (2 %), whose ends differ from their past as much as anywhere;
    the bounds sit about two binomial standard errors above the measured shares."""
    rng = np.random.default_rng(7)
    found = 0
    for _ in range(200):
        e = rng.standard_normal(205)
        y = {"noise": e, "walk": np.cumsum(e), "ar9": _ar(205, 0.9, rng)}[kind]
        found += recent_shift(y)[0] > 0
    assert found / 200 <= most


@pytest.mark.slow
def test_forecasts_after_a_level_shift_cover_as_they_say() -> None:
    """White noise whose level stepped by 5 sds 5 steps before the end (40 series), forecast 24
    steps ahead: 80 % intervals cover within 0.1 of 0.8 (0.44 when the history kept the old
    level) and the medians sit within one sd of the new level (they were 1.7 to 3.4 off)."""
    rt = Runtime.load(DEFAULT, backend="torch", device="cpu")
    rng = np.random.default_rng(0)
    histories, futures = [], []
    for _ in range(40):
        y = rng.standard_normal(205 + 24)
        y[200:] += 5.0
        histories.append(y[:205, None])
        futures.append(y[205:])
    forecasts = rt.forecast_history(histories, 24, [0.8], 500, seed=1, seasons=[0] * 40)
    cover = [np.mean((f.intervals[0.8][0][:, 0] <= y) & (y <= f.intervals[0.8][1][:, 0]))
             for f, y in zip(forecasts, futures, strict=True)]
    assert abs(float(np.mean(cover)) - 0.8) <= 0.1
    assert max(float(np.abs(f.median[:, 0] - 5.0).mean()) for f in forecasts) < 1.0
