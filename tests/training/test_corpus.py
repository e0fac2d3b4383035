"""The generated corpus of the default model: deterministic, finite, and made of its parts."""

from __future__ import annotations

import numpy as np

from training import corpus
from training.datasets import load_dataset


def test_corpus_is_deterministic_and_finite() -> None:
    names, series = corpus.corpus_series(50, 120, seed=3)
    again = corpus.corpus_series(50, 120, seed=3)[1]
    other = corpus.corpus_series(50, 120, seed=4)[1]
    assert names == [f"c{i}" for i in range(50)]
    assert all(s.shape == (120, 1) and np.isfinite(s).all() for s in series)
    assert all(np.array_equal(a, b) for a, b in zip(series, again, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(series, other, strict=True))


def test_corpus_parts() -> None:
    """Seasonal cycles show at their period, counts are non-negative integers, and levels and
    scales span orders of magnitude."""
    rng = np.random.default_rng(0)
    t = np.arange(240.0)
    season, period = corpus._seasonal(rng, t, 1.0)
    spectrum = np.abs(np.fft.rfft(season))
    assert spectrum.max() > 10 * np.median(spectrum)  # a few sharp lines: periodic parts
    assert period in corpus.PERIODS
    counts, _ = corpus._counts(rng, 500)
    assert (counts >= 0).all() and np.array_equal(counts, np.round(counts))
    _, series = corpus.corpus_series(300, 100, seed=0)
    spread = np.array([s.std() for s in series])
    assert spread.max() / np.maximum(spread.min(), 1e-12) > 1e3
    zeros = np.array([(s == 0).mean() for s in series])
    assert (zeros > 0.5).sum() >= 5  # intermittent counts are there


def test_declared_seasons_are_the_series_periods() -> None:
    """A series declared seasonal with period m (and long enough) repeats itself at lag m more
    than at lags nearby, on most of the series with a seasonal part; the series themselves do
    not depend on the declarations."""
    names, series, seasons = corpus.corpus_seasons(200, 240, seed=0)
    plain = corpus.corpus_series(200, 240)[1]
    assert all(np.array_equal(a, b) for a, b in zip(series, plain, strict=True))
    assert set(seasons.tolist()) <= {0, *corpus.PERIODS} and (seasons == 0).mean() > 0.05

    def closeness(y: np.ndarray, lag: int) -> float:  # mean |y_t - y_{t-lag}|, differenced
        d = np.diff(y[:, 0])
        return float(np.abs(d[lag:] - d[:-lag]).mean())

    wins = [
        closeness(y, m) < closeness(y, m + 1)
        for y, m in zip(series, seasons, strict=True)
        if 4 <= m <= 52
    ]
    assert np.mean(wins) > 0.6


def test_corpus_data_set() -> None:
    data = load_dataset("corpus", n_series=40, length=100, window=30, history=10)
    assert data.train.shape[1:] == (30, 1) and len(data.val) and len(data.test)
    # each window scaled by its first `history` steps: those have mean 0
    head = data.train[:, :10, 0].astype(np.float64)
    np.testing.assert_allclose(head.mean(axis=1), 0.0, atol=1e-4)
