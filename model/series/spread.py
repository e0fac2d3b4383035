"""Each series' spread: an online scale factor s of its predictive law about its mean (an
online EM for a scale, Cappe and Moulines 2009; docs/adaptation.md, "Spread").

s is the forgetting average of the standardised absolute residuals a_t = |y_t - m_t| / D_t,
D = E_M|Y - m| the law's mean absolute deviation (`spread_statistic`), each capped at MAX_STAT,
from 1 with the weight of PRIOR_WEIGHT observations (`update_spread`); a forecast's paths take
s^(1/h) h^g at step h (`horizon_factors`): one-step errors say little of many steps', and g, the
series' horizon growth, is the model's (what held-out series' errors many steps ahead said of its
paths: training/competitions/calibrate.py; 0 for a model not calibrated), fading as the series'
record grows (`series_growth`).

Shapes: B series, O targets.
"""

from __future__ import annotations

import numpy as np

PRIOR_WEIGHT = 5.0  # observations' worth of belief in the law as trained
MAX_STAT = 10.0  # cap of one step's statistic (standardised absolute residual)
FACTOR_RANGE = (1e-2, 1e2)  # bounds of the factor s


def spread_statistic(mean: np.ndarray, mad: np.ndarray, y: np.ndarray) -> np.ndarray:
    """a_t (B, O): the absolute residual of y (B, O) from the law's mean over its mean
    absolute deviation, both (B, O), of the law as trained."""
    return np.asarray(np.abs(y - mean) / mad)


def update_spread(
    factor: np.ndarray, weight: np.ndarray, stat: np.ndarray, forget: float
) -> tuple[np.ndarray, np.ndarray]:
    """One online step: factors (B, O) with weights (B,), statistics (B, O)."""
    n = forget * weight + 1.0
    new = factor + (np.minimum(stat, MAX_STAT) - factor) / n[:, None]
    return np.clip(new, *FACTOR_RANGE), n


def horizon_factors(
    factor: np.ndarray, horizon: int, growth: np.ndarray | float = 0.0
) -> np.ndarray:
    """Spread factors (B, H, O) of the steps of a forecast from one-step factors (B, O) and
    each series' horizon growth g (B,) (or one for all): factor^(1/h) h^g at step h."""
    steps = np.arange(1, horizon + 1, dtype=np.float64)
    out = np.asarray(factor, dtype=np.float64)[:, None] ** (1.0 / steps)[None, :, None]
    g = np.broadcast_to(np.asarray(growth, dtype=np.float64), (len(out),))
    return out if not g.any() else out * steps[None, :, None] ** g[:, None, None]


def series_growth(growth: float, length: float, seen: np.ndarray) -> np.ndarray:
    """Each series' horizon growth (B,) from the model's: g min(1, length / t) for a series that
    has seen t values (`length` inf: g for every series). A long record fades it: what the
    paths miss many steps ahead is mostly what a short history leaves unknown of a series' level,
    trend and season (on M1 the growth that scored best fell from 0.2-0.3 on series of under 50
    values to 0-0.1 on those of over 80)."""
    t = np.maximum(np.asarray(seen, dtype=np.float64), 1.0)
    return np.asarray(growth * np.minimum(1.0, length / t))
