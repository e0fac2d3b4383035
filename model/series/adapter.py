"""The per-series online adaptation (model/series/adaptation.py) run on a batch of series.

model/series/ holds the estimators, on arrays (adaptation.py says which module holds which);
an Adapter applies them to the states the runtime steps (model/series/state.StateBatch): what each
series is issued from its corrections (its seasonal index, its correction of the mean, the
miscoverage of its intervals, the move towards its own level and the bound of its paths' spread:
model/series/marginal.py), and the update of those corrections from each observed step, after the
step has been scored. The spread factor is applied where the law is issued
(model/series/scoring.issued_law, and the paths of model/runtime/rollout/forecaster.py).

Shapes: B batch, B_k series observed at a step, R of them adapting, L window, O targets,
J terms of the mean correction, M longest season, Q levels, K monitored levels, H horizon.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from model.filtering.predictive import Mixture
from model.network.smc_transformer import N_LAG_TERMS, N_MEAN_TERMS
from model.series import marginal
from model.series import trend as trend_model
from model.series.adaptation import AdaptConfig
from model.series.coverage import ALPHA_MAX, ALPHA_MIN, effective_alphas, update_alpha
from model.series.marginal import Marginal
from model.series.mean import (
    ODDS_FORGET,
    mean_terms,
    mean_weight,
    odds_evidence,
    update_mean,
    update_odds,
)
from model.series.season import season_decomposition, season_offsets
from model.series.spread import spread_statistic, update_spread
from model.series.state import SeriesState, StateBatch, cover_arrays, profiles


@dataclass(frozen=True)
class Adapter:
    """The corrections `adapt` switches on, for a model of `target_dim` targets whose backend
    takes `n_mean` terms of a mean correction (0: none); a series adapts from the step where
    its window holds `min_observed` inputs."""

    adapt: AdaptConfig
    target_dim: int
    n_mean: int
    min_observed: int

    def decompose(
        self, rows: Sequence[np.ndarray], season: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray], list[np.ndarray], np.ndarray]:
        """Each history's seasonal profile (B, M, O) (zeros where the profile is off or the
        series has no season), its damped trend after its last value (B, O, 4)
        (model/series/trend.py; zeros where the trend is off or it has none), the histories
        (T_i, F) without either (copies), the trend's sum at each of their values (T_i, O),
        and the alpha of each series' level (B, O), fitted with its trend, that bounds the
        growth of its paths' spread (0: none, where the bound is off or the history is too
        short to fit)."""
        profile, plain = self._deseasonalise(rows, season)
        trend = np.zeros((len(plain), self.target_dim, trend_model.N_FIELDS))
        sums = [np.zeros((len(r), self.target_dim)) for r in plain]
        alpha = np.zeros((len(plain), self.target_dim))
        if self.adapt.trend or self.adapt.bound:
            for i, r in enumerate(plain):
                fitted = trend_model.fit(r[:, : self.target_dim])
                if self.adapt.trend:
                    trend[i], sums[i] = fitted.packed, fitted.sums
                    r[:, : self.target_dim] -= sums[i]
                if self.adapt.bound:  # the level the paths carry: with the trend, if kept
                    alpha[i] = fitted.alpha if self.adapt.trend else fitted.flat
        return profile, trend, plain, sums, alpha

    def _deseasonalise(
        self, rows: Sequence[np.ndarray], season: np.ndarray
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Each history's seasonal profile (B, M, O) and the histories (T_i, F) without their
        seasonal part (model/series/season.py)."""
        o = self.target_dim
        found = [
            season_decomposition(r[:, :o], int(m) if self.adapt.season else 0)
            for r, m in zip(rows, season, strict=True)
        ]
        profile = profiles([f[0] for f in found], o, int(season.max(initial=0)))
        plain = [r.copy() for r in rows]
        for r, (_, part) in zip(plain, found, strict=True):
            r[:, :o] -= part
        return profile, plain

    def offsets(
        self, batch: StateBatch, seqs: np.ndarray | None = None, trend: bool = True
    ) -> np.ndarray:
        """What the per-series layer takes out of each series' value at `seqs` (B,) or (B, H)
        (default: its next value, (B,)) before the model sees it, and puts back into what the
        model issues: its seasonal index and its trend's sum there -> (B, O) or (B, H, O); 0
        where it has neither or they are off (the trend left out with `trend` False: forecast
        paths carry their own, `paths_trend`). `seqs` are at or after the next value."""
        at = batch.t if seqs is None else np.asarray(seqs)
        out = np.zeros((*np.shape(at), self.target_dim))
        if self.adapt.season:
            out += season_offsets(batch.profile, batch.season, at)
        carried = trend_model.Trend.of(batch.trend)
        if trend and self.adapt.trend and carried.phi.any():
            ahead = at - batch.t.reshape((-1,) + (1,) * (np.ndim(at) - 1)) + 1
            out += carried.ahead(ahead)
        return out

    def paths_trend(self, batch: StateBatch, n: int) -> trend_model.PathTrend | None:
        """The trend the N paths of each series carry (None where none has one or it is off)."""
        if not (self.adapt.trend and trend_model.Trend.of(batch.trend).phi.any()):
            return None
        return trend_model.PathTrend(batch.trend, n)

    def spread_paths(
        self,
        batch: StateBatch,
        x: np.ndarray,
        factor: np.ndarray,
        ahead: np.ndarray,
        first: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Paths x (S, B, N, O) (scaled units) of S steps, `ahead` (S,) steps after each
        series' last value, scaled about their mean by each series' spread factor `factor`
        (S, B, 1, O) where that correction is on, moved towards the series' level as its
        one-step law is (`reverted`), then, after the first step and where the bound is on,
        their spread held to each series' marginal law and to its level's growth from the
        first step's spread `first` (B, O) (model/series/marginal.py). Returns the paths and
        `first` (taken from these paths where they hold the first step)."""
        centre = x.mean(axis=-2, keepdims=True)  # kept by the scaling, moved with the paths
        if self.adapt.spread:
            x = centre + factor * (x - centre)
        if self.adapt.revert:  # moved towards the series' level, as its one-step law is
            d, r = self._reversion(batch, centre[..., 0, :], ahead[:, None, None])
            shift = (r * d)[..., None, :]
            x, centre = x + shift, centre + shift
        if not self.adapt.bound:
            return x, first
        i = int(ahead[0] == 1)  # the steps from i on are held; the first is the one-step law
        if i:
            first = marginal.spread(x[0])
        if i == len(ahead):
            return x, first
        o = self.target_dim
        own = Marginal.of(batch.marginal)
        bound_sd = marginal.spread_bound(
            own, batch.loc[:, :o], batch.scale[:, :o], centre[i:, ..., 0, :]
        )
        if first is not None:
            growth = marginal.growth_bound(own, first, ahead[i:])
            bound_sd = np.minimum(bound_sd, growth)
        held = marginal.bounded(x[i:], bound_sd, centre[i:])
        return (np.concatenate([x[:i], held]) if i else held), first

    def mean_coef(self, batch: StateBatch) -> np.ndarray:
        """The coefficients of each series' correction of the mean as the model takes them
        (B, J, O) float32: zeros where the correction is off or the model has none."""
        if not (self.n_mean and self.adapt.mean):
            return np.zeros((len(batch), N_MEAN_TERMS, self.target_dim), np.float32)
        weight = mean_weight(batch.mean_odds)[:, None, :]  # (B, 1, O)
        return np.ascontiguousarray((batch.mean_coef.transpose(0, 2, 1) * weight), np.float32)

    def alphas(self, batch: StateBatch | Sequence[SeriesState], levels: list[float]) -> np.ndarray:
        """Miscoverage to issue at each level (fractions) per series (B, Q)."""
        if not self.adapt.coverage:
            return np.broadcast_to(1.0 - np.asarray(levels), (len(batch), len(levels)))
        cover = (batch.cover_levels, batch.cover_alpha) if isinstance(batch, StateBatch) else (
            cover_arrays(batch)
        )
        return effective_alphas(*cover, levels)

    def reverted(
        self, batch: StateBatch, law: Mixture, ahead: np.ndarray | int = 1
    ) -> Mixture:
        """The law (scaled units) of the value `ahead` (B,) steps after each series' last
        observed one, moved towards its anchor by the weight of the reverting model
        (model/series/marginal.py), where that is on."""
        if not self.adapt.revert:
            return law
        d, r = self._reversion(batch, law.moments()[0], ahead)
        return law.shifted(r * d)

    def _reversion(
        self, batch: StateBatch, centre: np.ndarray, ahead: np.ndarray | int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        o = self.target_dim
        return marginal.reversion(
            Marginal.of(batch.marginal), batch.loc[:, :o], batch.scale[:, :o], centre, ahead
        )

    def learn(
        self,
        sub: StateBatch,
        ys: np.ndarray,
        observed: np.ndarray,
        law: Mixture,
        valid: np.ndarray,
        raw: Mixture | None = None,
        present: np.ndarray | None = None,
    ) -> None:
        """Update the adaptation of the series observed at this step from their scaled values
        ys (B_k, O) under the law they were issued, `law`, and the model's law before its move
        towards the series' level, `raw` (default: the same); `sub` still holds the window the
        step read, `valid` (B_k, L) its lags. `observed` (B_k,): the values that adapt the
        series (none right after a gap); `present` (default: `observed`): all values observed,
        which the series' own law takes in. In place."""
        raw = law if raw is None else raw
        present = observed if present is None else present
        if self.adapt.trend:
            self._step_trend(sub, ys, observed, law)
        if self.adapt.revert:
            self._learn_reversion(sub, ys, observed, law, raw)
        if self.adapt.bound or self.adapt.revert:  # the values without season and trend
            plain = ys * sub.scale[:, : self.target_dim] + sub.loc[:, : self.target_dim]
            own = marginal.update(Marginal.of(sub.marginal), plain, present, fresh=observed)
            sub.marginal[:] = own.packed()
        # from the step where the window holds half its inputs (model/series/adaptation.py)
        rows = np.flatnonzero(observed & (sub.t >= self.min_observed))
        correct = bool(self.n_mean) and self.adapt.mean
        adapting = self.adapt.spread or self.adapt.coverage or correct
        if not len(rows) or not adapting:
            return
        y = ys[rows].astype(np.float64)
        seen = law.take(rows)
        if correct:
            self._learn_mean(sub, rows, y, raw.take(rows), valid)
        if self.adapt.coverage and sub.cover_levels.shape[1]:
            self._learn_coverage(sub, rows, y, seen)
        if self.adapt.spread:
            self._learn_spread(sub, rows, y, seen)

    def _step_trend(
        self, sub: StateBatch, ys: np.ndarray, observed: np.ndarray, law: Mixture
    ) -> None:
        """Move each series' trend one step (model/series/trend.py): by its one-step error in series
        units where `observed` (B_k,), clipped to trend.CLIP standard deviations of the law
        issued, by 0 elsewhere. In place."""
        if not trend_model.Trend.of(sub.trend).phi.any():
            return
        mean, var = law.moments()  # (B_k, O) scaled
        scale = sub.scale[:, : self.target_dim]
        bound = trend_model.CLIP * np.sqrt(np.maximum(var, 0.0)) * scale
        error = np.clip(np.nan_to_num((ys - mean) * scale), -bound, bound)
        error = np.where(observed[:, None], error, 0.0)
        sub.trend[:] = trend_model.Trend.of(sub.trend).step(error).packed()

    def _learn_mean(
        self, sub: StateBatch, rows: np.ndarray, y: np.ndarray, seen: Mixture, valid: np.ndarray
    ) -> None:
        """One Kalman step of the correction of the mean of series `rows` (R,), from their
        values y (R, O) less the corrected model's mean, and one step of its odds
        (model/series/mean.py); `seen` is the law they were issued."""
        issued, _ = seen.moments()
        phi = mean_terms(
            sub.x_hist[rows], valid[rows], sub.season[rows], N_LAG_TERMS, self.target_dim
        )
        before = sub.mean_coef[rows].astype(np.float64)
        cov, noise = sub.mean_cov[rows].astype(np.float64), sub.mean_noise[rows].astype(np.float64)
        # the law was issued with the correction's shift d of the mean weighted by w: the
        # corrected model's residual is the value less the mean issued, less (1 - w) d
        d = np.einsum("roj,roj->ro", phi, before)
        w = mean_weight(sub.mean_odds[rows])
        resid = y - issued - (1.0 - w) * d
        # each model's law: the law issued moved to its mean
        evidence = odds_evidence(seen.log_marginal(y - (1.0 - w) * d), seen.log_marginal(y + w * d))
        sub.mean_odds[rows] = update_odds(sub.mean_odds[rows], evidence, ODDS_FORGET)
        coef, cov, noise = update_mean(before, cov, noise, phi, resid, ODDS_FORGET)
        sub.mean_coef[rows], sub.mean_cov[rows], sub.mean_noise[rows] = coef, cov, noise

    def _learn_reversion(
        self, sub: StateBatch, ys: np.ndarray, observed: np.ndarray, law: Mixture, raw: Mixture
    ) -> None:
        """One step of the log odds of the reverting model of the series observed (B_k,), and of
        those of the mean against the level in its anchor: the log ratio of the value's density
        under the law issued moved to each model's mean, as for the weight of the correction of
        the mean (model/series/mean.py)."""
        own = Marginal.of(sub.marginal)
        d, r = self._reversion(sub, raw.moments()[0])
        held = observed[:, None] & (own.weight >= marginal.MIN_WEIGHT)
        y = ys.astype(np.float64)
        evidence = odds_evidence(law.log_marginal(y - (1.0 - r) * d), law.log_marginal(y + r * d))
        o = self.target_dim
        found = marginal.mean_evidence(own, sub.loc[:, :o], sub.scale[:, :o], law, y)
        sub.marginal[:] = own._replace(
            odds=update_odds(own.odds, np.where(held, evidence, np.nan), ODDS_FORGET),
            mean_odds=update_odds(own.mean_odds, np.where(held, found, np.nan), ODDS_FORGET),
        ).packed()

    def _learn_coverage(
        self, sub: StateBatch, rows: np.ndarray, y: np.ndarray, seen: Mixture
    ) -> None:
        """One ACI step of the miscoverage alpha_t (R, K) of series `rows` at each monitored
        level: did y (R, O) fall outside the interval issued at it under `seen`?"""
        alpha = sub.cover_alpha[rows].astype(np.float64)  # (R, K)
        used = np.clip(alpha, ALPHA_MIN, ALPHA_MAX)
        pit = seen.cdf(y[:, None])[:, 0]  # (R, O)
        half = used[:, :, None] / 2.0
        inside = ((pit[:, None] >= half) & (pit[:, None] <= 1.0 - half)).all(axis=2)
        nominal = 1.0 - sub.cover_levels[rows].astype(np.float64)
        moved = update_alpha(alpha, nominal, np.asarray(~inside), self.adapt.gamma)
        sub.cover_alpha[rows] = np.where(np.isnan(nominal), alpha, moved)

    def _learn_spread(
        self, sub: StateBatch, rows: np.ndarray, y: np.ndarray, seen: Mixture
    ) -> None:
        """One step of the spread factor s (R, O) of series `rows` from the absolute residual
        of y (R, O) under the law `seen` they were issued (already scaled by s)."""
        s = sub.spread_factor[rows].astype(np.float64)
        mean, mad = seen.mean_abs_dev()  # the scaled law's: s D
        stat = spread_statistic(mean, mad / s, y)
        factor, weight = update_spread(
            sub.spread_factor[rows].astype(np.float64),
            sub.spread_weight[rows].astype(np.float64),
            stat,
            self.adapt.forget,
        )
        sub.spread_factor[rows], sub.spread_weight[rows] = factor, weight
