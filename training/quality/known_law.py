"""Generated series of known law, with the true law of every value h steps ahead.

Each law draws series of unit-variance Gaussian innovations e_t about a level of LEVEL and
knows the conditional law of y_{t+h} given the values up to y_t (and, for the trended laws,
their state after y_t): Gaussian, of mean `means[s, t, h - 1]` and standard deviation
`sds[s, t, h - 1]`. The parameters are taken as known, so the truth of a law with a
deterministic part is its noise alone:

| law | y_t | mean of y_{t+h} | variance |
|---|---|---|---|
| white noise | LEVEL + e_t | LEVEL | 1 |
| AR(1) | LEVEL + x_t, x_t = AR_PHI x_{t-1} + e_t | LEVEL + phi^h x_t | sum_{j<h} phi^(2j) |
| random walk | y_{t-1} + e_t, y_0 = LEVEL | y_t | h |
| seasonal | LEVEL + sqrt(2) sin(2 pi t / PERIOD + u) + e_t, u ~ U(0, 2 pi) | its season | 1 |
| seasonal random walk | y_{t-PERIOD} + e_t, its first season the above | y_{t+h-PERIOD k} | k |
| trend | LEVEL + SLOPE t + e_t | its line | 1 |
| damped trend | ETS(A,Ad,N), below | l_t + (phi + ... + phi^h) b_t | 1 + sum_{j<h} c_j^2 |
| local linear trend | l_t + e_t, below | l_t + h b_t | 1 + h s_l^2 + s_b^2 (h-1) h (2h-1) / 6 |
| growing noise | L_t (1 + s e_t), L_t = LEVEL GROWTH^t | L_{t+h} | (s L_{t+h})^2 |

(k = ceil(h / PERIOD): the seasons between the last value of the phase and y_{t+h}.) The
AR(1) starts from its stationary law; the seasonal law's season has a standard deviation of 1
(signal-to-noise 1). The damped trend is ETS's additive damped-trend model (Hyndman et al.
2008, chapter 6) simulated from its state space with DAMPED = (alpha, beta, phi), l_0 = LEVEL,
b_0 = 0:

    y_t = l_{t-1} + phi b_{t-1} + e_t,
    l_t = l_{t-1} + phi b_{t-1} + alpha e_t,   b_t = phi b_{t-1} + beta e_t;

e_{t+j} reaches y_{t+h} (j < h) with the weight c_{h-j} = alpha + beta phi (1 - phi^{h-j}) /
(1 - phi), hence the variance (the weight of e_{t+h} itself is 1). The local linear trend is
the structural model's (Harvey 1989): l_t = l_{t-1} + b_{t-1} + s_l u_t, b_t = b_{t-1} +
s_b v_t (LOCAL = (s_l, s_b), u and v standard normal, l_0 = LEVEL, b_0 = 0), whose level after
h steps has moved by h b_t, the h level shocks and the slope shocks summed h - j times each.
The growing noise's standard deviation is a share s = NOISE_SHARE of a level that grows by
GROWTH a step.

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
LOCAL = (0.5, 0.05)  # the local linear trend's level and slope shocks' standard deviations
GROWTH, NOISE_SHARE = 1.004, 0.02  # the growing noise's level growth a step, and noise share

Draw = tuple[np.ndarray, np.ndarray]  # values (S, T), true means (S, T, H)
Simulate = Callable[[np.random.Generator, int, int, int], Draw]


@dataclass(frozen=True)
class Law:
    """A law of series: its name, its true season (0: none), `simulate(rng, S, T, H)` ->
    values (S, T) and the true means (S, T, H) of the H values after each, and `sd(H)` the
    true standard deviations (H,) of those values, the same after every value; a law whose
    spread changes over time gives them for each value instead (`sds(S, T, H)`)."""

    name: str
    season: int
    simulate: Simulate
    sd: Callable[[int], np.ndarray] | None = None
    # (S, T, H) standard deviations from the values (S, T) and the horizon H
    sds_of: Callable[[np.ndarray, int], np.ndarray] | None = None

    def sds(self, y: np.ndarray, horizon: int) -> np.ndarray:
        """The true standard deviations (S, T, H) of the H values after each of y (S, T)."""
        if self.sds_of is not None:
            return self.sds_of(y, horizon)
        assert self.sd is not None
        return np.broadcast_to(self.sd(horizon), (*y.shape, horizon))


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


def _seasonal_walk(rng: np.random.Generator, s: int, n: int, horizon: int) -> Draw:
    first, _ = _seasonal(rng, s, PERIOD, 1)
    y = np.empty((s, n))
    y[:, :PERIOD] = first
    e = rng.standard_normal((s, n))
    for t in range(PERIOD, n):
        y[:, t] = y[:, t - PERIOD] + e[:, t]
    # y_{t+h} is the last value of its phase, y_{t+h-PERIOD k}, plus k shocks
    h = _steps(horizon).astype(np.int64)
    back = h - PERIOD * np.ceil(h / PERIOD).astype(np.int64)  # (H,) in -PERIOD+1..0
    at = np.arange(n)[:, None] + back[None, :]  # (T, H)
    return y, y[:, np.maximum(at, 0)]


def _seasonal_walk_sd(horizon: int) -> np.ndarray:
    return np.sqrt(np.ceil(_steps(horizon) / PERIOD))


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


def _local(rng: np.random.Generator, s: int, n: int, horizon: int) -> Draw:
    s_l, s_b = LOCAL
    shocks = rng.standard_normal((3, s, n))
    y, level, slope = np.empty((s, n)), np.empty((s, n)), np.empty((s, n))
    lv, b = np.full(s, LEVEL), np.zeros(s)
    for t in range(n):
        lv, b = lv + b + s_l * shocks[0, :, t], b + s_b * shocks[1, :, t]
        y[:, t] = lv + shocks[2, :, t]
        level[:, t], slope[:, t] = lv, b
    return y, level[:, :, None] + slope[:, :, None] * _steps(horizon)


def local_sd(horizon: int) -> np.ndarray:
    """The local linear trend's h-step standard deviation (H,) given its state."""
    s_l, s_b = LOCAL
    h = _steps(horizon)
    return np.sqrt(1.0 + h * s_l**2 + s_b**2 * (h - 1) * h * (2 * h - 1) / 6)


