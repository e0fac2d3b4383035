"""The seasonal profile as a correction of the per-series layer: found from a history, taken
out of every value before the model sees it and put back into every law and path (its
estimator: model/series/season.py).

Shapes: B series, T_i values of a history, F features, O targets, M longest season.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from model.series.layer.base import Correction
from model.series.season import season_decomposition, season_offsets
from model.series.state import StateBatch, profiles


@dataclass(frozen=True)
class Season(Correction):
    """Each series' seasonal profile, of a model of `target_dim` targets, `on` where it runs."""

    target_dim: int
    on: bool

    def start(
        self, rows: Sequence[np.ndarray], season: np.ndarray
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Each history's seasonal profile (B, M, O) (zeros where it is off or the series has
        no season) and the histories (T_i, F) without their seasonal part (copies)."""
        o = self.target_dim
        found = [
            season_decomposition(r[:, :o], int(m) if self.on else 0)
            for r, m in zip(rows, season, strict=True)
        ]
        profile = profiles([f[0] for f in found], o, int(season.max(initial=0)))
        plain = [r.copy() for r in rows]
        for r, (_, part) in zip(plain, found, strict=True):
            r[:, :o] -= part
        return profile, plain

    def offsets(self, batch: StateBatch, at: np.ndarray) -> np.ndarray | None:
        """Each series' seasonal index at seqs `at` (B,) or (B, H) -> (..., O)."""
        return season_offsets(batch.profile, batch.season, at) if self.on else None
