"""A series' support (model/series/support.py): read off a history, its paths kept in it, and
the summaries of those paths against known answers; the default model's forecasts of Poisson
counts."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from model.filtering.predictive import summarize_samples
from model.runtime.runtime import Runtime
from model.series.inputs import InputError
from model.series.support import (
    COUNTS,
    NONNEGATIVE,
    REAL,
    in_support,
    read_support,
    support_codes,
)

DEFAULT = Path(__file__).resolve().parents[3] / "artifacts" / "default"


def test_a_history_of_non_negative_integers_reads_as_counts() -> None:
    counts = np.array([[3.0], [0.0], [np.nan], [7.0], [1.0], [2.0], [0.0], [4.0], [5.0]])
    assert read_support(counts) == "counts"
    assert read_support(counts[:7]) == "real"  # 6 observed values: too few to tell
    assert read_support(np.zeros((20, 1))) == "real"  # a history that never moves: real
    assert read_support(np.full((20, 1), 100.0)) == "real"
    assert read_support(counts + 0.5) == "real"  # non-negative decimals: declared, not read
    assert read_support(counts - 1.0) == "real"
    codes = support_codes([None, "nonnegative", None], [counts, counts, counts - 1.0], 3)
    np.testing.assert_array_equal(codes, [COUNTS, NONNEGATIVE, REAL])
    np.testing.assert_array_equal(support_codes(None, None, 2), [REAL, REAL])
    with pytest.raises(InputError, match="unknown support 'integer'; use one of real, "):
        support_codes(["integer"], None, 1)
    with pytest.raises(InputError, match="supports for 2 series, not 1"):
        support_codes(["real", "real"], None, 1)


def test_paths_in_their_support_and_their_summaries() -> None:
    """N(0.5, 1) paths: clipped at 0, their mean is E max(X, 0) = mu Phi(mu) + phi(mu) (0.698,
    not max(0.5, 0)), their quantiles the clipped quantiles (the 10 % one at 0, where a
    real series' is -0.78); N(0.3, 1) paths as counts: every path, median, quantile and bound
    a whole number (the median 0: P(X < 0.5) = 0.58; the 0.9 quantile round(1.58) = 2)."""
    rng = np.random.default_rng(0)
    x = np.array([0.5, 0.5, 0.3])[:, None, None, None] + rng.standard_normal((3, 200_000, 1, 1))
    codes = np.array([REAL, NONNEGATIVE, COUNTS])
    kept = in_support(x, codes)
    assert kept[0] is not x[0] and np.array_equal(kept[0], x[0])
    assert kept[1:].min() == 0.0 and np.all(kept[2] == np.round(kept[2]))
    s = summarize_samples(kept, [0.8], [0.25], integer=codes == COUNTS)
    mu = 0.5
    clipped_mean = mu * stats.norm.cdf(mu) + stats.norm.pdf(mu)
    assert s.mean[0, 0, 0] == pytest.approx(mu, abs=0.01)
    assert s.mean[1, 0, 0] == pytest.approx(clipped_mean, abs=0.01)
    lo, hi = s.intervals[0.8]
    assert lo[0, 0, 0] == pytest.approx(mu - 1.2816, abs=0.02) and lo[1, 0, 0] == 0.0
    assert hi[1, 0, 0] == pytest.approx(mu + 1.2816, abs=0.02)
    assert (lo[2, 0, 0], hi[2, 0, 0], s.median[2, 0, 0]) == (0.0, 2.0, 0.0)
    assert s.quantiles[0.25][2, 0, 0] == 0.0
    assert in_support(x, np.array([REAL] * 3)) is x


@pytest.mark.slow
def test_the_default_model_forecasts_poisson_counts_as_counts() -> None:
    """Poisson counts of mean 0.8 (sd 0.89), 300 values, forecast 12 steps ahead, their
    support read off the history: no path below 0, every bound and quantile a whole number,
    the 80 % lower bounds at 0; declared real, most of those bounds are below 0."""
    rt = Runtime.load(DEFAULT, backend="torch", device="cpu")
    rng = np.random.default_rng(1)
    histories = [rng.poisson(0.8, size=(300, 1)).astype(np.float64) for _ in range(20)]
    counted = rt.forecast_history(histories, 12, [0.8, 0.95], 500, seed=0, quantiles=[0.1],
                                  return_samples=True)
    real = rt.forecast_history(histories, 12, [0.8, 0.95], 500, seed=0,
                               supports=["real"] * 20)
    for f in counted:
        assert f.samples is not None and f.samples.min() >= 0.0
        for lo, hi in f.intervals.values():
            assert np.all(lo == np.round(lo)) and np.all(hi == np.round(hi)) and lo.min() >= 0
        assert np.all(f.median == np.round(f.median))
        assert np.all(f.quantiles[0.1] == np.round(f.quantiles[0.1]))
    lows = np.array([f.intervals[0.8][0] for f in real])
    assert np.mean(lows < 0) > 0.5 and math.isfinite(float(lows.mean()))
