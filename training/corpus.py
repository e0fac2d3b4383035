"""A broad generated corpus for the pretrained default model (in the spirit of KernelSynth).

The default model serves series it has never seen: monthly sales, hourly loads, daily prices,
weekly counts. It learns from random compositions of the parts such series are made of, each
part drawn with random settings (Ansari et al. 2024 draw Gaussian-process kernels for the same
purpose; TimesFM sums trends, sines, ARMA and step changes):

- a level and a trend: linear, damped, or piecewise linear with a few change points;
- seasonal cycles of common periods (4, 7, 12, 24, 48, 52 ... steps), each a random Fourier
  series of a few harmonics (smooth or peaked shapes), sometimes two periods at once, with an
  amplitude that may drift;
- an AR(1) or AR(2) part, or a random walk;
- level shifts at random steps;
- noise that is Gaussian or Student-t (3 to 8 degrees of freedom), homoscedastic, proportional
  to the level, or in volatility clusters (a GARCH(1, 1)-like variance);
- intermittent counts: Poisson draws from a positive rate, zero most of the time.

A series is the sum of its parts, or, for one in five, the exponential of a sum (multiplicative
seasons and growth). `corpus_series` is deterministic in its seed. `corpus_seasons` gives each
series' season length as a user would declare it: the period of its main seasonal part, or, for
half of the series without one, a period such series are often given (their timestamps'
frequency implies it), so that a model learns to use a declared season only where it holds.
"""

from __future__ import annotations

import math

import numpy as np

PERIODS = (4, 7, 12, 24, 48, 52, 30, 5, 6, 168)
PERIOD_WEIGHTS = (0.12, 0.18, 0.2, 0.2, 0.1, 0.05, 0.05, 0.04, 0.03, 0.03)
KINDS = ("additive", "multiplicative", "counts")
KIND_WEIGHTS = (0.75, 0.15, 0.10)


def corpus_series(n: int, length: int, seed: int = 0) -> tuple[list[str], list[np.ndarray]]:
    """n series of `length` steps -> names ("c0", ...) and (length, 1) float64 arrays."""
    names, series, _ = corpus_seasons(n, length, seed)
    return names, series


def corpus_seasons(
    n: int, length: int, seed: int = 0
) -> tuple[list[str], list[np.ndarray], np.ndarray]:
    """`corpus_series` with each series' declared season length (n,) int64 (0: none)."""
    rng = np.random.default_rng(seed)
    declare = np.random.default_rng([seed, 1])  # apart, so that the series stay the same
    names, series, seasons = [], [], np.zeros(n, np.int64)
    for i in range(n):
        kind = KINDS[rng.choice(len(KINDS), p=KIND_WEIGHTS)]
        values, period = (
            _counts(rng, length) if kind == "counts" else _composed(rng, length, kind)
        )
        if period == 0 and declare.random() < 0.5:
            period = PERIODS[declare.choice(len(PERIODS), p=PERIOD_WEIGHTS)]
        names.append(f"c{i}")
        series.append(values[:, None])
        seasons[i] = period
    return names, series, seasons


def _composed(rng: np.random.Generator, length: int, kind: str) -> tuple[np.ndarray, int]:
    t = np.arange(length, dtype=np.float64)
    noise_sd = rng.uniform(0.05, 1.0)
    y = _trend(rng, t) + _noise_part(rng, length, noise_sd)
    period = 0
    if rng.random() < 0.7:
        part, period = _seasonal(rng, t, rng.uniform(0.5, 4.0) * max(noise_sd, 0.2))
        y += part
    if rng.random() < 0.2:
        y += _shifts(rng, length, 2.0 * noise_sd)
    y += _observation_noise(rng, y, noise_sd)
    if kind == "multiplicative":
        y = np.exp(0.25 * (y - y.mean()) / max(y.std(), 1e-9))
    level, scale = rng.normal(0.0, 50.0), 10.0 ** rng.uniform(-1.0, 3.0)
    return (level + scale * y if kind == "additive" else scale * y), period


