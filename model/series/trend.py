"""Each series' damped trend: fitted on its history, updated online, carried into forecasts.

The model reads a window of a series scaled by its own level and spread, so it forecasts a
level that moves as its training series moved: a series that grows steadily is forecast flat.
ETS's additive damped-trend form (Gardner and McKenzie 1985; Hyndman et al. 2008) keeps a
trend b per series beside its level l:

    y_t = l_{t-1} + phi b_{t-1} + e_t,   l_t = l_{t-1} + phi b_{t-1} + alpha e_t,
    b_t = phi b_{t-1} + beta e_t,        forecast  l_t + (phi + ... + phi^h) b_t.

Written as y_t = z_t + c_t with the trend's sum c_t = c_{t-1} + phi b_{t-1}, z is a local level
(z_t = m_{t-1} + e_t, m_t = m_{t-1} + alpha e_t): the per-series layer keeps b and c, takes c
out of every value before the model sees it (as the seasonal profile is taken out), lets the
model forecast z (its level: the network's part), and puts c back into every law and forecast
path, carried on with its damping: c_{t+h} = c_t + b_t (phi + ... + phi^h).

When a series is created, alpha, beta and phi are fitted by least squares of the one-step
errors of that recursion over its history (a grid, `fit`), beside the same recursion without a
trend (b = 0); the trend is kept where it lowers the AIC (Akaike: 3 more parameters, beta, phi
and b_0). beta and phi stay; b and c move online at every step with the model's own one-step
error e_t (missing: 0), each error clipped to CLIP standard deviations of the law issued:
    c_t = c_{t-1} + phi b_{t-1},   b_t = phi b_{t-1} + beta e_t.
A series without a trend keeps none (phi = 0: c and b stay 0).

A forecast's paths carry the trend on with their own innovations (`PathTrend`): each path's
slope moves by beta times its draw's noise, so the paths spread as the trend's uncertainty
grows, as ETS's simulated paths do.

Shapes: B series, N paths, T history, O targets, G grid points, H horizon.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np

ALPHAS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0)
BETA_SHARES = (0.01, 0.03, 0.1, 0.3)  # beta as a share of alpha (ETS: 0 < beta < alpha)
PHIS = (0.8, 0.9, 0.95, 0.98, 1.0)  # 1: Holt's linear trend, not damped (ETS's AAN)
FIT_VALUES = 512  # the most recent values a fit reads
START = 4  # b_0: the mean slope of the first START steps
CLIP = 3.0  # an online step's error counts up to this many standard deviations
N_FIELDS = 4  # phi, beta, b, c per target


@dataclass(frozen=True)
class Trend:
    """The trend of B series as the state keeps it, (B, O) each (float64): phi (0: none),
    beta, the slope b and the trend's sum c after the last step."""

    phi: np.ndarray
    beta: np.ndarray
    slope: np.ndarray
    total: np.ndarray

    @classmethod
    def of(cls, packed: np.ndarray) -> Trend:
        """From the state's (B, O, N_FIELDS) array."""
        return cls(*(packed[..., i] for i in range(N_FIELDS)))

    def packed(self) -> np.ndarray:
        return np.stack([self.phi, self.beta, self.slope, self.total], axis=-1)

    def ahead(self, steps: np.ndarray) -> np.ndarray:
        """The trend's sum c at `steps` (B,) or (B, H) >= 1 steps after the last step: (B, O)
        or (B, H, O)."""
        k = np.asarray(steps, np.float64)[..., None]  # (B, [H,] 1)
        shape = (len(self.phi),) + (1,) * (k.ndim - 2) + (self.phi.shape[-1],)
        phi, b, c = (a.reshape(shape) for a in (self.phi, self.slope, self.total))
        damped = np.where(phi < 1.0, phi * (1.0 - phi**k) / np.where(phi < 1.0, 1.0 - phi, 1.0),
                          k)  # phi + ... + phi^k
        return np.asarray(c + b * damped)

    def step(self, error: np.ndarray) -> Trend:
        """After a step whose error (B, O) was `error` (0: missing, or not to learn from)."""
        return Trend(
            self.phi, self.beta, self.phi * self.slope + self.beta * error,
            self.total + self.phi * self.slope,
        )


