"""Generated series of known law, with the true law of every value h steps ahead.

Each law draws series of unit-variance Gaussian innovations e_t about a level of LEVEL and
knows the conditional law of y_{t+h} given the values up to y_t (and, for the damped trend,
its state after y_t): Gaussian, of mean `means[s, t, h - 1]` and standard deviation
`sd[h - 1]`, the same at every t. The parameters are taken as known, so the truth of a law
with a deterministic part is its noise alone:

| law | y_t | mean of y_{t+h} | variance |
|---|---|---|---|
| white noise | LEVEL + e_t | LEVEL | 1 |
| AR(1) | LEVEL + x_t, x_t = AR_PHI x_{t-1} + e_t | LEVEL + phi^h x_t | sum_{j<h} phi^(2j) |
| random walk | y_{t-1} + e_t, y_0 = LEVEL | y_t | h |
| seasonal | LEVEL + sqrt(2) sin(2 pi t / PERIOD + u) + e_t, u ~ U(0, 2 pi) | its season | 1 |
| trend | LEVEL + SLOPE t + e_t | its line | 1 |
| damped trend | ETS(A,Ad,N), below | l_t + (phi + ... + phi^h) b_t | 1 + sum_{j<h} c_j^2 |

The AR(1) starts from its stationary law; the seasonal law's season has a standard deviation
of 1 (signal-to-noise 1). The damped
trend is ETS's additive damped-trend model (Hyndman et al. 2008, chapter 6) simulated from
its state space with DAMPED = (alpha, beta, phi), l_0 = LEVEL, b_0 = 0:

    y_t = l_{t-1} + phi b_{t-1} + e_t,
    l_t = l_{t-1} + phi b_{t-1} + alpha e_t,   b_t = phi b_{t-1} + beta e_t;

e_{t+j} reaches y_{t+h} (j < h) with the weight c_{h-j} = alpha + beta phi (1 - phi^{h-j}) /
(1 - phi), hence the variance (the weight of e_{t+h} itself is 1).

Shapes: S series, T values, H horizon.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

LEVEL = 50.0
AR_PHI = 0.7
PERIOD = 12
SLOPE = 0.05  # per step: 20 noise standard deviations over 400 steps
DAMPED = (0.5, 0.1, 0.9)  # alpha, beta, phi

Draw = tuple[np.ndarray, np.ndarray]  # values (S, T), true means (S, T, H)
Simulate = Callable[[np.random.Generator, int, int, int], Draw]


@dataclass(frozen=True)
class Law:
    """A law of series: its name, its true season (0: none), `simulate(rng, S, T, H)` ->
    values (S, T) and the true means (S, T, H) of the H values after each, and `sd(H)` the
    true standard deviations (H,) of those values."""

    name: str
    season: int
    simulate: Simulate
    sd: Callable[[int], np.ndarray]


def _steps(horizon: int) -> np.ndarray:
    return np.arange(1, horizon + 1, dtype=np.float64)  # (H,)


def _white(rng: np.random.Generator, s: int, n: int, horizon: int) -> Draw:
    y = LEVEL + rng.standard_normal((s, n))
    return y, np.full((s, n, horizon), LEVEL)


def _ar1(rng: np.random.Generator, s: int, n: int, horizon: int) -> Draw:
    e = rng.standard_normal((s, n))
    x = np.empty((s, n))
    x[:, 0] = e[:, 0] / np.sqrt(1.0 - AR_PHI**2)  # the stationary law
    for t in range(1, n):
        x[:, t] = AR_PHI * x[:, t - 1] + e[:, t]
    return LEVEL + x, LEVEL + x[:, :, None] * AR_PHI ** _steps(horizon)


def _walk(rng: np.random.Generator, s: int, n: int, horizon: int) -> Draw:
    y = LEVEL + np.cumsum(rng.standard_normal((s, n)), axis=1)
    return y, np.repeat(y[:, :, None], horizon, axis=2)


def _seasonal(rng: np.random.Generator, s: int, n: int, horizon: int) -> Draw:
    phase = rng.uniform(0.0, 2.0 * np.pi, (s, 1, 1))
    t = np.arange(n + horizon, dtype=np.float64)[None, :, None]
    season = LEVEL + np.sqrt(2.0) * np.sin(2.0 * np.pi * t / PERIOD + phase)[:, :, 0]  # (S, T+H)
    y = season[:, :n] + rng.standard_normal((s, n))
    ahead = np.arange(n)[:, None] + _steps(horizon).astype(np.int64)[None, :]  # (T, H)
    return y, season[:, ahead]


def _trend(rng: np.random.Generator, s: int, n: int, horizon: int) -> Draw:
    t = np.arange(n, dtype=np.float64)
    y = LEVEL + SLOPE * t + rng.standard_normal((s, n))
    line = LEVEL + SLOPE * (t[:, None] + _steps(horizon)[None, :])  # (T, H)
    return y, np.broadcast_to(line, (s, n, horizon)).copy()


def damped_sum(phi: float, horizon: int) -> np.ndarray:
    """phi + phi^2 + ... + phi^h for h = 1..H: (H,)."""
    return np.cumsum(phi ** _steps(horizon))


def _damped(rng: np.random.Generator, s: int, n: int, horizon: int) -> Draw:
    alpha, beta, phi = DAMPED
    e = rng.standard_normal((s, n))
    y, level, slope = np.empty((s, n)), np.empty((s, n)), np.empty((s, n))
    lv, b = np.full(s, LEVEL), np.zeros(s)
    for t in range(n):
        y[:, t] = lv + phi * b + e[:, t]
        lv, b = lv + phi * b + alpha * e[:, t], phi * b + beta * e[:, t]
        level[:, t], slope[:, t] = lv, b
    return y, level[:, :, None] + slope[:, :, None] * damped_sum(phi, horizon)


def damped_sd(horizon: int) -> np.ndarray:
    """The damped trend's h-step standard deviation (H,): sqrt(1 + sum_{j<h} c_j^2)."""
    alpha, beta, phi = DAMPED
    c = alpha + beta * phi * (1.0 - phi ** _steps(horizon - 1)) / (1.0 - phi)  # c_1..c_{H-1}
    return np.sqrt(1.0 + np.concatenate([[0.0], np.cumsum(c**2)]))


LAWS = (
    Law("white noise", 0, _white, lambda h: np.ones(h)),
    Law("AR(1)", 0, _ar1, lambda h: np.sqrt(np.cumsum(AR_PHI ** (2.0 * (_steps(h) - 1))))),
    Law("random walk", 0, _walk, lambda h: np.sqrt(_steps(h))),
    Law("seasonal", PERIOD, _seasonal, lambda h: np.ones(h)),
    Law("trend", 0, _trend, lambda h: np.ones(h)),
    Law("damped trend", 0, _damped, damped_sd),
)
