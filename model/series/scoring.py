"""Scoring of observations against the one-step law issued for them (Runtime.update).

Before a step absorbs an observation, the filter's one-step law of it (a Gaussian mixture,
model/filtering/predictive.Mixture, in scaled units) is what the model had issued: its median
and the equal-tailed intervals at each level, each at the series' adapted miscoverage
(model/series/adaptation.py). The observation is scored under that law in the series' units:
PIT, log score, CRPS and whether each interval covered it.

Shapes: B batch, P particles, O targets, Q levels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.filtering.filter import StepOut
from model.filtering.predictive import Mixture
from model.series.horizons import HorizonScore


@dataclass(frozen=True)
class UpdateResult:
    """What the model had issued for one observation, and how the observation scored."""

    seq: int
    value: np.ndarray | None  # (O,) targets as given; None when missing
    intervals: dict[float, tuple[np.ndarray, np.ndarray]]  # issued one-step intervals, (O,)
    median: np.ndarray  # (O,) median of the issued one-step law, per target
    covered: dict[float, bool] | None  # all target dims inside; None when missing
    pit: np.ndarray | None  # (O,) predictive CDF at the value
    log_score: float | None  # log predictive density of the value (series units)
    crps: float | None  # mean over targets (series units)
    ess: float  # ESS of the weights before selection (particles)
    resampled: bool
    # the forecasts issued for it steps before, as they fared (model/series/horizons.py)
    horizons: tuple[HorizonScore, ...] = ()


def issued_law(out: StepOut, sigma_obs: np.ndarray) -> Mixture:
    """The one-step law a step issued (scaled units): the filter's mixture over its particles
    (pred (B, P, O) means, variances sigma_obs (O,), each particle's own where the model
    predicts an observation scale)."""
    o = len(sigma_obs)
    variance = sigma_obs  # (O,); each particle's own with obs_scale (SMCTransformer)
    if out.pred.shape[-1] > o:
        variance = sigma_obs * np.exp(2.0 * out.pred[..., o:].astype(np.float64))
    return Mixture.from_filter(out.logw_pred, out.pred[..., :o], variance)


def score(
    x: np.ndarray,
    mix: Mixture,
    loc: np.ndarray,
    scale: np.ndarray,
    alpha: np.ndarray,
    levels: list[float],
    seqs: np.ndarray,
    out: StepOut,
) -> list[UpdateResult]:
    """UpdateResults of one step for B series: x (B, O) their targets in series units (NaN:
    missing), `mix` the law issued for them (scaled units), loc and scale (B, O) the map from
    scaled to series units, alpha (B, Q) the miscoverage each series issues at each of
    `levels`, seqs (B,) the steps, `out` the step (its ESS and resampling)."""
    y = x.astype(np.float64)
    observed = np.asarray(np.isfinite(y).all(axis=1))
    ys = np.nan_to_num((y - loc) / scale)  # (B, O) scaled
    probs = np.stack([alpha / 2.0, 1.0 - alpha / 2.0], axis=2).reshape(len(x), -1)
    probs = np.concatenate([np.full((len(x), 1), 0.5), probs], axis=1)
    probs = probs.round(12)  # level 0.9 asks exactly for the 0.05 and 0.95 quantiles
    solved = mix.quantile(probs) * scale[:, None] + loc[:, None]  # (B, 1 + 2Q, O)
    median, bounds = solved[:, 0], solved[:, 1:]
    pit = mix.cdf(ys[:, None])[:, 0]  # (B, O)
    log_score = mix.log_density(ys) - np.log(scale).sum(axis=1)
    crps = (mix.crps(ys) * scale).mean(axis=1)
    lows, highs = bounds[:, 0::2], bounds[:, 1::2]  # (B, Q, O)
    inside = ((lows <= y[:, None]) & (y[:, None] <= highs)).all(axis=2).tolist()  # (B, Q)
    t, seen = seqs.tolist(), observed.tolist()
    ess, resampled = out.ess.tolist(), out.resampled.tolist()
    log_scores, crpss = log_score.tolist(), crps.tolist()
    return [
        UpdateResult(
            seq=t[i],
            value=y[i].copy() if seen[i] else None,
            intervals={lv: (lows[i, j], highs[i, j]) for j, lv in enumerate(levels)},
            median=median[i],
            covered=dict(zip(levels, inside[i], strict=True)) if seen[i] else None,
            pit=pit[i] if seen[i] else None,
            log_score=log_scores[i] if seen[i] else None,
            crps=crpss[i] if seen[i] else None,
            ess=ess[i],
            resampled=bool(resampled[i]),
        )
        for i in range(len(x))
    ]
