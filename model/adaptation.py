"""Per-series online adaptation of the predictive law: its observation scale and its coverage.

One model serves every series, and its observation variance Sigma_obs is one figure for all
of them; a series' own one-step errors tell, after a few dozen steps, whether its intervals
are too wide or too narrow. Two corrections are kept in each series' state (a few bytes) and
updated at every observed step, after the step has been scored:

Observation scale (online EM with forgetting). The one-step law is the mixture
    p(y) = sum_m w_m N(y; mu_m, c Sigma_obs)
with a per-series multiplier c (one per target). The complete-data log likelihood of c, with
the particle m that produced y as the missing datum, gives the M-step
    c = E[(y - mu_m)^2 / Sigma_obs],  m ~ r,  r_m proportional to w_m N(y; mu_m, c Sigma_obs)
(the responsibilities r under the current c). Online EM (Cappe and Moulines, 2009) replaces
the expectation over time by a running average: with a forgetting factor lam and a weight n
    n_t = lam n_{t-1} + 1,   c_t = c_{t-1} + (e_t - c_{t-1}) / n_t,
where e_t is the statistic of step t. c starts at 1 (the trained Sigma_obs) with the weight of
PRIOR_WEIGHT observations, so a few steps cannot swing it; its memory is 1 / (1 - lam) steps.
Each e_t is capped at MAX_STAT (an outlier 10 standard deviations out moves c by at most
MAX_STAT / n). With Gaussian data around known means and weights, c converges to the true
multiplier (tests/model/test_adaptation.py). The filter's own weights (eq. (5)) keep the
trained Sigma_obs: the multiplier reshapes the law the series is issued and scored against,
and the observation noise of forecast paths.

Coverage (adaptive conformal inference, Gibbs and Candes, 2021). For each monitored level
1 - alpha the series keeps alpha_t, issues its interval at level 1 - alpha_t, and after the
observation moves
    alpha_{t+1} = alpha_t + gamma (alpha - err_t),   err_t = 1 if y fell outside, else 0;
over any run of T steps the miss rate is then within |alpha_end - alpha_start| / (gamma T) of
alpha, whatever the model, so each series' rolling coverage converges to nominal. alpha_t
itself is not clipped to (0, 1), which would break that bound (a law too narrow for its
series needs alpha_t near 0, and a miss there steps below it); it is kept in ALPHA_RANGE, and
the interval is issued at alpha_t clipped to [ALPHA_MIN, ALPHA_MAX] (0.999: almost a point,
1e-3: a 99.9 % interval, where the paper's rule would issue an empty or an infinite one). A
forecast at a level the series does not monitor takes the
correction of the monitored levels around it (its logit shift, interpolated in the level).

Shapes: B series, P particles, O targets, K monitored levels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PRIOR_WEIGHT = 5.0  # observations' worth of belief in the trained Sigma_obs
MAX_STAT = 100.0  # cap of one step's EM statistic (squared standardised error)
VAR_RANGE = (1e-4, 1e4)  # bounds of the multiplier c
ALPHA_MIN, ALPHA_MAX = 1e-3, 0.999  # miscoverage an interval is issued at
ALPHA_RANGE = (-0.5, 1.5)  # bounds of the tracked alpha_t


@dataclass(frozen=True)
class AdaptConfig:
    """Which corrections run and how fast: `forget` is lam of the EM (memory 1 / (1 - lam)
    steps), `gamma` the ACI step."""

    scale: bool = True
    coverage: bool = True
    forget: float = 0.98
    gamma: float = 0.02

    def __post_init__(self) -> None:
        if not 0.0 < self.forget < 1.0:
            raise ValueError(f"forget must be in (0, 1), got {self.forget}")
        if not 0.0 < self.gamma < 1.0:
            raise ValueError(f"gamma must be in (0, 1), got {self.gamma}")


OFF = AdaptConfig(scale=False, coverage=False)


def em_statistic(
    w: np.ndarray, mu: np.ndarray, var: np.ndarray, y: np.ndarray, base: np.ndarray
) -> np.ndarray:
    """e_t (B, O): sum_m r_m (y - mu_m)^2 / base, with r the posterior of the component given y
    under the mixture sum_m w_m N(mu_m, diag(var)): w (B, P) normalised, mu (B, P, O), var
    (B, O) the current variances, y (B, O), base (O,) the trained Sigma_obs."""
    d2 = (y[:, None] - mu) ** 2  # (B, P, O)
    with np.errstate(divide="ignore"):
        log_r = np.log(w) - 0.5 * (d2 / var[:, None]).sum(-1)  # (B, P); shared terms dropped
    log_r -= log_r.max(axis=1, keepdims=True)
    r = np.exp(log_r)
    r /= r.sum(axis=1, keepdims=True)
    return np.asarray(np.einsum("bp,bpo->bo", r, d2) / base)


def update_scale(
    var: np.ndarray, weight: np.ndarray, stat: np.ndarray, forget: float
) -> tuple[np.ndarray, np.ndarray]:
    """One online-EM step: multipliers var (B, O) with weights (B,), statistics (B, O)."""
    n = forget * weight + 1.0
    new = var + (np.minimum(stat, MAX_STAT) - var) / n[:, None]
    return np.clip(new, *VAR_RANGE), n


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
    asked_a = np.asarray(asked, dtype=np.float64)
    out = np.broadcast_to(1.0 - asked_a, (len(levels), len(asked_a))).copy()
    for i in range(len(levels)):
        keep = np.isfinite(levels[i])
        if not keep.any():
            continue
        lv, al = levels[i][keep], alphas[i][keep]
        order = np.argsort(lv)
        lv, al = lv[order], al[order]
        shift = _logit(al) - _logit(1.0 - lv)
        moved = _expit(_logit(1.0 - asked_a) + np.interp(asked_a, lv, shift))
        exact = np.isclose(asked_a[:, None], lv[None, :], rtol=0.0, atol=1e-9)
        hit = exact.any(axis=1)
        out[i] = np.where(hit, al[exact.argmax(axis=1)], moved)
    return np.clip(out, ALPHA_MIN, ALPHA_MAX)


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-12, 1.0 - 1e-12)
    return np.asarray(np.log(p) - np.log1p(-p))


def _expit(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))
