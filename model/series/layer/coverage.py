"""The miscoverage of each series' intervals as a correction of the per-series layer: one ACI
step a monitored level after every observed value (its estimator: model/series/coverage.py).

Shapes: B series, R adapting, O targets, K monitored levels, Q levels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from model.series.coverage import ALPHA_MAX, ALPHA_MIN, effective_alphas, update_alpha
from model.series.layer.base import Correction, Step
from model.series.state import SeriesState, StateBatch, cover_arrays


@dataclass(frozen=True)
class Coverage(Correction):
    """Each series' miscoverage at its monitored levels, moved by ACI steps of `gamma`, `on`
    where it runs."""

    gamma: float
    on: bool

    def alphas(self, batch: StateBatch | Sequence[SeriesState], levels: list[float]) -> np.ndarray:
        """Miscoverage to issue at each level (fractions) per series (B, Q)."""
        if not self.on:
            return np.broadcast_to(1.0 - np.asarray(levels), (len(batch), len(levels)))
        cover = (batch.cover_levels, batch.cover_alpha) if isinstance(batch, StateBatch) else (
            cover_arrays(batch)
        )
        return effective_alphas(*cover, levels)

    def learn(self, batch: StateBatch, step: Step) -> None:
        """One ACI step of the miscoverage alpha_t (R, K) of the adapting series at each
        monitored level: did their value fall outside the interval issued at it?"""
        if not (self.on and batch.cover_levels.shape[1] and len(step.rows)):
            return
        rows = step.rows
        alpha = batch.cover_alpha[rows].astype(np.float64)  # (R, K)
        used = np.clip(alpha, ALPHA_MIN, ALPHA_MAX)
        pit = step.seen.cdf(step.y[:, None])[:, 0]  # (R, O)
        half = used[:, :, None] / 2.0
        inside = ((pit[:, None] >= half) & (pit[:, None] <= 1.0 - half)).all(axis=2)
        nominal = 1.0 - batch.cover_levels[rows].astype(np.float64)
        moved = update_alpha(alpha, nominal, np.asarray(~inside), self.gamma)
        batch.cover_alpha[rows] = np.where(np.isnan(nominal), alpha, moved)
