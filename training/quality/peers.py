"""The classical peers of `smct quality` and `smct backtest`: statsforecast's AutoETS and
AutoARIMA (the implementations users compare with), and a seasonal naive with empirical intervals.

AutoETS and AutoARIMA are fitted once, on the history before the evaluation part (its last
`history_cap` values); then their parameters stay fixed, as statsforecast's cross-validation
without refitting does (its `forward`):

- one step ahead, the law at t is N(m_t, s_t^2): m_t the fitted model's one-step mean given the
  values before t (the in-sample fitted values of `forward` over the history and the evaluation
  part), s_t its one-step standard deviation: sigma for additive errors, sigma |m_t| for ETS's
  multiplicative ones (sigma^2 of the fit);
- from an origin, statsforecast's forecast of `forward` on the values before it: its mean, and
  the standard deviation of its Gaussian 80 % interval (half its width over z_0.9).

statsforecast takes no missing value: each is replaced by the last value before it (leading ones
by the first observed), which uses nothing after it. A season longer than LONG_SEASON would make
AutoARIMA's seasonal search minutes long (a weekly season of 52: over six minutes on 1,600
values), so it enters ARIMA as K Fourier pairs sin(2 pi k t / m), cos(2 pi k t / m), k = 1..K, as
exogenous regressors without a seasonal part (dynamic harmonic regression, Hyndman &
Athanasopoulos, Forecasting: principles and practice, 10.5), K <= MAX_FOURIER of lowest AIC in a
least-squares regression of the history on a constant, a linear trend and them. AutoETS takes
the season as it is (statsforecast's ETS leaves out seasons longer than 24).

The seasonal naive forecasts y_t by y_{t-m} (its own forecast of y_{t-m} where that is missing);
its law is that forecast plus its NAIVE_POOL most recent past residuals y_s - y_{s-m} (s < t),
as an empirical distribution.

Shapes: n values, K origins, H horizon, c regressors.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtri

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

NAIVE_POOL = 500
LONG_SEASON, MAX_FOURIER = 12, 5
_Z80 = float(ndtri(0.9))  # half the width of a Gaussian 80 % interval, in standard deviations


def filled(values: np.ndarray) -> np.ndarray:
    """The values with each missing one replaced by the last before it (leading gaps: the first
    observed value); nothing after a value is used."""
    y = np.asarray(values, dtype=np.float64).copy()
    seen = np.flatnonzero(np.isfinite(y))
    if not seen.size:
        raise ValueError("the series has no value")
    y[: seen[0]] = y[seen[0]]
    for t in range(seen[0] + 1, len(y)):
        if not np.isfinite(y[t]):
            y[t] = y[t - 1]
    return y


def fourier_terms(t: np.ndarray, period: int, pairs: int) -> np.ndarray:
    """sin and cos of 2 pi k t / period for k = 1..pairs: (n, 2 pairs)."""
    angle = 2.0 * math.pi * np.outer(t, np.arange(1, pairs + 1)) / period
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=1)


def fourier_pairs(y: np.ndarray, t: np.ndarray, period: int) -> int:
    """K in 0..MAX_FOURIER of lowest AIC in the least-squares regression of y on a constant, a
    linear trend and K Fourier pairs (the trend keeps a growing series' from counting)."""
    best, best_aic = 0, math.inf
    for k in range(min(MAX_FOURIER, period // 2) + 1):
        design = np.c_[np.ones(len(y)), t, fourier_terms(t, period, k)]
        resid = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
        aic = len(y) * math.log(max(float(np.mean(resid**2)), 1e-300)) + 2 * design.shape[1]
        if aic < best_aic:
            best, best_aic = k, aic
    return best


@dataclass(frozen=True)
class Peer:
    """A statsforecast model fitted on y[first:start] (`model`), its name and form, and the
    Fourier pairs (period, K) its regressors hold (K = 0: none)."""

    name: str
    model: Any
    first: int
    period: int = 1
    pairs: int = 0

    @property
    def form(self) -> str:
        fit = self.model.model_
        if "method" in fit:  # ETS
            return str(fit["method"])
        from statsforecast.arima import arima_string

        extra = f" + {self.pairs} Fourier pairs of {self.period}" if self.pairs else ""
        return arima_string(fit).strip() + extra

    def regressors(self, t: np.ndarray) -> np.ndarray | None:
        """The exogenous regressors (n, c) at absolute indices t, or None."""
        return fourier_terms(t, self.period, self.pairs) if self.pairs else None

    def one_step(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Means and standard deviations (n,) of each y[first + i] given the values before it,
        for the filled values y (the whole series)."""
        z = y[self.first :]
        t = np.arange(self.first, len(y))
        out = self._forward(z, t, 1, fitted=True)
        mean = np.asarray(out["fitted"], dtype=np.float64)
        fit = self.model.model_
        sigma = math.sqrt(float(fit["sigma2"]))
        multiplicative = "components" in fit and fit["components"][0] == "M"
        return mean, sigma * (np.abs(mean) if multiplicative else np.ones_like(mean))

    def forecast(self, y: np.ndarray, origin: int, horizon: int) -> tuple[np.ndarray, np.ndarray]:
        """statsforecast's mean and standard deviation (H,) of y[origin:origin + horizon] given
        the filled values before `origin`."""
        t = np.arange(self.first, origin)
        out = self._forward(y[self.first : origin], t, horizon, level=[80])
        sd = (np.asarray(out["hi-80"]) - np.asarray(out["lo-80"])) / (2.0 * _Z80)
        return np.asarray(out["mean"], dtype=np.float64), sd

    def _forward(self, z: np.ndarray, t: np.ndarray, h: int, **kwargs: Any) -> dict[str, Any]:
        x, ahead = self.regressors(t), self.regressors(np.arange(t[-1] + 1, t[-1] + 1 + h))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return dict(self.model.forward(z, h=h, X=x, X_future=ahead, **kwargs))


def fit_peer(name: str, y: np.ndarray, first: int, start: int, season: int) -> Peer:
    """statsforecast's AutoETS or AutoARIMA (`name` "ETS" or "ARIMA") fitted on the filled
    values y[first:start] with the season (module docstring)."""
    from statsforecast.models import AutoARIMA, AutoETS

    history, t = y[first:start], np.arange(first, start)
    period, pairs, length = 1, 0, max(season, 1)
    if name == "ARIMA" and season > LONG_SEASON and len(history) >= 3 * season:
        period, pairs, length = season, fourier_pairs(history, t, season), 1  # as regressors
    model = (AutoETS if name == "ETS" else AutoARIMA)(season_length=length)
    peer = Peer(name, model, first, period, pairs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(history, X=peer.regressors(t))
    return peer


def statsforecast_peer(
    name: str, series: Series, origins: np.ndarray, history_cap: int
) -> tuple[OneStep, MultiStep, str]:
    """AutoETS's or AutoARIMA's one-step forecasts of the evaluation part and its forecasts
    from `origins` (absolute indices); fitted on at most the last `history_cap` history values."""
    start, y, h = series.eval_start, filled(series.values), series.horizon
    peer = fit_peer(name, y, max(0, start - history_cap), start, series.season)
    mean, sd = (a[start - peer.first :] for a in peer.one_step(y))
    truth = series.values[start:]
    one = OneStep(mean, gaussian_bounds(mean, sd), gaussian_crps(mean, sd, truth))
    laws = [peer.forecast(y, int(o), h) for o in origins]
    mu = np.stack([m for m, _ in laws])  # (K, H)
    sigma = np.stack([s for _, s in laws])
    ahead = np.stack([future(series.values, o, h) for o in origins])
    multi = MultiStep(origins, mu, gaussian_bounds(mu, sigma), gaussian_crps(mu, sigma, ahead))
    return one, multi, peer.form


def ets(series: Series, origins: np.ndarray, history_cap: int) -> tuple[OneStep, MultiStep, str]:
    """statsforecast's AutoETS on `series` (statsforecast_peer)."""
    return statsforecast_peer("ETS", series, origins, history_cap)


def arima(series: Series, origins: np.ndarray, history_cap: int) -> tuple[OneStep, MultiStep, str]:
    """statsforecast's AutoARIMA on `series` (statsforecast_peer)."""
    return statsforecast_peer("ARIMA", series, origins, history_cap)


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
