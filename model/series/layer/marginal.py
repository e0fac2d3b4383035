"""The series' own law as a correction of the per-series layer: the move of each step's law
towards the series' level by the odds of a reverting model, and the bound of a forecast's
spread and its floor at the growth of the series' own errors (their estimators:
model/series/marginal.py, model/series/trend.py).

Shapes: B_k series at a step, O targets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from model.filtering.predictive import Mixture
from model.series import marginal
from model.series.layer.base import Block, Correction, Paths, Start, Step
from model.series.marginal import Marginal
from model.series.mean import ODDS_FORGET, odds_evidence, update_odds
from model.series.state import StateBatch
from model.series.trend import ERROR_STEPS


@dataclass(frozen=True)
class OwnLaw(Correction):
    """Each series' own law, of a model of `target_dim` targets: `revert` the move towards
    its level, `bound` the bound of its paths' spread and its floor (either keeps the law)."""

    target_dim: int
    revert: bool
    bound: bool
    moves: ClassVar[bool] = True  # towards the series' level

    def reversion(
        self, batch: StateBatch, centre: np.ndarray, ahead: np.ndarray | int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        """The distance (B, O) from `centre` to each series' anchor and the weight of the
        reverting model `ahead` steps after its last value (marginal.reversion)."""
        o = self.target_dim
        return marginal.reversion(
            Marginal.of(batch.marginal), batch.loc[:, :o], batch.scale[:, :o], centre, ahead
        )

    def issue(self, batch: StateBatch, law: Mixture, ahead: np.ndarray | int = 1) -> Mixture:
        """The law (scaled units) of the value `ahead` (B,) steps after each series' last
        observed one, moved towards its anchor by the weight of the reverting model, where
        that is on."""
        if not self.revert:
            return law
        d, r = self.reversion(batch, law.moments()[0], ahead)
        return law.shifted(r * d)

    def start(self, start: Start) -> None:
        """The alpha of each series' level (B, O), fitted with its trend where the trend is
        kept (Start.fits), which bounds the growth of its paths' spread, and the growth of
        that form's errors over the steps ahead in the history (B, O, len(ERROR_STEPS)), which
        floors it (0 where the bound is off or the history is too short to fit)."""
        alpha = np.zeros((len(start.rows), self.target_dim))
        growth = np.zeros((len(start.rows), self.target_dim, len(ERROR_STEPS)))
        if self.bound:  # the level the paths carry: with the trend, if kept
            for i, fitted in enumerate(start.fits):
                alpha[i] = fitted.alpha if start.trended else fitted.flat
                growth[i] = fitted.errors if start.trended else fitted.flat_errors
        start.held[self] = alpha, growth

    def started(self, batch: StateBatch, start: Start) -> None:
        alpha, growth = start.held[self]
        batch.marginal[:] = Marginal.of(batch.marginal)._replace(alpha=alpha).record()
        batch.error_growth[:] = growth

    def scaled_paths(self, paths: Paths, block: Block) -> None:
        """The paths moved towards each series' level as its one-step law is (`issue`), then,
        after the first step and where the bound is on, their spread held to each series'
        marginal law and to its level's growth from the first step's spread (kept from the
        block that holds the first step)."""
        batch, x, centre = paths.batch, block.x, block.centre
        ahead = np.r_[block.at] + 1  # (S,) the paths' steps ahead
        if self.revert:  # moved towards the series' level, as its one-step law is
            d, r = self.reversion(batch, centre[..., 0, :], ahead[:, None, None])
            shift = (r * d)[..., None, :]
            x, centre = x + shift, centre + shift
            block.x, block.centre = x, centre
        if not self.bound:
            return
        i = int(ahead[0] == 1)  # the steps from i on are held; the first is the one-step law
        if i:
            paths.held[self] = marginal.spread(x[0])
        if i == len(ahead):
            return
        o = self.target_dim
        own = Marginal.of(batch.marginal)
        bound_sd = marginal.spread_bound(
            own, batch.loc[:, :o], batch.scale[:, :o], centre[i:, ..., 0, :]
        )
        first = paths.held.get(self)
        if first is not None:
            growth = marginal.growth_bound(own, first, ahead[i:])
            bound_sd = np.minimum(bound_sd, growth)
        held = marginal.bounded(x[i:], bound_sd, centre[i:])
        block.x = np.concatenate([x[:i], held]) if i else held

    def series_paths(self, paths: Paths, block: Block) -> None:
        """After the first step and where the bound is on, the paths' spread (series units, the
        trend carried in) floored at what the series' own errors over the steps ahead say:
        sqrt(e_1 s_1) r_h at step h (`marginal.error_floor`), s_1 the first step's, and, while
        its own law is too young to bound them, at a random walk's s_1 sqrt(h)
        (`marginal.walk_floor`)."""
        first = paths.held.get(self)
        if not self.bound or first is None:
            return
        ahead = np.r_[block.at] + 1
        i = int(ahead[0] == 1)
        if i == len(ahead):
            return
        o, batch = self.target_dim, paths.batch
        s_1 = first * batch.scale[:, :o]  # series units
        floor = np.maximum(
            marginal.error_floor(batch.error_growth, s_1, ahead[i:]),
            marginal.walk_floor(Marginal.of(batch.marginal), s_1, ahead[i:]),
        )
        held = marginal.floored(block.x[i:], floor)
        block.x = np.concatenate([block.x[:i], held]) if i else held

    def learn(self, batch: StateBatch, step: Step) -> None:
        """One step of the odds of the reverting model, then of the series' own law from its
        value without season and trend. In place."""
        if self.revert:
            self._learn_reversion(batch, step.ys, step.observed, step.law, step.raw)
        o = self.target_dim
        plain = step.ys * batch.scale[:, :o] + batch.loc[:, :o]
        own = marginal.update(Marginal.of(batch.marginal), plain, step.present,
                              fresh=step.observed)
        batch.marginal[:] = own.record()

    def _learn_reversion(
        self, sub: StateBatch, ys: np.ndarray, observed: np.ndarray, law: Mixture, raw: Mixture
    ) -> None:
        """One step of the log odds of the reverting model of the series observed (B_k,), and of
        those of the mean against the level in its anchor: the log ratio of the value's density
        under the law issued moved to each model's mean, as for the weight of the correction of
        the mean (model/series/mean.py)."""
        own = Marginal.of(sub.marginal)
        d, r = self.reversion(sub, raw.moments()[0])
        held = observed[:, None] & (own.weight >= marginal.REVERT_WEIGHT)
        y = ys.astype(np.float64)
        evidence = odds_evidence(law.log_marginal(y - (1.0 - r) * d), law.log_marginal(y + r * d))
        o = self.target_dim
        found = marginal.mean_evidence(own, sub.loc[:, :o], sub.scale[:, :o], law, y)
        sub.marginal[:] = own._replace(
            odds=update_odds(own.odds, np.where(held, evidence, np.nan), ODDS_FORGET),
            mean_odds=update_odds(own.mean_odds, np.where(held, found, np.nan), ODDS_FORGET),
        ).record()
