"""The calibration by horizon as a correction of the per-series layer: the forecasts a series
was issued, kept at a few steps until their values come, scored by those values, each step's
spread and miscoverage adapted from the scores (its estimator: model/series/horizons.py).

Shapes: B series, B_k of them with a value at an update's k-th row, K_i values of series i,
F features, O targets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from model.series import horizons
from model.series.coverage import ALPHA_MAX, ALPHA_MIN
from model.series.layer.base import Block, Correction, Paths
from model.series.state import StateBatch

#: a state's fields of its calibration by horizon, in the order horizons.score takes them
FIELDS = (
    "horizon_target", "horizon_law", "horizon_bounds", "horizon_spread", "horizon_weight",
    "horizon_alpha",
)


@dataclass(frozen=True)
class Horizons(Correction):
    """Each series' calibration by horizon, of a model of `target_dim` targets, its
    miscoverage moved by ACI steps of `gamma`; `spread` and `coverage` where each step's spread
    and miscoverage are issued as calibrated."""

    target_dim: int
    gamma: float
    spread: bool = True
    coverage: bool = True

    def start_paths(self, paths: Paths) -> None:
        """Each step's factor (B, H', O) on the spread of the paths, from the forecasts each
        series was issued before (none where no series has one, or the correction is off)."""
        batch = paths.batch
        if self.spread and (batch.horizon_spread != 1.0).any():
            paths.held[self] = horizons.spread_factors(
                batch.horizon_spread, paths.ahead, batch.horizon_weight
            )

    def series_paths(self, paths: Paths, block: Block) -> None:
        """The paths as issued: scaled about their mean by each step's calibration, last, so
        that no bound undoes what the series' scores asked for."""
        calibrated = paths.held.get(self)
        if calibrated is None:
            return
        moved = []
        for j, k in enumerate(block.steps):
            x = block.x[j]
            centre = x.mean(axis=1, keepdims=True)
            moved.append(centre + calibrated[:, k : k + 1] * (x - centre))
        block.x = np.stack(moved)

    def calibration(self, paths: Paths, horizon: int) -> np.ndarray:
        """The factors (B, H, O) of the calibration the paths took at each series' steps 1 ..
        `horizon` (1 for a series issued none)."""
        shift = paths.batch.pending
        own = shift[:, None] + np.arange(horizon)[None, :]  # (B, H)
        calibrated = paths.held.get(self)
        every = np.ones_like(paths.factors) if calibrated is None else calibrated
        return np.take_along_axis(every, own[:, :, None], axis=1)

    def alphas(
        self, batch: StateBatch, alphas: np.ndarray, levels: list[float], horizon: int
    ) -> np.ndarray:
        """The miscoverage `alphas` (B, H, Q) each series issues at `levels` over a horizon,
        moved by each step's offset from the forecasts the series was issued before."""
        if not (self.coverage and batch.horizon_alpha.any()):
            return alphas
        steps = np.broadcast_to(np.arange(1, horizon + 1)[None, :], (len(batch), horizon))
        moved = alphas + horizons.alpha_offsets(
            batch.cover_levels, batch.horizon_alpha, batch.horizon_weight, levels, steps
        )
        return np.clip(moved, ALPHA_MIN, ALPHA_MAX)

    def keep(
        self, batch: StateBatch, paths: np.ndarray, factors: np.ndarray, horizon: int,
        bounds: Callable[[list[float]], dict[float, tuple[np.ndarray, np.ndarray]]],
    ) -> None:
        """Keep a forecast issued in the batch at the steps a series scores (the first of
        horizons.STEPS within `horizon`): the paths there `paths` (B, N, S', O) in the series'
        support, each step's spread before its calibration `factors` (B, S', O), and the bounds
        (B, S', O) at each monitored level of the forecast's intervals, `bounds(levels)`. In
        place."""
        at = [s - 1 for s in horizons.STEPS if s <= horizon]
        mean = paths.mean(axis=1)
        base = np.abs(paths - mean[:, None]).mean(axis=1) / factors
        levels = batch.cover_levels
        found = bounds(sorted({float(lv) for lv in levels[np.isfinite(levels)]}))
        o = self.target_dim
        seqs = batch.t + batch.pending
        for i in range(len(batch)):
            keep = np.isfinite(levels[i])
            own = levels[i][keep]
            lo = np.stack([found[float(lv)][0][i] for lv in own]) if len(own) else (
                np.zeros((0, len(at), o)))
            hi = np.stack([found[float(lv)][1][i] for lv in own]) if len(own) else lo
            target, law, kept = horizons.issued(
                batch.horizon_target[i], batch.horizon_law[i], batch.horizon_bounds[i][keep],
                int(seqs[i]), mean[i], base[i], lo, hi,
            )
            batch.horizon_target[i], batch.horizon_law[i] = target, law
            batch.horizon_bounds[i, keep] = kept

    def score_values(
        self, batch: StateBatch, first: np.ndarray, rows: list[np.ndarray]
    ) -> list[dict[int, list[horizons.HorizonScore]]]:
        """Score the forecasts each series was issued for its new values (rows[i] (K_i, F),
        from seq first[i] on) and adapt its calibration by horizon from them, in place: each
        series' scores by seq."""
        out: list[dict[int, list[horizons.HorizonScore]]] = [{} for _ in rows]
        if not batch.horizon_target.any():
            return out
        o = self.target_dim
        counts = np.array([len(r) for r in rows])
        for k in range(int(counts.max(initial=0))):
            idx = np.flatnonzero((counts > k) & batch.horizon_target.any(axis=1))
            if not len(idx):
                continue
            y = np.stack([rows[i][k][:o] for i in idx]).astype(np.float64)
            parts = [getattr(batch, name)[idx] for name in FIELDS]
            target, law, bounds, spread, weight, offsets = parts
            found = horizons.score(
                target, law, bounds, spread, weight, offsets, batch.cover_levels[idx],
                first[idx] + k, y, self.gamma,
            )
            for name, part in zip(FIELDS, parts, strict=True):
                getattr(batch, name)[idx] = part
            for i, res in zip(idx, found, strict=True):
                if res:
                    out[i][int(first[i] + k)] = res
        return out
