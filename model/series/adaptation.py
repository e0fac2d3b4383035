"""Per-series online adaptation of the predictive law: the estimators of its spread, its
coverage, its mean and its season, each kept in the series' state and moved after every
observed step once the step has been scored. What each does and why, its derivation and what it
measured: docs/adaptation.md.

- Spread (an online EM for a scale factor s of the law about its mean; docs/adaptation.md,
  "Spread"): s is the forgetting average of the standardised absolute residuals
  |y - m| / E_M|Y - m| (`spread_statistic`, `update_spread`), capped at MAX_STAT, from 1 with the
  weight of PRIOR_WEIGHT observations; a forecast's paths take s^(1/h) at step h
  (`horizon_factors`).
- Coverage (adaptive conformal inference, Gibbs and Candes 2021; "Coverage"): alpha_t moves by
  gamma (alpha - err_t) (`update_alpha`), kept in ALPHA_RANGE (not clipped to (0, 1), which
  would break the rule's bound on the miss rate), issued within [ALPHA_MIN, ALPHA_MAX]; a
  forecast's step h takes 1/h of its logit shift (`horizon_alphas`); a level not monitored, the
  shift of those around it (`effective_alphas`).
- Mean (a Kalman filter of each series' regression of its residuals on the lagged values the
  readout reads, MEAN_TERMS; "Mean"): `update_mean`, with the innovations' variance from
  ODDS_FORGET, MEAN_DRIFT, MEAN_PRIOR_SD and MEAN_CLIP; carried into a forecast's paths divided
  by h (`horizon_mean`) and following the series' scale (`rescale_intercept`).
- The mean's weight (dynamic model averaging, Raftery et al. 2010; "The weight of the
  correction"): the log odds of the corrected model against the model as trained
  (`odds_evidence`, `update_odds`, `mean_weight`), each value's evidence within MAX_EVIDENCE.
- Season (an additive profile per phase, as ETS keeps one; "Season"): estimated once from the
  history by the classical decomposition and shrunk by the series' noise (`season_profile`),
  taken out of every value before the model sees it and put back into every law and path.

Shapes: B series, P particles, O targets, K monitored levels, J = K_lag + 1 mean terms, M
the longest season.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PRIOR_WEIGHT = 5.0  # observations' worth of belief in the law as trained
MAX_STAT = 10.0  # cap of one step's statistic (standardised absolute residual)
FACTOR_RANGE = (1e-2, 1e2)  # bounds of the factor s
ALPHA_MIN, ALPHA_MAX = 1e-3, 0.999  # miscoverage an interval is issued at
ALPHA_RANGE = (-0.5, 1.5)  # bounds of the tracked alpha_t
MEAN_PRIOR_SD = 0.3  # prior sd of each mean coefficient, in scaled units per scaled unit
MEAN_DRIFT = 1e-4  # variance each mean coefficient gains per step
MEAN_CLIP = 3.0  # innovations count up to this many standard deviations
ODDS_FORGET = 0.98  # memory of the odds and of the mean correction's noise: 50 steps
MEAN_ODDS_MAX = 20.0  # bound of the log odds of the corrected model (a weight of 1 - 2e-9)
MAX_EVIDENCE = MEAN_CLIP**2 / 2.0  # bound of one value's log ratio of the two models' densities
#: the terms of the mean correction, as the API names them (SMCTransformer.lag_terms, then 1)
MEAN_TERMS = ("lag_2", "lag_window", "season", "two_seasons", "constant")


@dataclass(frozen=True)
class AdaptConfig:
    """Which corrections run and how fast: `forget` is lam of the spread's estimate (memory
    1 / (1 - lam) steps), `gamma` the ACI step; `mean` the series' own correction of the
    mean (a model with lag inputs only); `season` its seasonal profile (a series with a
    season); `trend` its damped trend (model/series/trend.py; a series whose history shows one);
    `bound` the bound of a forecast's spread by the series' own marginal law and `revert` the
    move of its law towards that law's mean by the odds of a reverting model
    (model/series/marginal.py)."""

    spread: bool = True
    coverage: bool = True
    mean: bool = True
    season: bool = True
    trend: bool = True
    bound: bool = True
    revert: bool = True
    forget: float = 0.9
    gamma: float = 0.02

    def __post_init__(self) -> None:
        if not 0.0 < self.forget < 1.0:
            raise ValueError(f"forget must be in (0, 1), got {self.forget}")
        if not 0.0 < self.gamma < 1.0:
            raise ValueError(f"gamma must be in (0, 1), got {self.gamma}")


OFF = AdaptConfig(
    spread=False, coverage=False, mean=False, season=False, trend=False, bound=False,
    revert=False,
)


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


def horizon_factors(factor: np.ndarray, horizon: int) -> np.ndarray:
    """Spread factors (B, H, O) of the steps of a forecast from one-step factors (B, O):
    factor^(1/h) at step h."""
    power = 1.0 / np.arange(1, horizon + 1, dtype=np.float64)
    return np.asarray(np.asarray(factor, dtype=np.float64)[:, None] ** power[None, :, None])


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


def mean_prior(b: int, j: int, o: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The mean correction of a new series: coefficients (B, O, J) 0, covariances (B, O, J, J)
    MEAN_PRIOR_SD^2 I, innovation variances (B, O) 1."""
    cov = np.broadcast_to(np.eye(j) * MEAN_PRIOR_SD**2, (b, o, j, j))
    return np.zeros((b, o, j)), cov.copy(), np.ones((b, o))


