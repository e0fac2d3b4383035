"""The calibration by horizon as a correction of the per-series layer: the forecasts a series
was issued, kept at a few steps until their values come, scored by those values, each step's
spread and miscoverage adapted from the scores (its estimator: model/series/horizons.py).

Shapes: B series, B_k of them with a value at an update's k-th row, K_i values of series i,
F features, O targets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.series import horizons
from model.series.layer.base import Correction
from model.series.state import StateBatch

#: a state's fields of its calibration by horizon, in the order horizons.score takes them
FIELDS = (
    "horizon_target", "horizon_law", "horizon_bounds", "horizon_spread", "horizon_weight",
    "horizon_alpha",
)


@dataclass(frozen=True)
class Horizons(Correction):
    """Each series' calibration by horizon, of a model of `target_dim` targets, its
    miscoverage moved by ACI steps of `gamma`."""

    target_dim: int
    gamma: float

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
