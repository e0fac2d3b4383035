"""Each series' units as a correction of the per-series layer: its values read in the model's
units by their location and scale, and, for a per-series model, the scale taken again from
its window after every step (its estimator: model/series/scaling.py).

Shapes: B_k series at a step, F features, O targets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.series.layer.base import Correction
from model.series.scaling import reanchor, scale_values
from model.series.state import StateBatch


@dataclass(frozen=True)
class Scaling(Correction):
    """The units of a model of `target_dim` targets: `per_series` where each series is
    scaled by the last `span` inputs of its `window` after every step (else by the artifact's
    scaler, kept)."""

    target_dim: int
    per_series: bool
    window: int
    span: int

    def enter(self, batch: StateBatch, plain: np.ndarray) -> np.ndarray:
        """Values (B_k, F) in series units, without the layer's offsets, in the model's
        (float64, NaN kept; one too far from the series' level is an InputError)."""
        return scale_values(plain, batch)

    def rescale(self, batch: StateBatch) -> np.ndarray | None:
        """After a step, a per-series model's series scaled again by their window (in place):
        the old scale over the new (B_k, O), which the corrections that keep numbers in the
        model's units follow (Correction.rescaled); None where the scale is kept."""
        if not self.per_series:
            return None
        before = batch.scale[:, : self.target_dim].copy()
        reanchor(batch, self.window, self.span)
        return before / batch.scale[:, : self.target_dim]