def _growing_level(n: int, horizon: int) -> np.ndarray:
    return LEVEL * GROWTH ** np.arange(n + horizon, dtype=np.float64)  # (T + H,)


def _growing(rng: np.random.Generator, s: int, n: int, horizon: int) -> Draw:
    level = _growing_level(n, horizon)
    y = level[:n] * (1.0 + NOISE_SHARE * rng.standard_normal((s, n)))
    ahead = np.arange(n)[:, None] + _steps(horizon).astype(np.int64)[None, :]  # (T, H)
    return y, np.broadcast_to(level[ahead], (s, n, horizon)).copy()


def _growing_sds(y: np.ndarray, horizon: int) -> np.ndarray:
    level = _growing_level(y.shape[1], horizon)
    ahead = np.arange(y.shape[1])[:, None] + _steps(horizon).astype(np.int64)[None, :]
    return np.broadcast_to(NOISE_SHARE * level[ahead], (*y.shape, horizon))


LAWS = (
    Law("white noise", 0, _white, lambda h: np.ones(h)),
    Law("AR(1)", 0, _ar1, lambda h: np.sqrt(np.cumsum(AR_PHI ** (2.0 * (_steps(h) - 1))))),
    Law("random walk", 0, _walk, lambda h: np.sqrt(_steps(h))),
    Law("seasonal", PERIOD, _seasonal, lambda h: np.ones(h)),
    Law("trend", 0, _trend, lambda h: np.ones(h)),
    Law("damped trend", 0, _damped, damped_sd),
    Law("seasonal random walk", PERIOD, _seasonal_walk, _seasonal_walk_sd),
    Law("local linear trend", 0, _local, local_sd),
    Law("growing noise", 0, _growing, sds_of=_growing_sds),
)
