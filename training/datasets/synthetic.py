"""Generated data sets: the paper's Models I and II, a mixture of five laws, and the corpus of
training/corpus.py (the training data of the pretrained default model).

Shape legend: S windows, T window length, F features, L series length.
"""

from __future__ import annotations

import math

import numpy as np

from timeseries.series import Scaler, SeriesData, SyntheticTruth
from training.corpus import corpus_seasons
from training.datasets.layer_windows import scaled
from training.datasets.windows import (
    PAPER_SPLITS,
    check_scaling,
    make_windows,
    scale_windows,
    series_data,
)


def generate_synthetic(
    model: int, n: int, length: int = 24, seed: int = 0
) -> tuple[np.ndarray, SyntheticTruth]:
    """``n`` sequences X_0..X_length of Model I or II: returns (n, length + 1, 1) float32."""
    truth = SyntheticTruth.paper(model)
    rng = np.random.default_rng(seed)
    x = np.empty((n, length + 1))
    x[:, 0] = rng.standard_normal(n)  # X_0 ~ N(0, 1)
    for t in range(length):
        x[:, t + 1] = truth.sample(x[:, t], 1, rng)[:, 0]
    return x[..., None].astype(np.float32), truth


def load_synthetic(
    model: int, seed: int, limit: int | None, scaling: str = "global"
) -> SeriesData:
    """1000 sequences X_0..X_24 split 800 / 100 / 100 (appendix B.3), history 12; unscaled
    (``scaling="global"``, the paper's) or each window by its first 12 steps (``"window"``,
    as a served series is scaled by its history; no true law then: dist-mse is null)."""
    check_scaling(scaling, ("global", "window"), f"synthetic-{model}")
    x, truth = generate_synthetic(model, 1000, 24, seed)  # (1000, 25, 1)
    bounds = {"train": (0, 800), "val": (800, 900), "test": (900, 1000)}
    parts = {split: x[lo:hi] for split, (lo, hi) in bounds.items()}
    index = {
        split: np.stack([np.arange(lo, hi), np.zeros(hi - lo, dtype=np.int64)], axis=1)
        for split, (lo, hi) in bounds.items()
    }
    name, history = f"synthetic-{model}", 12
    if scaling == "window":
        stats = scale_windows(parts, history)
        return series_data(
            name, parts, index, limit, 1, ["x"], Scaler.identity(1), history, None,
            window_stats=stats, unistep_from=history,
        )
    return series_data(name, parts, index, limit, 1, ["x"], Scaler.identity(1), history, truth)


def mixture_series(
    n_per_kind: int = 40, length: int = 200, seed: int = 0
) -> tuple[list[str], list[np.ndarray]]:
    """Series of five laws at random levels and scales (``n_per_kind`` each, ``length``
    steps): stationary AR(1) (phi in [0.3, 0.98]), random walk with drift, linear trend plus
    noise, seasonal (period 7, 12 or 24) plus noise, and exponential growth with log-normal
    noise. -> names ("ar3", "rw3", ...) and (length, 1) arrays in data units."""
    rng = np.random.default_rng(seed)
    t = np.arange(length, dtype=np.float64)
    names, series = [], []
    for i in range(n_per_kind):
        sigma = rng.uniform(0.2, 3.0)
        phi, ar = rng.uniform(0.3, 0.98), np.zeros(length)
        for k in range(1, length):
            ar[k] = phi * ar[k - 1] + sigma * rng.normal()
        walk = np.cumsum(sigma * rng.normal(size=length) + rng.normal(0.0, 0.3 * sigma))
        trend = rng.normal(0.0, sigma) * t / 10.0 + sigma * rng.normal(size=length)
        period, amplitude = rng.choice([7, 12, 24]), rng.uniform(0.5, 3.0) * sigma
        phase = rng.uniform(0.0, 2.0 * math.pi)
        seasonal = amplitude * np.sin(2.0 * math.pi * t / period + phase)
        seasonal += 0.5 * sigma * rng.normal(size=length)
        growth = rng.uniform(0.005, 0.05) * t + np.cumsum(rng.normal(0.0, 0.05, size=length))
        growth = np.exp(growth) * rng.uniform(1.0, 100.0)
        for kind, values in (("ar", ar + rng.normal(0.0, 10.0)), ("rw", walk),
                             ("tr", trend + rng.normal(0.0, 10.0)), ("se", seasonal),
                             ("ex", growth)):
            names.append(f"{kind}{i}")
            series.append(values[:, None])
    return names, series


def load_synthetic_mix(seed: int, limit: int | None, scaling: str = "window") -> SeriesData:
    """A mixture of five laws (:func:`mixture_series`: 200 series of 200 steps), windows of
    25 steps split by time 70 / 15 / 15 within each series, each window scaled by its first
    12 steps: the training data of a general-purpose per-series model (the default model)."""
    check_scaling(scaling, ("window",), "synthetic-mix")
    names, series = mixture_series(seed=seed)
    parts, index = make_windows(series, 25, PAPER_SPLITS, 1, dtype=np.float64)
    stats = scale_windows(parts, 12)
    return series_data(
        "synthetic-mix", parts, index, limit, 1, ["x"], Scaler.identity(1), 12, None,
        window_stats=stats, series_names=names, unistep_from=12,
    )


def load_corpus(
    seed: int,
    limit: int | None,
    scaling: str = "window",
    window: int = 72,
    history: int = 24,
    n_series: int = 2000,
    length: int = 240,
) -> SeriesData:
    """The generated corpus of training/corpus.py (`n_series` series of `length` steps):
    windows of `window` steps split by time 70 / 15 / 15 within each series, each scaled by
    its first `history` steps (the runtime's per-series rule; `scaling` "window"), or
    normalised by the per-series layer from the series up to its forecast origin ("layer":
    training/datasets/layer_windows.py): the training data of the pretrained default model."""
    check_scaling(scaling, ("window", "layer"), "corpus")
    names, series, seasons = corpus_seasons(n_series, length, seed=seed)
    parts, index = make_windows(series, window, PAPER_SPLITS, None, dtype=np.float64)
    key = f"corpus-{seed}-{window}-{history}-{n_series}-{length}"
    parts, stats = scaled(scaling, series, seasons, parts, index, history, key)
    return series_data(
        "corpus", parts, index, limit, 1, ["x"], Scaler.identity(1), history, None,
        window_stats=stats, series_names=names, unistep_from=history, series_seasons=seasons,
    )
