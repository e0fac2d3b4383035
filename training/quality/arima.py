"""The ARIMA peer of `smct quality`: a regression with (seasonal) ARIMA errors, its orders
chosen by a stepwise search on AICc (Hyndman & Khandakar 2008, R's `auto.arima`), with Gaussian
intervals.

It is fitted once, on the history before the evaluation part (its last `history_cap` values,
NaN where missing), as statsmodels' SARIMAX:

    y_t = x_t' beta + u_t,
    phi(B) Phi(B^m) (1 - B)^d (1 - B^m)^D u_t = theta(B) Theta(B^m) e_t,   e_t ~ N(0, sigma^2)

- D = 1 where the strength of the season in the history (Wang, Smith & Hyndman 2006, from an
  STL decomposition) is above SEASONAL_STRENGTH, else 0; then d in 0..MAX_D by repeated KPSS
  tests at 5 % (on the history with missing values interpolated, as every test and least-squares
  fit of the search);
- a season of m <= LONG_SEASON enters the ARMA polynomials (P, Q <= 1). A longer one (24, 52)
  would make the state m times larger and the fit minutes long, so it enters x_t as K pairs of
  Fourier terms sin(2 pi k t / m), cos(2 pi k t / m), k = 1..K, with D = 0 (dynamic harmonic
  regression, Hyndman & Athanasopoulos, Forecasting: principles and practice, 10.5); K <=
  MAX_FOURIER is the one of lowest AIC in a least-squares regression of the history on a
  constant, a linear trend and them;
- x_t also holds a constant where d + D = 0, or a drift t where d + D = 1, if it lowers AICc;
- p, q <= MAX_PQ by the stepwise search on AICc: four starting models, then the best one's
  neighbours (p, q, P or Q one up or down, p and q together, the constant in or out) while one
  is better, at most MAX_FITS specs. As auto.arima does for long series, the search fits each
  spec by conditional least squares (the residuals of the ARMA recursion from zero, on the
  differenced history; the coefficients kept stationary and invertible by Monahan's transform)
  and leaves out a spec with a root within 0.001 of the unit circle; the chosen spec alone is
  fitted by maximum likelihood (the Kalman filter's exact likelihood of the differenced
  history, which skips the missing values; sigma^2 concentrated out), from its least-squares
  estimates.

Then its parameters stay fixed and its state space (the differences in the state) runs through
the history and the evaluation part: the Kalman filter's one-step law at t is
N(x_t' beta + Z a_t, Z P_t Z'), (a_t, P_t) the state's law given the values before t; a missing
value corrects nothing. From an origin o the h-step law is
N(x_{o+h-1}' beta + Z T^{h-1} a_o, Z (T^{h-1} P_o T^{h-1}' + sum_{j<h-1} T^j R Q R' T^j') Z').

Shapes: n values, k states, K origins, H horizon.
"""

from __future__ import annotations

import logging
import math
import warnings
from dataclasses import dataclass, replace

import numpy as np

from training.quality.peers import filled
from training.quality.scores import MultiStep, OneStep, future, gaussian_bounds, gaussian_crps
from training.quality.suite import Series

log = logging.getLogger(__name__)
LONG_SEASON, MAX_FOURIER, SEASONAL_STRENGTH = 12, 5, 0.64
MAX_D, MAX_PQ, MAX_FITS, MAXITER, CSS_EVALS = 2, 3, 30, 50, 50


@dataclass(frozen=True)
class Spec:
    """An ARIMA(p, d, q)(P, D, Q)[m] with K Fourier pairs of period `period` and a constant (or
    drift) in the regression."""

    p: int = 0
    d: int = 0
    q: int = 0
    P: int = 0  # noqa: N815 (the seasonal orders' usual names)
    D: int = 0  # noqa: N815
    Q: int = 0  # noqa: N815
    m: int = 0  # seasonal ARIMA period, 0: none
    fourier: int = 0
    period: int = 0
    const: bool = False

    @property
    def name(self) -> str:
        text = f"({self.p},{self.d},{self.q})"
        if self.m:
            text += f"({self.P},{self.D},{self.Q})[{self.m}]"
        if self.fourier:
            text += f"+F{self.fourier}[{self.period}]"
        if self.const:
            text += "+c" if self.d + self.D == 0 else "+drift"
        return text

    def regressors(self, t: np.ndarray) -> np.ndarray | None:
        """x_t at the absolute indices t (n,): (n, columns), None when there is none."""
        cols = [fourier_terms(t, self.period, self.fourier)] if self.fourier else []
        if self.const:
            column = np.ones(len(t)) if self.d + self.D == 0 else t.astype(np.float64)
            cols.append(column[:, None])
        return np.concatenate(cols, axis=1) if cols else None


