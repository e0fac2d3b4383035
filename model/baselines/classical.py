"""Classical reference: exponential smoothing (ETS) state-space models from statsmodels, fitted
locally on each window's own history, with an automatic choice between simple exponential
smoothing (A,N,N) and additive damped trend (A,Ad,N) by AICc - an "AutoETS" restricted to the
non-seasonal additive-error forms that short windows allow.

statsforecast's AutoETS (the issue's first choice) requires pandas < 3, which conflicts with the
project's pinned pandas 3.1; statsmodels 0.15 installs from wheels beside it.

Per window and per target o (covariates are not used):
    fit ETS on X_{1:tau_H, o}  (tau_H = the data set's multistep history)
    unistep:   X_t | X_{1:t-1} ~ N(one-step prediction of the smoother, sigma^2), t = 2..T
               (the smoother runs on the whole window with the parameters fitted on the history)
    multistep: statsmodels `simulate(anchor="end")`, N sample paths of the fitted model.
Nothing is trained globally: fitting (training/fitting.py) only records the history length.

Shapes: S windows, T time, H horizon, O targets, N samples.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from statsmodels.tsa.exponential_smoothing.ets import ETSModel, ETSResults

from model.baselines.base import write_manifest

log = logging.getLogger(__name__)
SPECS: tuple[dict[str, Any], ...] = (
    {"trend": None, "damped_trend": False},
    {"trend": "add", "damped_trend": True},
)
MIN_VAR = 1e-6


def fit_ets(y: np.ndarray) -> ETSResults | None:
    """Best of SPECS by AICc on the series y (L,); None if no spec could be fitted."""
    best: ETSResults | None = None
    for spec in SPECS:
        if spec["trend"] and len(y) < 8:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = ETSModel(y, error="add", **spec).fit(disp=False)
        except (ValueError, np.linalg.LinAlgError):  # pragma: no cover - degenerate windows
            continue
        score = res.aicc if np.isfinite(res.aicc) else res.aic
        if np.isfinite(score) and (best is None or score < best.aicc):
            best = res
    return best


def _naive(y: np.ndarray) -> tuple[float, float]:
    """Random-walk fallback: last value and the variance of the differences."""
    var = float(np.var(np.diff(y))) if len(y) > 2 else 1.0
    return float(y[-1]), max(var, MIN_VAR)


class ETSForecaster:
    """Local AutoETS per window and target (see the module docstring)."""

    name = "ets"

    def __init__(self, d_out: int, history: int | None = None) -> None:
        self.d_out, self.history = d_out, history

    def _history(self, t: int) -> int:
        return min(self.history or t // 2, t - 1)

    def sample_unistep(self, x: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
        s, t, _ = x.shape
        rng = np.random.default_rng(seed)
        hist = self._history(t)
        out = np.empty((s, t - 1, self.d_out, n))
        for i in range(s):
            for o in range(self.d_out):
                y = x[i, :, o].astype(np.float64)
                res = fit_ets(y[:hist])
                if res is None:
                    mean, var = y[:-1], _naive(y[:hist])[1]  # random walk
                else:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        spec = {"trend": res.model.trend, "damped_trend": res.model.damped_trend}
                        full = ETSModel(y, error="add", **spec).smooth(res.params)
                    mean, var = np.asarray(full.fittedvalues)[1:], max(float(res.scale), MIN_VAR)
                out[i, :, o] = mean[:, None] + np.sqrt(var) * rng.standard_normal((t - 1, n))
        return out

    def sample_multistep(self, x: np.ndarray, history: int, n: int, seed: int = 0) -> np.ndarray:
        s, t, _ = x.shape
        horizon = t - history
        rng = np.random.default_rng(seed)
        out = np.empty((s, horizon, self.d_out, n))
        for i in range(s):
            for o in range(self.d_out):
                y = x[i, :history, o].astype(np.float64)
                res = fit_ets(y)
                if res is None:
                    last, var = _naive(y)
                    walk = np.sqrt(var) * rng.standard_normal((horizon, n))
                    out[i, :, o] = last + np.cumsum(walk, axis=0)
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    sim = res.simulate(nsimulations=horizon, repetitions=n, anchor="end",
                                       rng=rng)
                out[i, :, o] = np.asarray(sim).reshape(horizon, n)
        return out

    def save(self, path: Path) -> None:
        write_manifest(Path(path), self.name, {"d_out": self.d_out, "history": self.history})
