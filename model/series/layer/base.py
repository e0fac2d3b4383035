"""What every correction of the per-series layer is: the Correction base, whose phases do
nothing until a correction overrides them, and the Step a correction learns from.

A correction keeps its numbers in the series' state (its rows of model/series/state_fields.py)
and acts in the phases the Layer (layer.py) runs over every correction in its order: `offsets`
(what it takes out of a value before the model sees it and puts back into every law and
path), `issue` (what it does to a step's law), `learn` (what it learns from an observed step,
after the step was scored) and `rescaled` (what follows a change of the series' units). What a
correction does when a series starts and to forecast paths are its own methods, which the
Layer calls by name (`Layer.decompose`, `spread_paths`, `paths_trend`).

Shapes: B_k series at a step, R of them adapting, L window, O targets.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from model.filtering.predictive import Mixture
from model.series.state import StateBatch


@dataclass(frozen=True, eq=False)
class Step:
    """One filter step of B_k series, as the layer learns from it: their scaled values
    `ys` (B_k, O), the law they were issued (`law`) and the model's law before the move
    towards each series' level (`raw`), the lags their window held (`valid` (B_k, L)); the
    values that adapt the series (`observed` (B_k,): none right after a gap) and all values
    observed (`present`), which the series' own law takes in; `rows` (R,) the series that
    adapt their spread, coverage and mean from it (observed, their window half full)."""

    ys: np.ndarray
    law: Mixture
    raw: Mixture
    valid: np.ndarray
    observed: np.ndarray
    present: np.ndarray
    rows: np.ndarray

    @functools.cached_property
    def y(self) -> np.ndarray:
        """The values of the adapting series (R, O) float64."""
        return self.ys[self.rows].astype(np.float64)

    @functools.cached_property
    def seen(self) -> Mixture:
        """The law the adapting series were issued."""
        return self.law.take(self.rows)


class Correction:
    """A correction of the per-series layer (see the module docstring): each phase does
    nothing until the correction overrides it."""

    #: its offsets are carried by forecast paths themselves (each path its own), not added
    carried: ClassVar[bool] = False
    #: it moves the law's mean: the law before the first such correction is the model's as the
    #: series issues it (`Step.raw`), which the other corrections learn from
    moves: ClassVar[bool] = False

    def offsets(self, batch: StateBatch, at: np.ndarray) -> np.ndarray | None:
        """What it takes out of each series' value at seqs `at` (B,) or (B, H), at or after its
        next value, before the model sees it, and puts back into every law and path (..., O);
        None: nothing."""
        return None

    def issue(self, batch: StateBatch, law: Mixture, ahead: np.ndarray | int) -> Mixture:
        """The law (scaled units) of each series' value `ahead` (B,) steps after its last
        observed one, as this correction issues it."""
        return law

    def learn(self, batch: StateBatch, step: Step) -> None:
        """Update this correction's fields of the series of `batch` from `step`, in place."""
        return None

    def rescaled(self, batch: StateBatch, ratio: np.ndarray) -> None:
        """Follow a change of the series' scale (old over new, (B, O)): the numbers it keeps
        in the model's units, in place."""
        return None
