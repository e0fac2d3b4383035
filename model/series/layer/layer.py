"""The per-series layer as one model: its corrections in their order, held once.

Each correction is a module of this package (base.py says what a correction is); the Layer
calls each of them in its phase, in the order of `corrections`. The runtime steps the layer
and the backend in a fixed loop (model/runtime/runtime.py `_advance`): the value in
(`enter`: every correction's offsets out, in the model's units), the model's step, the law
issued (`issue`), its score, `learn`, then the units after the step (`absorbed`); after
the update's steps, the forecasts kept for its values are scored (`score_values`). A series
starts from its history by `decompose` (its season, then its trend); forecast paths take the
offsets the paths do not carry themselves, the trend each path carries (`paths_trend`) and
the spread and the own law's move and bound (`spread_paths`).

Shapes: B_k series at a step, L window, O targets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from model.filtering.predictive import Mixture
from model.series import trend as trend_model
from model.series.adaptation import AdaptConfig
from model.series.horizons import HorizonScore
from model.series.layer.base import Correction, Step
from model.series.layer.coverage import Coverage
from model.series.layer.horizons import Horizons
from model.series.layer.marginal import OwnLaw
from model.series.layer.mean import MeanShift
from model.series.layer.scaling import Scaling
from model.series.layer.season import Season
from model.series.layer.spread import Spread
from model.series.layer.trend import Trend
from model.series.scaling import scale_values
from model.series.state import SeriesState, StateBatch


@dataclass(frozen=True)
class Layer:
    """The corrections `adapt` switches on, for a model of `target_dim` targets whose backend
    takes `n_mean` terms of a mean correction (0: none), then the corrections `extra`, in
    their order; a series adapts its spread, coverage and mean from the step where its
    window holds `min_observed` inputs."""

    adapt: AdaptConfig
    target_dim: int
    n_mean: int
    min_observed: int
    extra: tuple[Correction, ...] = ()
    #: the series' units (None: read by their location and scale, kept)
    units: Scaling | None = None
    season: Season = field(init=False)
    trend: Trend | None = field(init=False)
    spread: Spread = field(init=False)
    own: OwnLaw | None = field(init=False)
    mean: MeanShift = field(init=False)
    coverage: Coverage = field(init=False)
    horizons: Horizons = field(init=False)
    #: the corrections in their order
    corrections: tuple[Correction, ...] = field(init=False)

    def __post_init__(self) -> None:
        a, o = self.adapt, self.target_dim
        parts = {
            "season": Season(o, a.season),
            "trend": Trend(o) if a.trend else None,
            "spread": Spread(a.forget, a.spread),
            "own": OwnLaw(o, a.revert, a.bound) if a.revert or a.bound else None,
            "mean": MeanShift(o, self.n_mean, a.mean),
            "coverage": Coverage(a.gamma, a.coverage),
            "horizons": Horizons(o, a.gamma, a.horizons and a.spread, a.horizons and a.coverage),
        }
        for name, part in parts.items():
            object.__setattr__(self, name, part)
        kept = (
            *(() if self.units is None else (self.units,)),
            *(p for p in parts.values() if p is not None),
        )
        object.__setattr__(self, "corrections", kept + self.extra)

    def decompose(
        self, rows: Sequence[np.ndarray], season: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray], list[np.ndarray], np.ndarray]:
        """The start from histories `rows` (T_i, F) of season lengths `season` (B,): each
        one's seasonal profile (B, M, O) (zeros where the profile is off or the series has no
        season), its damped trend after its last value (B, O, 4) (model/series/trend.py; zeros
        where the trend is off or it has none), the histories without either (copies), the
        trend's sum at each of their values (T_i, O), and the alpha of each series' level (B,
        O), fitted with its trend, that bounds the growth of its paths' spread (0: none, where
        the bound is off or the history is too short to fit)."""
        profile, plain = self.season.start(rows, season)
        o = self.target_dim
        trend = np.zeros((len(plain), o, trend_model.N_FIELDS))
        sums = [np.zeros((len(r), o)) for r in plain]
        alpha = np.zeros((len(plain), o))
        if self.adapt.trend or self.adapt.bound:
            for i, r in enumerate(plain):
                fitted = trend_model.fit(r[:, :o])
                if self.adapt.trend:
                    trend[i], sums[i] = fitted.packed, fitted.sums
                    r[:, :o] -= sums[i]
                if self.adapt.bound:  # the level the paths carry: with the trend, if kept
                    alpha[i] = fitted.alpha if self.adapt.trend else fitted.flat
        return profile, trend, plain, sums, alpha

    def offsets(
        self, batch: StateBatch, seqs: np.ndarray | None = None, carried: bool = True
    ) -> np.ndarray:
        """What the layer takes out of each series' value at `seqs` (B,) or (B, H) (default:
        its next value, (B,)) before the model sees it, and puts back into what the model
        issues, each correction's in the layer's order (its seasonal index, its trend's sum
        there) -> (B, O) or (B, H, O); 0 where it has none. Without `carried`, those that
        forecast paths carry themselves are left out (the trend: `paths_trend`). `seqs` are at
        or after the next value."""
        at = batch.t if seqs is None else np.asarray(seqs)
        out = np.zeros((*np.shape(at), self.target_dim))
        for correction in self.corrections:
            if carried or not correction.carried:
                part = correction.offsets(batch, at)
                if part is not None:
                    out += part
        return out

    def enter(self, batch: StateBatch, x: np.ndarray) -> np.ndarray:
        """Values x (B_k, F) in series units as the model reads them: without the layer's
        offsets, in its units (float64, NaN kept; one too far from the series' level is an
        InputError)."""
        plain = x.astype(np.float64)
        plain[:, : self.target_dim] -= self.offsets(batch)
        return scale_values(plain, batch) if self.units is None else self.units.enter(batch, plain)

    def absorbed(self, batch: StateBatch) -> None:
        """After a step: the series' units taken again where they follow the window, and every
        correction that keeps numbers in them told (in place)."""
        ratio = None if self.units is None else self.units.rescale(batch)
        if ratio is not None:
            for correction in self.corrections:
                correction.rescaled(batch, ratio)

    def model_mean(self, batch: StateBatch) -> np.ndarray:
        """The shift of each series' mean the model takes (B, J, O) float32 (MeanShift)."""
        return self.mean.coefficients(batch)

    def issue(
        self, batch: StateBatch, law: Mixture, ahead: np.ndarray | int = 1
    ) -> tuple[Mixture, Mixture]:
        """The model's law (scaled units) of each series' value `ahead` (B,) steps after its
        last observed one as the series issues it, through every correction in the layer's
        order: the law before the first that moves its mean (`Step.raw`), and the law issued."""
        raw = None
        for correction in self.corrections:
            if correction.moves and raw is None:
                raw = law
            law = correction.issue(batch, law, ahead)
        return (law if raw is None else raw), law

    def alphas(self, batch: StateBatch | Sequence[SeriesState], levels: list[float]) -> np.ndarray:
        """Miscoverage to issue at each level (fractions) per series (B, Q)."""
        return self.coverage.alphas(batch, levels)

    def paths_trend(self, batch: StateBatch, n: int) -> trend_model.PathTrend | None:
        """The trend the N paths of each series carry (None where none has one or it is off)."""
        return None if self.trend is None else self.trend.paths(batch, n)

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
        (S, B, 1, O) (Spread.paths), then moved and bounded by its own law (OwnLaw.paths).
        Returns the paths and the first step's spread `first` (B, O)."""
        centre = x.mean(axis=-2, keepdims=True)  # kept by the scaling, moved with the paths
        x = self.spread.paths(x, centre, factor)
        if self.own is None:
            return x, first
        return self.own.paths(batch, x, centre, ahead, first)

    def score_values(
        self, batch: StateBatch, first: np.ndarray, rows: list[np.ndarray]
    ) -> list[dict[int, list[HorizonScore]]]:
        """After an update's steps: the forecasts each series was issued for its new values
        (rows[i] (K_i, F), from seq first[i] on) scored, and its calibration by horizon adapted
        from them (Horizons.score_values): each series' scores by seq."""
        return self.horizons.score_values(batch, first, rows)

    def learn(
        self,
        batch: StateBatch,
        ys: np.ndarray,
        observed: np.ndarray,
        law: Mixture,
        valid: np.ndarray,
        raw: Mixture | None = None,
        present: np.ndarray | None = None,
    ) -> None:
        """Update every correction of the series observed at this step from their scaled
        values ys (B_k, O) under the law they were issued, `law`, and the model's law before
        its move towards the series' level, `raw` (default: the same); `batch` still holds the
        window the step read, `valid` (B_k, L) its lags. `observed` (B_k,): the values that
        adapt the series (none right after a gap); `present` (default: `observed`): all
        values observed, which the series' own law takes in. In place, in the layer's order."""
        # the spread, coverage and mean adapt from the step where the window holds half its
        # inputs (model/series/adaptation.py)
        rows = np.flatnonzero(observed & (batch.t >= self.min_observed))
        step = Step(ys, law, law if raw is None else raw, valid, observed,
                    observed if present is None else present, rows)
        for correction in self.corrections:
            correction.learn(batch, step)
