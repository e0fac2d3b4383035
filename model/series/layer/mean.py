"""The series' own correction of the mean as a correction of the per-series layer: the
model takes its shift as an input, and every observed step moves it by one Kalman step (its
estimator: model/series/mean.py).

Shapes: B series, R adapting, L window, O targets, J terms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.network.smc_transformer import N_LAG_TERMS, N_MEAN_TERMS
from model.series.layer.base import Correction, Step
from model.series.mean import (
    ODDS_FORGET,
    mean_terms,
    mean_weight,
    odds_evidence,
    rescale_intercept,
    update_mean,
    update_odds,
)
from model.series.state import StateBatch


@dataclass(frozen=True)
class MeanShift(Correction):
    """The correction of the mean of a model of `target_dim` targets whose backend takes
    `n_mean` terms of it (0: none; the correction is then off), `on` where it runs."""

    target_dim: int
    n_mean: int
    on: bool

    def coefficients(self, batch: StateBatch) -> np.ndarray:
        """The coefficients of each series' correction of the mean as the model takes them
        (B, J, O) float32: zeros where the correction is off or the model has none."""
        if not (self.n_mean and self.on):
            return np.zeros((len(batch), N_MEAN_TERMS, self.target_dim), np.float32)
        weight = mean_weight(batch.mean_odds)[:, None, :]  # (B, 1, O)
        return np.ascontiguousarray((batch.mean_coef.transpose(0, 2, 1) * weight), np.float32)

    def rescaled(self, batch: StateBatch, ratio: np.ndarray) -> None:
        """The constant of the correction (its last term), in the model's units, and its
        covariances follow a new scale."""
        if self.n_mean:
            rescale_intercept(batch.mean_coef, batch.mean_cov, ratio)

    def learn(self, batch: StateBatch, step: Step) -> None:
        """One Kalman step of the correction of the mean of the adapting series, from their
        values less the corrected model's mean, and one step of its odds. In place."""
        if not (self.n_mean and self.on and len(step.rows)):
            return
        rows, y, seen = step.rows, step.y, step.raw.take(step.rows)
        issued, _ = seen.moments()
        phi = mean_terms(
            batch.x_hist[rows], step.valid[rows], batch.season[rows], N_LAG_TERMS,
            self.target_dim,
        )
        before = batch.mean_coef[rows].astype(np.float64)
        cov = batch.mean_cov[rows].astype(np.float64)
        noise = batch.mean_noise[rows].astype(np.float64)
        # the law was issued with the correction's shift d of the mean weighted by w: the
        # corrected model's residual is the value less the mean issued, less (1 - w) d
        d = np.einsum("roj,roj->ro", phi, before)
        w = mean_weight(batch.mean_odds[rows])
        resid = y - issued - (1.0 - w) * d
        # each model's law: the law issued moved to its mean
        evidence = odds_evidence(seen.log_marginal(y - (1.0 - w) * d), seen.log_marginal(y + w * d))
        batch.mean_odds[rows] = update_odds(batch.mean_odds[rows], evidence, ODDS_FORGET)
        coef, cov, noise = update_mean(before, cov, noise, phi, resid, ODDS_FORGET)
        batch.mean_coef[rows], batch.mean_cov[rows], batch.mean_noise[rows] = coef, cov, noise
