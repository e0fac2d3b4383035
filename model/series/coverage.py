"""Each series' coverage: adaptive conformal inference (Gibbs and Candes 2021;
docs/adaptation.md, "Coverage").

For each monitored level the series keeps alpha_t, issues its interval at 1 - alpha_t and moves
it by gamma (alpha - err_t) after each value (`update_alpha`): its miss rate over any run of T
steps is within |alpha_end - alpha_start| / (gamma T) of alpha, whatever the model. alpha_t is
kept in ALPHA_RANGE, not clipped to (0, 1), which would break that bound, and issued within
[ALPHA_MIN, ALPHA_MAX]. A level not monitored takes the logit shift of those around it
(`effective_alphas`); a forecast's step h, 1/h of it (`horizon_alphas`).

Shapes: B series, K monitored levels, Q levels asked, H horizon.
"""

from __future__ import annotations

import numpy as np

ALPHA_MIN, ALPHA_MAX = 1e-3, 0.999  # miscoverage an interval is issued at
ALPHA_RANGE = (-0.5, 1.5)  # bounds of the tracked alpha_t


def update_alpha(alpha: np.ndarray, nominal: np.ndarray, missed: np.ndarray, gamma: float) -> (
    np.ndarray
):
    """One ACI step: alpha_t (B, K), nominal alpha (K,), missed (B, K) bool."""
    return np.clip(alpha + gamma * (nominal - missed), *ALPHA_RANGE)


def effective_alphas(
    levels: np.ndarray, alphas: np.ndarray, asked: list[float]
) -> np.ndarray:
    """Miscoverage to issue for each asked level (fraction), per series (B, len(asked)).

    levels (B, K) and alphas (B, K) are what each series monitors (NaN: unused slots). An
    asked level a series monitors takes its alpha_t; one it does not takes the logit shift
    logit(alpha_t) - logit(1 - level) of the monitored levels, interpolated linearly in the
    level (the nearest one's outside their range); a series that monitors none, 1 - level."""
    asked_a = np.asarray(asked, dtype=np.float64)  # (Q,)
    nominal = np.broadcast_to(1.0 - asked_a, (len(levels), len(asked_a)))
    if not levels.size:
        return np.clip(nominal, ALPHA_MIN, ALPHA_MAX)
    order = np.argsort(levels, axis=1)  # NaN (unused) last
    lv = np.take_along_axis(np.asarray(levels, dtype=np.float64), order, axis=1)  # (B, K)
    al = np.take_along_axis(np.asarray(alphas, dtype=np.float64), order, axis=1)
    used = np.isfinite(lv)
    n = used.sum(axis=1)[:, None]  # (B, 1)
    with np.errstate(invalid="ignore"):
        shift = np.where(used, _logit(al) - _logit(1.0 - lv), 0.0)  # (B, K)
        # np.interp in the level, row by row: the monitored levels below each asked one
        below = ((lv[:, None, :] < asked_a[None, :, None]) & used[:, None, :]).sum(axis=2)
    hi = np.minimum(below, n - 1).clip(0)  # (B, Q)
    lo = np.maximum(below - 1, 0)
    lv_lo, lv_hi = np.take_along_axis(lv, lo, axis=1), np.take_along_axis(lv, hi, axis=1)
    gap = np.where(hi > lo, lv_hi - lv_lo, 1.0)
    frac = np.where(hi > lo, (asked_a[None, :] - lv_lo) / gap, 0.0)
    s_lo, s_hi = np.take_along_axis(shift, lo, axis=1), np.take_along_axis(shift, hi, axis=1)
    moved = _expit(_logit(1.0 - asked_a)[None, :] + s_lo + frac * (s_hi - s_lo))
    exact = (np.abs(asked_a[None, :, None] - lv[:, None, :]) <= 1e-9) & used[:, None, :]
    hit = np.take_along_axis(al, exact.argmax(axis=2), axis=1)
    out = np.where(exact.any(axis=2), hit, np.where(n > 0, moved, nominal))
    return np.clip(out, ALPHA_MIN, ALPHA_MAX)


def horizon_alphas(alphas: np.ndarray, levels: list[float], horizon: int) -> np.ndarray:
    """Miscoverage (B, H, Q) of the steps of a forecast from the one-step ones (B, Q) at
    `levels`: the logit shift from nominal divided by h at step h."""
    nominal = _logit(1.0 - np.asarray(levels, dtype=np.float64))  # (Q,)
    shift = _logit(np.asarray(alphas, dtype=np.float64)) - nominal  # (B, Q)
    steps = np.arange(1, horizon + 1, dtype=np.float64)[None, :, None]
    return np.clip(_expit(nominal + shift[:, None] / steps), ALPHA_MIN, ALPHA_MAX)


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-12, 1.0 - 1e-12)
    return np.asarray(np.log(p) - np.log1p(-p))


def _expit(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))
