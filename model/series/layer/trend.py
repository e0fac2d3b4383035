"""The damped trend as a correction of the per-series layer (its estimator:
model/series/trend.py).

Shapes: B_k series at a step, O targets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from model.series import trend as trend_model
from model.series.layer.base import Block, Correction, Paths, Start, Step
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

    def start(self, start: Start) -> None:
        """Each history's damped trend after its last value (B, O) (trend.RECORD), fitted on
        it without its season (Start.fits); its sum at each value taken out of the history,
        and out of each value the model filters (the state holds the trend once the history
        is filtered)."""
        trend = np.zeros((len(start.rows), self.target_dim), trend_model.RECORD)
        for i, (r, fitted) in enumerate(zip(start.plain, start.fits, strict=True)):
            trend[i], start.taken[i] = fitted.trend, fitted.sums
            r[:, : self.target_dim] -= fitted.sums
        start.held[self], start.trended = trend, True

    def started(self, batch: StateBatch, start: Start) -> None:
        batch.trend[:] = start.held[self]

    def start_paths(self, paths: Paths) -> None:
        """The trend each of the N paths of each series carries (PathTrend), moved by the
        model's noise draws (none where no series has a trend)."""
        if trend_model.Trend.of(paths.batch.trend).phi.any():
            paths.held[self] = trend_model.PathTrend(paths.batch.trend, paths.n)
            paths.noise = True

    def series_paths(self, paths: Paths, block: Block) -> None:
        """Each path's trend's sum added, step by step, its slope moved by the path's
        innovation: its draw of the model's noise, in series units, at the step's spread."""
        carried = paths.held.get(self)
        if carried is None or block.eps is None:
            return
        moved = []
        for j, k in enumerate(block.steps):
            innovation = block.eps[j] * paths.noise_sd * paths.factors[:, k : k + 1]
            moved.append(block.x[j] + carried.step(innovation))
        block.x = np.stack(moved)

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
        batch.trend[:] = trend_model.Trend.of(batch.trend).step(error).record()