class PathTrend:
    """The trend carried along N forecast paths of B series: each path's slope moves with
    that path's own innovations, as ETS's paths do (Hyndman et al. 2008, section 6.1), so
    that the spread of the paths grows with the trend's uncertainty."""

    def __init__(self, packed: np.ndarray, n: int) -> None:
        t = Trend.of(packed)  # (B, O) each
        self.phi, self.beta = t.phi[:, None], t.beta[:, None]  # (B, 1, O)
        self.slope = np.repeat(t.slope[:, None], n, axis=1)  # (B, N, O)
        self.total = np.repeat(t.total[:, None], n, axis=1)

    def step(self, innovation: np.ndarray) -> np.ndarray:
        """The trend's sum (B, N, O) at the next step of each path, then its slope moved by
        the path's innovation there (B, N, O), in series units."""
        self.total = self.total + self.phi * self.slope
        self.slope = self.phi * self.slope + self.beta * innovation
        return self.total


def fit(history: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The damped trend of one history (T, O) (NaN: missing), fitted on its last FIT_VALUES:
    its packed trend (O, N_FIELDS) after its last value, and the trend's sum c (T, O) at each
    of its values (0 before those fitted, and for a target without a trend)."""
    y = np.asarray(history, np.float64)
    packed = np.zeros((y.shape[1], N_FIELDS))
    sums = np.zeros(y.shape)
    head = max(0, len(y) - FIT_VALUES)
    for j in range(y.shape[1]):
        found = _fit_one(y[head:, j])
        if found is not None:
            packed[j], sums[head:, j] = found
    return packed, sums


def _fit_one(y: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The packed trend (N_FIELDS,) after y (T,) and c at each value (T,), or None where the
    trend does not lower the AIC (or fewer than 3 START values are observed)."""
    seen = np.flatnonzero(np.isfinite(y))
    if len(seen) < 3 * START:
        return None
    z = y[seen[0] :]
    b0 = float(np.mean(np.diff(z[np.isfinite(z)][: START + 1])))
    grid = np.array(
        [(a, a * s, p) for a, s, p in product(ALPHAS, BETA_SHARES, PHIS)]
        + [(a, 0.0, 0.0) for a in ALPHAS]  # no trend
    )  # (G, 3)
    trended = grid[:, 2] > 0
    sse, _, _ = _run(z, grid, np.where(trended, b0, 0.0))
    n = float(np.isfinite(z[1:]).sum())
    aic = n * np.log(np.maximum(sse, 1e-300) / n) + np.log(n) * np.where(trended, 5, 2)
    best = int(np.argmin(aic))
    if not trended[best]:
        return None
    _, slope, sums = _run(z, grid[best : best + 1], np.array([b0]))
    out = np.zeros(len(y))
    out[seen[0] :] = sums[:, 0]
    _, beta, phi = grid[best]
    return np.array([phi, beta, slope[0], out[-1]]), out


def _run(
    y: np.ndarray, grid: np.ndarray, b0: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The damped-trend recursion over y (T,) for each grid point (alpha, beta, phi) (G, 3)
    from level y_0 and slope b0 (G,): the sum of squared one-step errors (G,), the slope after
    the last value (G,), and the trend's sum c at each value (T, G)."""
    alpha, beta, phi = grid.T
    level, slope = np.full(len(grid), y[0]), b0.astype(np.float64)
    total = np.zeros(len(grid))
    sums = np.zeros((len(y), len(grid)))
    sse = np.zeros(len(grid))
    for t in range(1, len(y)):
        pred = level + phi * slope
        total = total + phi * slope
        sums[t] = total
        err = y[t] - pred if np.isfinite(y[t]) else np.zeros(len(grid))
        sse += err * err
        level = pred + alpha * err
        slope = phi * slope + beta * err
    return sse, slope, sums
