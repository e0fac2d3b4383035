"""Each series' own correction of its mean, and the weight it is issued with
(docs/adaptation.md, "Mean" and "The weight of the correction").

The correction: the coefficients a of the series' regression of its one-step residuals on the
lagged differences the readout reads and a constant (MEAN_TERMS; SMCTransformer.lag_terms), a
random walk (MEAN_DRIFT) observed through the residual and tracked by a Kalman filter
(`update_mean`), from 0 with covariance MEAN_PRIOR_SD^2 I (`mean_prior`), each innovation
counting up to MEAN_CLIP standard deviations of the series' recent innovations (ODDS_FORGET).
It enters the model's mean, so the filter weighs its particles with it, and a forecast's paths
take it divided by h at step h (`horizon_mean`); its constant follows the series' scale
(`rescale_intercept`).

The weight (dynamic model averaging, Raftery, Karny and Ettler 2010): the log odds that the
series follows the corrected model rather than the model as trained, moved by each value's
log density under each (`odds_evidence`, within MAX_EVIDENCE; `update_odds`, within
MEAN_ODDS_MAX, forgetting ODDS_FORGET); the correction is issued with the posterior probability
of the corrected model (`mean_weight`).

Shapes: B series, O targets, J = K_lag + 1 mean terms.
"""

from __future__ import annotations

import numpy as np

MEAN_PRIOR_SD = 0.3  # prior sd of each mean coefficient, in scaled units per scaled unit
MEAN_DRIFT = 1e-4  # variance each mean coefficient gains per step
MEAN_CLIP = 3.0  # innovations count up to this many standard deviations
ODDS_FORGET = 0.98  # memory of the odds and of the mean correction's noise: 50 steps
MEAN_ODDS_MAX = 20.0  # bound of the log odds of the corrected model (a weight of 1 - 2e-9)
MAX_EVIDENCE = MEAN_CLIP**2 / 2.0  # bound of one value's log ratio of the two models' densities
#: the terms of the mean correction, as the API names them (SMCTransformer.lag_terms, then 1)
MEAN_TERMS = ("lag_2", "lag_window", "season", "two_seasons", "constant")


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
    return np.asarray(1.0 / (1.0 + np.exp(-np.asarray(odds, np.float64))))


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
    divided by h. It is learnt from one-step residuals; carried whole through a recursion of
    many steps, a momentum that fits one step well compounds into paths that explode, the
    seasonal terms' too (docs/adaptation.md, "Mean", measures both)."""
    return np.asarray(coef / h, dtype=np.float32)
