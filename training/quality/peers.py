"""The classical peers of `smct quality`: ETS with Gaussian intervals, and a seasonal naive with
empirical intervals.

ETS (statsmodels' ETSModel, additive error) is fitted once, on the history before the
evaluation part: without trend or with an additive damped trend, with an additive season where
the series has one and the history holds at least three of them, the form of lowest AIC. Then
its parameters stay fixed and its linear state space runs through the evaluation part (Hyndman
et al. 2008, class 1):

    y_t = w' x_{t-1} + e_t,    x_t = F x_{t-1} + g e_t,    e_t ~ N(0, sigma^2)

with x = (level, trend, s_{t-1}, ..., s_{t-m}), w = (1, phi, 0, ..., 0, 1), g = (alpha, beta,
gamma, 0, ...). The one-step law at t is N(w' x_{t-1}, sigma^2); a missing value has e_t = 0.
From an origin, the h-step law is N(w' F^{h-1} x, sigma^2 (1 + sum_{j<h} (w' F^{j-1} g)^2)).
sigma^2 is the mean squared one-step residual of the fit (statsmodels' scale).

The seasonal naive forecasts y_t by y_{t-m} (its own forecast of y_{t-m} where that is missing);
its law is that forecast plus its NAIVE_POOL most recent past residuals y_s - y_{s-m} (s < t),
as an empirical distribution.

Shapes: n evaluation points, k states, K origins, H horizon.
"""

from __future__ import annotations

import logging
import math
import warnings
from dataclasses import dataclass

import numpy as np

from training.quality.scores import (
    LEVELS,
    MultiStep,
    OneStep,
    future,
    gaussian_bounds,
    gaussian_crps,
    sample_crps,
)
from training.quality.suite import Series

log = logging.getLogger(__name__)
NAIVE_POOL = 500


