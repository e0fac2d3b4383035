"""The per-series layer as one model: its corrections in their order, held once.

Each correction is a module of this package (base.py says what a correction is); the Layer
calls each of them in its phase, in the order of `corrections`. The runtime steps the layer
and the backend in a fixed loop (model/runtime/runtime.py `_advance`): the value in
(`enter`: every correction's offsets out, in the model's units), the model's step, the law
issued (`issue`), its score, `learn`, then the units after the step (`absorbed`); after
the update's steps, the forecasts kept for its values are scored (`score_values`). Series start
from their histories (`start`: every correction takes its part out before the model filters
them; `started`: each sets its numbers in the states after). A forecast's paths start
(`paths`: every correction sets what it needs) and each block of their steps is moved
(`move`): every correction in the model's units, the series' units and offsets back, every
correction in the series' units.

Shapes: B_k series at a step, L window, O targets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from model.filtering.predictive import Mixture
from model.series.adaptation import AdaptConfig
from model.series.horizons import HorizonScore
from model.series.layer.base import Block, Correction, Paths, Start, Step, steps_of
from model.series.layer.coverage import Coverage
from model.series.layer.horizons import Horizons
from model.series.layer.marginal import OwnLaw
from model.series.layer.mean import MeanShift
from model.series.layer.scaling import Scaling
from model.series.layer.season import Season
from model.series.layer.spread import Spread
from model.series.layer.trend import Trend
from model.series.mean import horizon_mean
from model.series.scaling import scale_values
from model.series.state import SeriesState, StateBatch

#: the phases the layer runs over its corrections (base.Correction)
PHASES = (
    "offsets", "issue", "learn", "rescaled", "start", "started", "start_paths", "scaled_paths",
    "series_paths",
)


def _acts(correction: Correction, phase: str) -> bool:
    """Whether `correction` acts in `phase`: overrides it (or, to issue, moves the mean)."""
    own = getattr(type(correction), phase) is not getattr(Correction, phase)
    return own or (phase == "issue" and correction.moves)


class IssuedLaw(NamedTuple):
    """A step's law as the series issues it (`law`), and the model's before the first
    correction that moves its mean (`raw`)."""

    raw: Mixture
    law: Mixture


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
    #: each phase's corrections, in their order: those that act in it (override it)
    acting: dict[str, tuple[Correction, ...]] = field(init=False)

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
        object.__setattr__(self, "acting", {
            phase: tuple(c for c in self.corrections if _acts(c, phase)) for phase in PHASES
        })

    def start(self, rows: Sequence[np.ndarray], season: np.ndarray) -> Start:
        """Series starting from their histories `rows` (T_i, F) of season lengths `season`
        (B,) (Start): every correction takes its part out of the histories, in the layer's
        order (the season, then the trend)."""
        start = Start(list(rows), season, self.target_dim)
        for correction in self.acting["start"]:
            correction.start(start)
        return start

    def started(self, batch: StateBatch, start: Start) -> None:
        """Once the histories of `start` were filtered into `batch`: every correction's numbers
        set in their states (in place)."""
        for correction in self.acting["started"]:
            correction.started(batch, start)

    def offsets(
        self, batch: StateBatch, seqs: np.ndarray | None = None, carried: bool = True
    ) -> np.ndarray:
        """What the layer takes out of each series' value at `seqs` (B,) or (B, H) (default:
        its next value, (B,)) before the model sees it, and puts back into what the model
        issues, each correction's in the layer's order (its seasonal index, its trend's sum
        there) -> (B, O) or (B, H, O); 0 where it has none. Without `carried`, those that
        forecast paths carry themselves are left out (the trend: `Trend.series_paths`). `seqs`
        are at or after the next value."""
        at = batch.t if seqs is None else np.asarray(seqs)
        out = np.zeros((*np.shape(at), self.target_dim))
        for correction in self.acting["offsets"]:
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
            for correction in self.acting["rescaled"]:
                correction.rescaled(batch, ratio)

    def model_mean(self, batch: StateBatch) -> np.ndarray:
        """The shift of each series' mean the model takes (B, J, O) float32 (MeanShift)."""
        return self.mean.coefficients(batch)

    def issue(
        self, batch: StateBatch, law: Mixture, ahead: np.ndarray | int = 1
    ) -> IssuedLaw:
        """The model's law (scaled units) of each series' value `ahead` (B,) steps after its
        last observed one as the series issues it, through every correction in the layer's
        order: the law before the first that moves its mean (`Step.raw`), and the law issued."""
        raw = None
        for correction in self.acting["issue"]:
            if correction.moves and raw is None:
                raw = law
            law = correction.issue(batch, law, ahead)
        return IssuedLaw(law if raw is None else raw, law)

    def alphas(self, batch: StateBatch | Sequence[SeriesState], levels: list[float]) -> np.ndarray:
        """Miscoverage to issue at each level (fractions) per series (B, Q)."""
        return self.coverage.alphas(batch, levels)

    def paths(
        self, batch: StateBatch, n: int, total: int, growth: np.ndarray, noise_sd: np.ndarray
    ) -> Paths:
        """The forecast paths of the series of `batch`, N each, over `total` steps, as they
        start (Paths): each series' horizon `growth` (B,) and the model's noise in series units
        `noise_sd` (B, 1, O); every correction sets what it needs, in the layer's order."""
        steps = np.arange(total)[None, :]
        seqs = batch.t[:, None] + steps  # the seq of each of the paths' steps (B, H')
        paths = Paths(
            batch, n, total, ahead=steps - batch.pending[:, None] + 1, growth=growth,
            noise_sd=noise_sd, offsets=self.offsets(batch, seqs, carried=False),
            factors=np.ones((len(batch), total, self.target_dim)),
        )
        paths.mean = self.model_mean(batch)  # the one-step shift, once a forecast
        for correction in self.acting["start_paths"]:
            correction.start_paths(paths)
        return paths

    def path_means(self, paths: Paths, steps: range) -> np.ndarray:
        """The shift of each series' mean the model takes at the paths' `steps` (S, B, J, O)
        float32 (MeanShift, over the horizon)."""
        return np.stack([horizon_mean(paths.mean, k + 1) for k in steps])

    def move(
        self, paths: Paths, x: np.ndarray, steps: range, eps: np.ndarray | None = None
    ) -> np.ndarray:
        """Paths x (S, B, N, O) at the paths' `steps` as the model drew them (its units), with
        its noise draws `eps` where `paths.noise` asked for them, as the series issue them
        (series units, float64): every correction's move in the model's units in the layer's
        order, the series' units and the offsets the paths do not carry, then every
        correction's move in the series' units."""
        x = x.astype(np.float64)
        block = Block(x, x.mean(axis=-2, keepdims=True), steps, eps)
        for correction in self.acting["scaled_paths"]:
            correction.scaled_paths(paths, block)
        batch, o = paths.batch, self.target_dim
        loc, scale = batch.loc[:, None, :o], batch.scale[:, None, :o]  # (B, 1, O)
        block.x = block.x * scale + loc + steps_of(paths.offsets, block.at)
        for correction in self.acting["series_paths"]:
            correction.series_paths(paths, block)
        return block.x

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
        for correction in self.acting["learn"]:
            correction.learn(batch, step)