def fourier_terms(t: np.ndarray, period: int, pairs: int) -> np.ndarray:
    """sin and cos of 2 pi k t / period for k = 1..pairs: (n, 2 pairs)."""
    angle = 2.0 * math.pi * np.outer(t, np.arange(1, pairs + 1)) / period
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=1)


# --------------------------------------------------------------------------- the orders


def seasonal_strength(y: np.ndarray, m: int) -> float:
    """max(0, 1 - var(remainder) / var(season + remainder)) of an STL decomposition of y."""
    from statsmodels.tsa.seasonal import STL

    parts = STL(y, period=m).fit()
    spread = np.var(parts.seasonal + parts.resid)
    return max(0.0, 1.0 - float(np.var(parts.resid) / spread)) if spread > 0 else 0.0


def differences(y: np.ndarray, x: np.ndarray | None = None) -> int:
    """d in 0..MAX_D: how often y (without NaN), its regression on x (n, c) taken out, must be
    differenced for the KPSS test of level stationarity (5 %) to accept it."""
    from statsmodels.tsa.stattools import kpss

    z = y - np.mean(y)
    if x is not None:
        design = np.c_[np.ones(len(y)), x]
        z = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
    for d in range(MAX_D):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # p-values beyond the table's
            if len(z) < 10 or np.ptp(z) == 0 or kpss(z, nlags="auto")[1] >= 0.05:
                return d
        z = np.diff(z)
    return MAX_D


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


def base_spec(y: np.ndarray, t: np.ndarray, season: int) -> Spec:
    """The differences, the form of the season and its Fourier pairs of y (n,) without NaN
    (module docstring)."""
    if season <= 1 or len(y) < 3 * season:
        return Spec(d=differences(y))
    if season > LONG_SEASON:
        k = fourier_pairs(y, t, season)
        x = fourier_terms(t, season, k) if k else None
        return Spec(d=differences(y, x), fourier=k, period=season)
    big_d = int(seasonal_strength(y, season) > SEASONAL_STRENGTH)
    z = y[season:] - y[:-season] if big_d else y
    return Spec(d=differences(z), D=big_d, m=season)


# --------------------------------------------------------------------------- the search


def difference(a: np.ndarray, spec: Spec) -> np.ndarray:
    """(1 - B)^d (1 - B^m)^D of a (n,) or (n, c) along its first axis."""
    for _ in range(spec.D):
        a = a[spec.m :] - a[: -spec.m]
    for _ in range(spec.d):
        a = np.diff(a, axis=0)
    return a


