"""Windows normalised by the per-series layer (training/datasets/layer_windows.py): what the
layer explains leaves nothing, nothing after the origin enters, and the cache gives the same."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from model.series.adaptation import AdaptConfig
from model.series.layer.layer import Layer
from training.datasets.layer_windows import normalise
from training.datasets.synthetic import load_corpus

ADAPTER = Layer(AdaptConfig(), 1, 0, 8)


def _trend_and_season(n: int, noise: float, seed: int = 0) -> np.ndarray:
    t = np.arange(n, dtype=np.float64)
    pattern = np.array([3.0, 5.0, 1.0, -2.0, -4.0, -3.0, 0.0, 2.0, 4.0, 1.0, -1.0, -4.0])
    y = 200.0 + 0.8 * t + pattern[t.astype(int) % 12]
    return (y + np.random.default_rng(seed).normal(0.0, noise, n))[:, None]


def test_what_the_layer_explains_is_taken_out_of_the_window_ahead() -> None:
    """A line with an exact season of 12 and noise of sd 0.5: from an origin after 96 values,
    the next 24 less the layer's season and trend are the noise (sd 0.5 in data units, mean
    about 0), where the raw values run 24 x 0.8 = 19 units up and swing by 9."""
    y = _trend_and_season(120, 0.5)
    plain, ahead, (_, scale) = normalise(y[:96], y[96:], 12, ADAPTER)
    left = ahead[:, 0] * scale[0]  # data units about the layer's location
    assert abs(left.mean()) < 0.5 and left.std() < 1.0, left
    assert np.ptp(y[96:, 0]) > 15  # what the window would hold without the layer
    assert plain.shape == (96, 1) and abs(plain.mean()) < 1e-9  # over its own location


def test_nothing_after_the_origin_enters() -> None:
    """Moving the values after the origin moves only them, by the move over the scale."""
    y = _trend_and_season(120, 1.0, seed=3)
    moved = y.copy()
    moved[100:] += 50.0
    a = normalise(y[:96], y[96:], 12, ADAPTER)
    b = normalise(moved[:96], moved[96:], 12, ADAPTER)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[2], b[2])
    np.testing.assert_allclose((b[1] - a[1])[4:, 0] * a[2][1, 0], 50.0, rtol=1e-9)
    np.testing.assert_array_equal(a[1][:4], b[1][:4])


def test_the_corpus_normalised_by_the_layer_is_cached(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    args = {"window": 30, "history": 12, "n_series": 6, "length": 80}
    data = load_corpus(0, None, scaling="layer", **args)
    assert data.train.dtype == np.float32 and np.isfinite(data.train).all()
    assert len(list((tmp_path / "smct" / "windows").glob("*.npz"))) == 1
    again = load_corpus(0, None, scaling="layer", **args)
    assert np.array_equal(again.train, data.train) and np.array_equal(again.test, data.test)
    windowed = load_corpus(0, None, scaling="window", **args)
    assert windowed.train.shape == data.train.shape
    assert not np.allclose(windowed.train, data.train)
    with pytest.raises(ValueError, match="valid: window, layer"):
        load_corpus(0, None, scaling="global", **args)
