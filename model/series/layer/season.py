"""The seasonal profile as a correction of the per-series layer: found from a history, taken
out of every value before the model sees it and put back into every law and path (its
estimator: model/series/season.py).

Shapes: B series, T_i values of a history, F features, O targets, M longest season.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.series.layer.base import Correction, Start
from model.series.season import season_decomposition, season_offsets
from model.series.state import StateBatch, profiles


@dataclass(frozen=True)
class Season(Correction):
    """Each series' seasonal profile, of a model of `target_dim` targets, `on` where it runs."""

    target_dim: int
    on: bool

    def start(self, start: Start) -> None:
        """Each history's seasonal profile (B, M, O) (zeros where it is off or the series has
        no season; M its longest season), its seasonal part taken out."""
        o = self.target_dim
        found = [
            season_decomposition(r[:, :o], int(m) if self.on else 0)
            for r, m in zip(start.plain, start.season, strict=True)
        ]
        start.fields["profile"] = profiles(
            [f[0] for f in found], o, int(start.season.max(initial=0))
        )
        for r, (_, part) in zip(start.plain, found, strict=True):
            r[:, :o] -= part

    def offsets(self, batch: StateBatch, at: np.ndarray) -> np.ndarray | None:
        """Each series' seasonal index at seqs `at` (B,) or (B, H) -> (..., O)."""
        return season_offsets(batch.profile, batch.season, at) if self.on else None
