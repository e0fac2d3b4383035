"""The classical peers of `smct quality` and `smct backtest`, statsforecast's (the
implementations users compare with): AutoETS, AutoARIMA, AutoTheta and the seasonal naive.

Each is fitted once, on the history before the evaluation part (its last `history_cap` values);
then its parameters stay fixed, as statsforecast's cross-validation without refitting does (its
`forward`):

- one step ahead, the law at t is N(m_t, s_t^2): m_t the fitted model's one-step mean given the
  values before t (the in-sample fitted values of `forward` over the history and the evaluation
  part), s_t its one-step standard deviation as the fit on the history gives it: sigma for
  additive errors, sigma |m_t| for ETS's multiplicative ones (sigma^2 of the fit); the seasonal
  naive, which has no parameter, takes its sigma from the values before t; Theta's law is its
  `forward`'s from the values before t (it decomposes the season of the values it is given, so
  its in-sample fit over the whole series would see ahead);
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

Shapes: n values, K origins, H horizon, c regressors.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtri

from training.quality.scores import MultiStep, OneStep, future, gaussian_bounds, gaussian_crps
from training.quality.suite import Series

PEERS = ("ETS", "ARIMA", "Theta", "naive")  # names in the tables
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
        if "modeltype" in fit:  # Theta
            return str(fit["modeltype"])
        if "sigma" in fit:  # the seasonal naive
            return f"SeasonalNaive({self.model.season_length})"
        from statsforecast.arima import arima_string

        extra = f" + {self.pairs} Fourier pairs of {self.period}" if self.pairs else ""
        return arima_string(fit).strip() + extra

    def regressors(self, t: np.ndarray) -> np.ndarray | None:
        """The exogenous regressors (n, c) at absolute indices t, or None."""
        return fourier_terms(t, self.period, self.pairs) if self.pairs else None

    def one_step(self, y: np.ndarray, start: int) -> tuple[np.ndarray, np.ndarray]:
        """Means and standard deviations (n - start,) of each y[t], t >= start, given the
        filled values y before it (the whole series)."""
        fit = self.model.model_
        if "modeltype" in fit:  # Theta decomposes the values it is given: one forward a value
            laws = [self.forecast(y, t, 1) for t in range(start, len(y))]
            return np.array([m[0] for m, _ in laws]), np.array([s[0] for _, s in laws])
        out = self._forward(y[self.first :], np.arange(self.first, len(y)), 1, fitted=True)
        mean = np.asarray(out["fitted"], dtype=np.float64)[start - self.first :]
        if "sigma" in fit:  # the seasonal naive: no parameter, sigma from the values before t
            return mean, self._naive_sigmas(y[self.first :])[start - self.first :]
        sigma = math.sqrt(float(fit["sigma2"]))  # ETS, ARIMA
        multiplicative = "components" in fit and fit["components"][0] == "M"
        return mean, sigma * (np.abs(mean) if multiplicative else np.ones_like(mean))

    def _naive_sigmas(self, z: np.ndarray) -> np.ndarray:
        """(n,) the seasonal naive's sigma before each z[i], as its `forward` on z[:i] takes
        it: sqrt(sum of the squared residuals z_s - z_{s-m} / (i - m)), NaN before a season."""
        m = self.model.season_length
        squares = np.r_[np.zeros(m), (z[m:] - z[:-m]) ** 2]
        seen = np.arange(len(z), dtype=np.float64) - m
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(seen > 0, np.sqrt(np.r_[0.0, np.cumsum(squares)[:-1]] / seen), np.nan)

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
    """statsforecast's model of `name` (one of PEERS) fitted on the filled values
    y[first:start] with the season (module docstring)."""
    from statsforecast.models import AutoARIMA, AutoETS, AutoTheta, SeasonalNaive

    history, t = y[first:start], np.arange(first, start)
    period, pairs, length = 1, 0, max(season, 1)
    if name == "ARIMA" and season > LONG_SEASON and len(history) >= 3 * season:
        period, pairs, length = season, fourier_pairs(history, t, season), 1  # as regressors
    kinds = {"ETS": AutoETS, "ARIMA": AutoARIMA, "Theta": AutoTheta, "naive": SeasonalNaive}
    model = kinds[name](season_length=length)
    peer = Peer(name, model, first, period, pairs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(history, X=peer.regressors(t))
    return peer


def statsforecast_peer(
    name: str, series: Series, origins: np.ndarray, history_cap: int
) -> tuple[OneStep, MultiStep, str]:
    """The peer `name`'s one-step forecasts of the evaluation part and its forecasts from
    `origins` (absolute indices); fitted on at most the last `history_cap` history values."""
    start, y, h = series.eval_start, filled(series.values), series.horizon
    peer = fit_peer(name, y, max(0, start - history_cap), start, series.season)
    mean, sd = peer.one_step(y, start)
    truth = series.values[start:]
    one = OneStep(mean, gaussian_bounds(mean, sd), gaussian_crps(mean, sd, truth))
    laws = [peer.forecast(y, int(o), h) for o in origins]
    mu = np.stack([m for m, _ in laws])  # (K, H)
    sigma = np.stack([s for _, s in laws])
    ahead = np.stack([future(series.values, o, h) for o in origins])
    multi = MultiStep(origins, mu, gaussian_bounds(mu, sigma), gaussian_crps(mu, sigma, ahead))
    return one, multi, peer.form
