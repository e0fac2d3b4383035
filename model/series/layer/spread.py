"""The spread of each series' law as a correction of the per-series layer: a factor on its
variance, moved after every observed value (its estimator: model/series/spread.py).

Shapes: R adapting series, O targets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.filtering.predictive import Mixture
from model.series.layer.base import Block, Correction, Paths, Step, steps_of
from model.series.spread import horizon_factors, spread_statistic, update_spread
from model.series.state import StateBatch


@dataclass(frozen=True)
class Spread(Correction):
    """Each series' spread factors, estimated with forgetting `forget`, `on` where it runs."""

    forget: float
    on: bool

    def issue(self, batch: StateBatch, law: Mixture, ahead: np.ndarray | int) -> Mixture:
        """The law scaled about its mean by each series' spread factor, where this runs."""
        return law.scaled(batch.spread_factor) if self.on else law

    def start_paths(self, paths: Paths) -> None:
        """Each step's spread factor (model/series/spread.py horizon_factors): each series'
        factor and its horizon growth, which the paths' trend's innovations take too and the
        series' own law then bounds."""
        paths.factors = horizon_factors(paths.batch.spread_factor, paths.total, paths.growth)

    def scaled_paths(self, paths: Paths, block: Block) -> None:
        """The paths scaled about their mean by each step's factor, where the correction
        runs."""
        if self.on:
            factor = steps_of(paths.factors, block.at)
            block.x = block.centre + factor * (block.x - block.centre)

    def learn(self, batch: StateBatch, step: Step) -> None:
        """One step of the spread factor s (R, O) of the adapting series from the absolute
        residual of their values under the law they were issued (already scaled by s)."""
        if not (self.on and len(step.rows)):
            return
        rows = step.rows
        s = batch.spread_factor[rows].astype(np.float64)
        mean, mad = step.seen.mean_abs_dev()  # the scaled law's: s D
        stat = spread_statistic(mean, mad / s, step.y)
        factor, weight = update_spread(
            batch.spread_factor[rows].astype(np.float64),
            batch.spread_weight[rows].astype(np.float64),
            stat,
            self.forget,
        )
        batch.spread_factor[rows], batch.spread_weight[rows] = factor, weight