@dataclass(frozen=True)
class EtsFit:
    """A fitted additive-error ETS as a linear state space: w (k,), F (k, k), g (k,), the state
    x (k,) after the last history value, sigma the one-step standard deviation."""

    name: str
    w: np.ndarray
    F: np.ndarray
    g: np.ndarray
    x: np.ndarray
    sigma: float

    def filter(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One-step means (n,) of y (n,) with the parameters fixed, and the states (n + 1, k)
        before each value (the last: after all of them). NaN: no correction."""
        states = np.empty((len(y) + 1, len(self.x)))
        mean = np.empty(len(y))
        x = self.x
        for t, value in enumerate(y):
            states[t] = x
            mean[t] = self.w @ x
            err = value - mean[t] if np.isfinite(value) else 0.0
            x = self.F @ x + self.g * err
        states[-1] = x
        return mean, states

    def forecast(self, x: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation (H,) of the next `horizon` values from state x."""
        mean, psi = np.empty(horizon), np.empty(horizon)
        power = np.eye(len(x))  # F^{h-1}
        for h in range(horizon):
            mean[h] = self.w @ power @ x
            psi[h] = self.w @ power @ self.g  # coefficient of e_{t+1} in y_{t+h+1}
            power = self.F @ power
        var = np.concatenate([[1.0], 1.0 + np.cumsum(psi[:-1] ** 2)])
        return mean, self.sigma * np.sqrt(var)


def _state_space(res: object, m: int) -> EtsFit:
    """The linear state space of statsmodels' ETSResults `res` (seasonal period m or 0)."""
    trend, damped = bool(res.has_trend), bool(res.damped_trend)  # type: ignore[attr-defined]
    phi = float(res.damping_trend) if damped else 1.0  # type: ignore[attr-defined]
    k = 2 + m
    w, F, g, x = np.zeros(k), np.zeros((k, k)), np.zeros(k), np.zeros(k)
    w[0], F[0, 0] = 1.0, 1.0
    g[0], x[0] = float(res.smoothing_level), float(np.asarray(res.level)[-1])  # type: ignore[attr-defined]
    if trend:
        w[1], F[0, 1], F[1, 1] = phi, phi, phi
        g[1], x[1] = float(res.smoothing_trend), float(np.asarray(res.slope)[-1])  # type: ignore[attr-defined]
    if m:
        w[-1] = 1.0
        F[2, -1] = 1.0  # s_t = s_{t-m} + gamma e_t
        F[3:, 2:-1] = np.eye(m - 1)  # the older seasonal states move one lag back
        g[2] = float(res.smoothing_seasonal)  # type: ignore[attr-defined]
        x[2:] = np.asarray(res.season)[::-1][:m]  # type: ignore[attr-defined]
    name = "A" + ("Ad" if damped else "A" if trend else "N") + ("A" if m else "N")
    sigma = math.sqrt(float(np.mean(np.asarray(res.resid) ** 2)))  # type: ignore[attr-defined]
    return EtsFit(name, w, F, g, x, sigma)


def filled(history: np.ndarray) -> np.ndarray:
    """The history with missing values interpolated (ETSModel takes no NaN); leading and
    trailing gaps take the nearest value."""
    s = np.asarray(history, dtype=np.float64)
    idx = np.arange(len(s))
    seen = np.isfinite(s)
    return np.interp(idx, idx[seen], s[seen])


def fit_ets(history: np.ndarray, season: int) -> EtsFit:
    """Fit the ETS forms (see the module docstring) on `history` and keep the lowest AIC."""
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    y = filled(history)
    seasons = [0, season] if season > 1 and len(y) >= 3 * season else [0]
    best, best_aic = None, math.inf
    for m in seasons:
        for trend in (False, True):
            model = ETSModel(
                y, error="add", trend="add" if trend else None, damped_trend=trend,
                seasonal="add" if m else None, seasonal_periods=m or None,
                initialization_method="heuristic" if m and len(y) >= 10 * m else "estimated",
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    res = model.fit(disp=False, maxiter=200)
                except (ValueError, np.linalg.LinAlgError) as err:  # pragma: no cover
                    log.warning("ETS %s did not fit: %s", (trend, m), err)
                    continue
            if np.isfinite(res.aic) and res.aic < best_aic:
                best, best_aic = _state_space(res, m), float(res.aic)
    if best is None:  # pragma: no cover
        raise RuntimeError("no ETS form could be fitted")
    return best


def ets(series: Series, origins: np.ndarray, history_cap: int) -> tuple[OneStep, MultiStep, str]:
    """ETS's one-step forecasts of the evaluation part and its forecasts from `origins`
    (absolute indices); fitted on at most the last `history_cap` history values."""
    start, y = series.eval_start, series.values
    fit = fit_ets(y[max(0, start - history_cap) : start], series.season)
    mean, states = fit.filter(y[start:])
    sigma = np.full_like(mean, fit.sigma)
    one = OneStep(mean, gaussian_bounds(mean, sigma), gaussian_crps(mean, sigma, y[start:]))
    h = series.horizon
    laws = [fit.forecast(states[o - start], h) for o in origins]
    mu = np.stack([m for m, _ in laws])  # (K, H)
    sd = np.stack([s for _, s in laws])
    truth = np.stack([future(y, o, h) for o in origins])
    multi = MultiStep(origins, mu, gaussian_bounds(mu, sd), gaussian_crps(mu, sd, truth))
    return one, multi, fit.name


def seasonal_naive(series: Series, pool: int = NAIVE_POOL) -> OneStep:
    """The seasonal naive's one-step forecasts of the evaluation part, with the empirical law
    of its last `pool` past residuals (see the module docstring)."""
    y, m, start = series.values, series.season, series.eval_start
    own = y.copy()  # the values, each missing one replaced by the naive's forecast of it
    residuals: list[float] = []
    median, crps = [], []
    bounds: dict[float, tuple[list[float], list[float]]] = {lv: ([], []) for lv in LEVELS}
    for t in range(m, len(y)):
        point = own[t - m]
        if not np.isfinite(point):  # no value of that phase yet: the last observed one
            seen = np.flatnonzero(np.isfinite(y[:t]))
            if not seen.size:
                continue
            point = y[seen[-1]]
        if t >= start:
            past = np.asarray(residuals[-pool:] or [0.0])
            law = point + past
            median.append(float(np.median(law)))
            for lv in LEVELS:
                lo, hi = np.quantile(law, [0.5 - lv / 2.0, 0.5 + lv / 2.0])
                bounds[lv][0].append(float(lo))
                bounds[lv][1].append(float(hi))
            crps.append(float(sample_crps(law, y[t])) if np.isfinite(y[t]) else math.nan)
        if np.isfinite(y[t]):
            residuals.append(float(y[t] - point))
        else:
            own[t] = point
    return OneStep(
        np.asarray(median),
        {lv: (np.asarray(lo), np.asarray(hi)) for lv, (lo, hi) in bounds.items()},
        np.asarray(crps),
    )