def polynomials(spec: Spec, coef: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """phi(B) Phi(B^m) and theta(B) Theta(B^m) as coefficients of B^0, B^1, ... of the ARMA
    coefficients `coef` (ar p, ma q, seasonal ar P, seasonal ma Q; statsmodels' signs)."""
    p, q, big_p, m = spec.p, spec.q, spec.P, spec.m
    phi, theta = np.zeros(p + 1), np.zeros(q + 1)
    phi[0], phi[1:], theta[0], theta[1:] = 1.0, -coef[:p], 1.0, coef[p : p + q]
    sar, sma = coef[p + q : p + q + big_p], coef[p + q + big_p :]
    if len(sar):
        lags = np.zeros(m * len(sar) + 1)
        lags[0], lags[m::m] = 1.0, -sar
        phi = np.convolve(phi, lags)
    if len(sma):
        lags = np.zeros(m * len(sma) + 1)
        lags[0], lags[m::m] = 1.0, sma
        theta = np.convolve(theta, lags)
    return phi, theta


def constrained(spec: Spec, free: np.ndarray) -> np.ndarray:
    """The ARMA coefficients (as `polynomials` takes them) of free parameters: each polynomial
    stationary or invertible whatever they are (Monahan's transform, as statsmodels' SARIMAX)."""
    from statsmodels.tsa.statespace.tools import constrain_stationary_univariate as stationary

    out, at = np.empty_like(free), 0
    for size, sign in ((spec.p, 1.0), (spec.q, -1.0), (spec.P, 1.0), (spec.Q, -1.0)):
        if size:
            out[at : at + size] = sign * stationary(sign * free[at : at + size])
        at += size
    return out


def _inside(poly: np.ndarray) -> bool:
    """Whether the polynomial (coefficients of B^0, B^1, ...) has a root on or inside the unit
    circle (a nonstationary AR, a non-invertible MA)."""
    return len(poly) > 1 and bool(np.min(np.abs(np.roots(poly[::-1]))) <= 1.001)


def css(y: np.ndarray, t: np.ndarray, spec: Spec) -> tuple[float, np.ndarray]:
    """AICc and parameters (beta, then the ARMA coefficients) of `spec` by conditional least
    squares on y (n,) without NaN: the residuals of the ARMA recursion from zero, the first
    MAX_PQ + m of them left out alike for every spec; (inf, ...) for a nonstationary or
    non-invertible fit."""
    from scipy.optimize import least_squares
    from scipy.signal import lfilter

    z = difference(y, spec)
    x = spec.regressors(t)
    x = None if x is None else difference(x, spec)
    c = 0 if x is None else x.shape[1]
    k = spec.p + spec.q + spec.P + spec.Q
    cond = MAX_PQ + spec.m

    def resid(params: np.ndarray) -> np.ndarray:
        w = z if x is None else z - x @ params[:c]
        e = lfilter(*polynomials(spec, constrained(spec, params[c:])), w)[cond:]
        return e if np.isfinite(e).all() else np.full_like(e, 1e12)

    start = np.zeros(c + k)
    if x is not None:
        start[:c] = np.linalg.lstsq(x, z, rcond=None)[0]
    if c + k:
        start = least_squares(resid, start, method="lm", max_nfev=CSS_EVALS * (c + k + 1)).x
    params = np.r_[start[:c], constrained(spec, start[c:])]
    phi, theta = polynomials(spec, params[c:])
    e = resid(start)
    n, dof = len(e), c + k + 1
    if _inside(phi) or _inside(theta) or n <= dof + 1:
        return math.inf, params
    aic = n * math.log(max(float(np.mean(e**2)), 1e-300)) + 2 * dof
    return aic + 2 * dof * (dof + 1) / (n - dof - 1), params


def _neighbours(spec: Spec, const_allowed: bool) -> list[Spec]:
    """The stepwise search's moves from `spec`, within the bounds."""
    seasonal = 1 if spec.m else 0
    moves = [dict(p=1), dict(p=-1), dict(q=1), dict(q=-1), dict(p=1, q=1), dict(p=-1, q=-1)]
    moves += [dict(P=1), dict(P=-1), dict(Q=1), dict(Q=-1)] if seasonal else []
    out = []
    for move in moves:
        orders = {k: getattr(spec, k) + v for k, v in move.items()}
        bound = {"p": MAX_PQ, "q": MAX_PQ, "P": seasonal, "Q": seasonal}
        if all(0 <= v <= bound[k] for k, v in orders.items()):
            out.append(replace(spec, **orders))
    return out + ([replace(spec, const=not spec.const)] if const_allowed else [])


def search(history: np.ndarray, t: np.ndarray, season: int) -> dict[Spec, tuple[float, np.ndarray]]:
    """The stepwise search (module docstring) on `history` (n,) at the indices t, by
    conditional least squares on the history with its missing values interpolated: every
    spec tried, with its AICc and parameters."""
    y = filled(history)
    base = base_spec(y, t, season)
    const = base.d + base.D <= 1
    seasonal = 1 if base.m else 0
    tried: dict[Spec, tuple[float, np.ndarray]] = {}
    for p, q, big_p, big_q in ((2, 2, 1, 1), (0, 0, 0, 0), (1, 0, 1, 0), (0, 1, 0, 1)):
        spec = replace(base, p=p, q=q, P=big_p * seasonal, Q=big_q * seasonal, const=const)
        tried.setdefault(spec, css(y, t, spec))
    best = min(tried, key=lambda s: tried[s][0])
    improved = True
    while improved:
        improved = False
        for spec in _neighbours(best, const):
            if spec not in tried and len(tried) < MAX_FITS:
                tried[spec] = css(y, t, spec)
                if tried[spec][0] < tried[best][0]:
                    best, improved = spec, True
                    break
    return tried


def fit_arima(history: np.ndarray, season: int, first: int = 0) -> tuple[Spec, object]:
    """The spec the stepwise search chose on `history` (n,), whose first value has absolute
    index `first`, and statsmodels' results of its maximum likelihood fit (the Kalman filter's
    exact likelihood with the missing values left out, from the search's parameters). Where
    that fails, the next spec of the search."""
    from statsmodels.tsa.statespace.sarimax import SARIMAX

    t = np.arange(first, first + len(history))
    tried = search(history, t, season)
    for spec in sorted(tried, key=lambda s: tried[s][0]):
        model = SARIMAX(
            history, exog=spec.regressors(t), order=(spec.p, spec.d, spec.q),
            seasonal_order=(spec.P, spec.D, spec.Q, spec.m), simple_differencing=True,
            concentrate_scale=True,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                if model.k_params:
                    res = model.fit(tried[spec][1], disp=False, maxiter=MAXITER)
                else:
                    res = model.filter(np.array([]))
            except (ValueError, np.linalg.LinAlgError) as err:  # pragma: no cover
                log.warning("ARIMA%s did not fit: %s", spec.name, err)
                continue
        if np.isfinite(res.llf):
            log.info("ARIMA%s of %d specs", spec.name, len(tried))
            return spec, res
    raise RuntimeError("no ARIMA could be fitted")  # pragma: no cover


# --------------------------------------------------------------------------- the filter


@dataclass(frozen=True)
class ArimaFit:
    """A fitted ARIMA as a linear state space run through a stretch of values (window): the
    one-step means and sd (n,), the states' means (n + 1, k) and covariances (n + 1, k, k)
    given the values before each (the last: after all), Z (k,), T (k, k), R Q R' (k, k), the
    regression's coefficients and the window's first absolute index."""

    spec: Spec
    mean: np.ndarray
    sd: np.ndarray
    states: np.ndarray
    covs: np.ndarray
    Z: np.ndarray  # noqa: N815 (the state space's usual names)
    T: np.ndarray  # noqa: N815
    RQR: np.ndarray  # noqa: N815
    beta: np.ndarray
    first: int

    @classmethod
    def run(cls, spec: Spec, res: object, y: np.ndarray, first: int) -> ArimaFit:
        """Run the model of `spec` with the parameters of `res` (the search's, sigma^2
        concentrated out) through y (n,) starting at absolute index `first`."""
        from statsmodels.tsa.statespace.sarimax import SARIMAX

        t = np.arange(first, first + len(y))
        model = SARIMAX(
            y, exog=spec.regressors(t), order=(spec.p, spec.d, spec.q),
            seasonal_order=(spec.P, spec.D, spec.Q, spec.m),
        )
        params = np.r_[np.asarray(res.params), float(res.scale)]  # type: ignore[attr-defined]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = model.filter(params).filter_results
        k_exog = model.k_exog
        selection = out.selection[:, :, 0]
        return cls(
            spec=spec,
            mean=np.asarray(out.forecasts[0], dtype=np.float64),
            sd=np.sqrt(np.asarray(out.forecasts_error_cov[0, 0], dtype=np.float64)),
            states=np.asarray(out.predicted_state).T,
            covs=np.moveaxis(np.asarray(out.predicted_state_cov), -1, 0),
            Z=np.asarray(out.design[0, :, 0]),
            T=np.asarray(out.transition[:, :, 0]),
            RQR=selection @ out.state_cov[:, :, 0] @ selection.T,
            beta=np.asarray(params[:k_exog]),
            first=first,
        )

    def forecast(self, at: int, horizon: int) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation (H,) of the `horizon` values from absolute index `at` on,
        given the values before it."""
        a, cov = self.states[at - self.first], self.covs[at - self.first]
        x = self.spec.regressors(np.arange(at, at + horizon))
        mean = np.zeros(horizon) if x is None else x @ self.beta
        var = np.empty(horizon)
        for h in range(horizon):
            mean[h] += self.Z @ a
            var[h] = self.Z @ cov @ self.Z
            a, cov = self.T @ a, self.T @ cov @ self.T.T + self.RQR
        return mean, np.sqrt(np.maximum(var, 0.0))


def arima(
    series: Series, origins: np.ndarray, history_cap: int
) -> tuple[OneStep, MultiStep, str]:
    """ARIMA's one-step forecasts of the evaluation part and its forecasts from `origins`
    (absolute indices); fitted on at most the last `history_cap` history values."""
    start, y, h = series.eval_start, series.values, series.horizon
    first = max(0, start - history_cap)
    spec, res = fit_arima(y[first:start], series.season, first)
    fit = ArimaFit.run(spec, res, y[first:], first)
    mean, sd = fit.mean[start - first :], fit.sd[start - first :]
    one = OneStep(mean, gaussian_bounds(mean, sd), gaussian_crps(mean, sd, y[start:]))
    laws = [fit.forecast(int(o), h) for o in origins]
    mu = np.stack([m for m, _ in laws])  # (K, H)
    sigma = np.stack([s for _, s in laws])
    truth = np.stack([future(y, o, h) for o in origins])
    multi = MultiStep(origins, mu, gaussian_bounds(mu, sigma), gaussian_crps(mu, sigma, truth))
    return one, multi, spec.name
