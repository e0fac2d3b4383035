"""The damped trend as a correction of the per-series layer (its estimator:
model/series/trend.py).

Shapes: B_k series at a step, O targets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from model.series import trend as trend_model
from model.series.layer.base import Correction, Step
from model.series.state import StateBatch


@dataclass(frozen=True)
class Trend(Correction):
    """Each series' damped trend, of a model of `target_dim` targets."""

    target_dim: int
    carried: ClassVar[bool] = True  # each forecast path carries its own (PathTrend)

    def offsets(self, batch: StateBatch, at: np.ndarray) -> np.ndarray | None:
        """Each series' trend's sum at seqs `at` (B,) or (B, H), at or after its next value
        -> (..., O) (None where no series has a trend)."""
        carried = trend_model.Trend.of(batch.trend)
        if not carried.phi.any():
            return None
        ahead = at - batch.t.reshape((-1,) + (1,) * (np.ndim(at) - 1)) + 1
        return carried.ahead(ahead)

    def paths(self, batch: StateBatch, n: int) -> trend_model.PathTrend | None:
        """The trend the N paths of each series carry (None where no series has one)."""
        if not trend_model.Trend.of(batch.trend).phi.any():
            return None
        return trend_model.PathTrend(batch.trend, n)

    def learn(self, batch: StateBatch, step: Step) -> None:
        """Move each series' trend one step (model/series/trend.py): by its one-step error in
        series units where observed, clipped to trend.CLIP standard deviations of the law
        issued, by 0 elsewhere. In place."""
        if not trend_model.Trend.of(batch.trend).phi.any():
            return
        mean, var = step.law.moments()  # (B_k, O) scaled
        scale = batch.scale[:, : self.target_dim]
        bound = trend_model.CLIP * np.sqrt(np.maximum(var, 0.0)) * scale
        error = np.clip(np.nan_to_num((step.ys - mean) * scale), -bound, bound)
        error = np.where(step.observed[:, None], error, 0.0)
        batch.trend[:] = trend_model.Trend.of(batch.trend).step(error).packed()