def _trend(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    """Linear, damped or piecewise-linear trend in units of about one noise sd per step / 10."""
    form = rng.choice(4)
    slope = rng.normal(0.0, 0.05)
    if form == 0:  # none
        return np.zeros_like(t)
    if form == 1:
        return slope * t
    if form == 2:  # damped: the slope fades with a random memory
        phi = rng.uniform(0.9, 0.995)
        return slope * (1.0 - phi ** (t + 1)) / (1.0 - phi)
    knots = np.sort(rng.choice(len(t), size=rng.integers(1, 4), replace=False))
    slopes = np.cumsum(rng.normal(0.0, 0.05, size=len(knots) + 1))
    return np.cumsum(slopes[np.searchsorted(knots, t)])


def _seasonal(rng: np.random.Generator, t: np.ndarray, amplitude: float) -> tuple[np.ndarray, int]:
    """One or two periodic parts, random Fourier series of up to 4 harmonics; the period of
    the first (the larger)."""
    out, first = np.zeros_like(t), 0
    for _ in range(1 + int(rng.random() < 0.3)):
        period = PERIODS[rng.choice(len(PERIODS), p=PERIOD_WEIGHTS)]
        first = first or int(period)
        harmonics = int(rng.integers(1, min(4, period // 2) + 1))
        shape = np.zeros_like(t)
        for k in range(1, harmonics + 1):
            a, b = rng.normal(0.0, 1.0 / k, size=2)
            angle = 2 * math.pi * k * t / period
            shape += a * np.sin(angle) + b * np.cos(angle)
        shape /= max(shape.std(), 1e-9)
        drift = 1.0 + (rng.normal(0.0, 0.3) * t / len(t) if rng.random() < 0.3 else 0.0)
        out += amplitude * drift * shape
        amplitude *= rng.uniform(0.2, 0.7)
    return out, first


def _noise_part(rng: np.random.Generator, length: int, sd: float) -> np.ndarray:
    """AR(1), AR(2) or a random walk driven by Gaussian steps of `sd`."""
    form = rng.choice(4)
    eps = sd * rng.standard_normal(length)
    if form == 0:
        return np.zeros(length)
    if form == 1:  # random walk
        return np.cumsum(0.5 * eps)
    out = np.zeros(length)
    phi1 = rng.uniform(0.2, 0.95)
    phi2 = rng.uniform(-0.3, 0.9 - phi1) if form == 3 else 0.0
    for k in range(2, length):
        out[k] = phi1 * out[k - 1] + phi2 * out[k - 2] + eps[k]
    return out


def _shifts(rng: np.random.Generator, length: int, size: float) -> np.ndarray:
    steps = rng.choice(length, size=rng.integers(1, 4), replace=False)
    jumps = np.zeros(length)
    jumps[steps] = rng.normal(0.0, 3.0 * size, size=len(steps))
    return np.cumsum(jumps)


def _observation_noise(rng: np.random.Generator, y: np.ndarray, sd: float) -> np.ndarray:
    """Gaussian or Student-t, homoscedastic, level-proportional or volatility-clustered."""
    n = len(y)
    df = rng.uniform(3.0, 8.0)
    draws = rng.standard_normal(n) if rng.random() < 0.6 else rng.standard_t(df, n) / math.sqrt(
        df / (df - 2.0)
    )
    form = rng.choice(3)
    if form == 0:
        scale = np.full(n, sd)
    elif form == 1:  # proportional to the distance from the series' lowest value
        level = y - y.min()
        scale = sd * (0.3 + level / max(level.mean(), 1e-9))
    else:  # GARCH(1, 1)-like clusters
        alpha = rng.uniform(0.05, 0.2)
        beta = rng.uniform(0.5, 0.9 - alpha)  # alpha + beta < 1: a stationary variance
        var, scale = sd**2, np.empty(n)
        omega = sd**2 * (1.0 - alpha - beta)
        for k in range(n):
            scale[k] = math.sqrt(var)
            var = omega + alpha * (scale[k] * draws[k]) ** 2 + beta * var
    return scale * draws


def _counts(rng: np.random.Generator, length: int) -> tuple[np.ndarray, int]:
    """Intermittent or low counts: Poisson draws from a rate that is zero most of the time,
    or a small seasonal rate."""
    t = np.arange(length, dtype=np.float64)
    period = 0
    if rng.random() < 0.5:
        active = rng.random(length) < rng.uniform(0.05, 0.5)
        rate = active * rng.uniform(0.5, 5.0)
    else:
        period = int(PERIODS[rng.choice(len(PERIODS), p=PERIOD_WEIGHTS)])
        base = rng.uniform(0.5, 20.0)
        rate = base * np.exp(rng.uniform(0.0, 0.8) * np.sin(2 * math.pi * t / period))
    return rng.poisson(rate).astype(np.float64), period