def mean_terms(
    x_hist: np.ndarray, valid: np.ndarray, season: np.ndarray, lags: int, o: int
) -> np.ndarray:
    """phi (B, O, J): the lagged differences X_{t-l} - X_{t-1} of the targets for l = 2, L,
    m, 2 m (as SMCTransformer.lag_terms, 0 where the window does not hold lag l or m = 0) and
    a constant 1. x_hist (B, L, F) scaled inputs, lag s at s - 1; valid (B, L) bool; season
    (B,); `lags` the number of lag terms (4)."""
    b, n_lag, _ = x_hist.shape
    m = np.asarray(season, np.int64)[:, None]
    chosen = np.concatenate(
        [np.full_like(m, 2), np.full_like(m, n_lag), m, 2 * m], axis=1
    )[:, :lags]  # (B, K)
    idx = np.clip(chosen - 1, 0, n_lag - 1)
    held = np.take_along_axis(valid, idx, axis=1) & (chosen <= n_lag) & (chosen >= 2)
    targets = np.asarray(x_hist[..., :o], np.float64)  # (B, L, O)
    at = np.take_along_axis(targets, idx[:, :, None], axis=1)  # (B, K, O)
    diff = np.where(held[:, :, None], at - targets[:, :1], 0.0)
    return np.concatenate([diff, np.ones((b, 1, o))], axis=1).transpose(0, 2, 1)


def _predicted(
    cov: np.ndarray, noise: np.ndarray, phi: np.ndarray, drift: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Kalman prediction: the coefficients' covariance after the drift P (B, O, J, J), P phi
    (B, O, J) and the innovation variance phi P phi + v (B, O)."""
    p = cov + drift * np.eye(cov.shape[-1])
    p_phi = np.einsum("boij,boj->boi", p, phi)  # (B, O, J)
    return p, p_phi, np.einsum("boj,boj->bo", phi, p_phi) + noise


def update_mean(
    coef: np.ndarray,
    cov: np.ndarray,
    noise: np.ndarray,
    phi: np.ndarray,
    resid: np.ndarray,
    forget: float,
    drift: float = MEAN_DRIFT,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One Kalman step of the mean correction: coefficients (B, O, J), their covariances
    (B, O, J, J) and the innovation variances v (B, O) before the step, phi (B, O, J) its
    terms, resid (B, O) the value less the corrected model's mean (the mean with the whole
    correction); `forget` the memory of v. -> the three after the step."""
    p, p_phi, s = _predicted(cov, noise, phi, drift)
    bound = MEAN_CLIP * np.sqrt(s)
    innov = np.clip(resid, -bound, bound)
    gain = p_phi / s[..., None]
    new_cov = p - gain[..., :, None] * p_phi[..., None, :]
    new_cov = 0.5 * (new_cov + np.swapaxes(new_cov, -1, -2))  # symmetric to rounding
    new_noise = forget * noise + (1.0 - forget) * innov**2
    return coef + gain * innov[..., None], new_cov, new_noise


def mean_weight(odds: np.ndarray) -> np.ndarray:
    """The weight w (B, O) the correction of the mean is issued with, from the log odds (B, O)
    that the series follows the corrected model: the posterior probability of that model."""
    return _expit(np.asarray(odds, np.float64))


def odds_evidence(log_full: np.ndarray, log_none: np.ndarray) -> np.ndarray:
    """The log ratio (B, O) of the value's density under the corrected model, log_full, to
    that under the model as trained, log_none (B, O), within +-MAX_EVIDENCE: one value says
    at most what a value at one Gaussian law's mean says against a law MEAN_CLIP standard
    deviations away, as the Kalman step counts an innovation up to MEAN_CLIP of them (just
    after a change, the law issued can be far too narrow, and each value would swing the
    odds from one bound to the other)."""
    return np.clip(np.asarray(log_full - log_none), -MAX_EVIDENCE, MAX_EVIDENCE)


def update_odds(odds: np.ndarray, evidence: np.ndarray, forget: float) -> np.ndarray:
    """One step of the log odds (B, O) of the corrected model against the model as trained
    (the model probabilities of dynamic model averaging, Raftery, Karny and Ettler, 2010): the
    odds forget towards even at the rate `forget`, then add the log ratio of the two models'
    densities of the value, `evidence` (B, O); a step whose evidence is not finite leaves the
    odds as they were."""
    before = np.asarray(odds, np.float64)
    moved = np.clip(forget * before + evidence, -MEAN_ODDS_MAX, MEAN_ODDS_MAX)
    return np.where(np.isfinite(evidence), moved, before)


def rescale_intercept(coef: np.ndarray, cov: np.ndarray, ratio: np.ndarray) -> None:
    """A series rescaled (old scale / new scale `ratio` (B, O)): the constant of its mean
    correction (the last term), in scaled units, and its covariances follow. In place on
    coef (B, O, J) and cov (B, O, J, J)."""
    r = np.asarray(ratio, np.float64)
    coef[..., -1] *= r
    cov[..., -1, :] *= r[..., None]
    cov[..., :, -1] *= r[..., None]


def horizon_mean(coef: np.ndarray, h: int) -> np.ndarray:
    """The mean correction (B, J, O) at step h of a forecast from the one-step one (B, J, O):
    divided by h. It is learnt from one-step residuals; carried whole through a recursion of 48
    steps, a momentum that fits one step well (the hourly series' lag-2 coefficients) compounds
    into paths that explode, and kept whole only for the seasonal terms it still made the
    multistep CRPS of `smct quality` 2.9 times ETS's, against 1.1 divided by h."""
    return np.asarray(coef / h, dtype=np.float32)


def season_profile(history: np.ndarray, m: int) -> np.ndarray:
    """The seasonal indices (m, O) of a history (T, O) whose first value has seq 0, by the
    classical additive decomposition: the centred moving average of one season (2 x m for an
    even m) is the trend, and index p is the mean of the detrended values at seqs p mod m,
    centred to sum 0; then shrunk towards 0 by the share of their spread that their own noise
    explains (James-Stein: a few noisy seasons give a small profile, many clear ones all of
    it). Zeros where the history holds fewer than two seasons, or a phase has no value (NaN is
    missing)."""
    import pandas as pd

    y = np.asarray(history, np.float64)
    out = np.zeros((max(m, 0), y.shape[1]))
    if m < 2 or len(y) < 2 * m:
        return out
    frame = pd.DataFrame(y)
    if m % 2:
        trend = frame.rolling(m, center=True).mean()
    else:
        trend = frame.rolling(m).mean().rolling(2).mean().shift(-(m // 2))
    detrended = (frame - trend).to_numpy()
    phase = np.arange(len(y)) % m
    counts = np.zeros((m, y.shape[1]))
    for p in range(m):
        rows = detrended[phase == p]
        seen = np.isfinite(rows)
        counts[p] = seen.sum(axis=0)
        out[p] = np.where(counts[p] > 0,
                          np.where(seen, rows, 0.0).sum(axis=0) / np.maximum(counts[p], 1), 0.0)
    out -= out.mean(axis=0)
    # shrunk towards 0 by its noise (James-Stein): each index is a mean of n_p values around
    # it, of variance v / n_p; of the indices' spread, only what exceeds that is a season
    resid = detrended - out[phase]
    seen = np.isfinite(resid)
    v = np.where(seen, resid, 0.0).__pow__(2).sum(axis=0) / np.maximum(seen.sum(axis=0) - m, 1)
    noise = (v / np.maximum(counts, 1)).mean(axis=0)  # (O,)
    spread = (out**2).mean(axis=0)
    keep = np.where(spread > 0, np.clip(1.0 - noise / np.maximum(spread, 1e-300), 0.0, 1.0), 0.0)
    return out * keep


def season_offsets(profile: np.ndarray, season: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """The seasonal index of the value of each series at `seq` (B,) (broadcast: (B, H)):
    profile (B, M, O) padded past each series' season (B,) (0: none) -> (B, O) or (B, H, O)."""
    m = np.asarray(season, np.int64)
    b, width, o = profile.shape
    if width == 0:
        return np.zeros((*np.shape(seq), o))
    at = np.asarray(seq, np.int64)
    mm = m.reshape((b,) + (1,) * (at.ndim - 1))
    phase = np.where(mm > 0, at % np.maximum(mm, 1), 0)
    rows = profile[np.arange(b).reshape(mm.shape), np.minimum(phase, width - 1)]
    return np.where((mm > 0)[..., None], rows, 0.0)


