"""What every correction of the per-series layer is: the Correction base, whose phases do
nothing until a correction overrides them, and the Step a correction learns from.

A correction keeps its numbers in the series' state (its rows of model/series/state_fields.py)
and acts in the phases the Layer (layer.py) runs over every correction in its order: `offsets`
(what it takes out of a value before the model sees it and puts back into every law and
path), `issue` (what it does to a step's law), `learn` (what it learns from an observed step,
after the step was scored) and `rescaled` (what follows a change of the series' units); when
series start from their histories (`Start`): `start` (its part taken out of a history before
the model filters it) and `started` (its numbers set in the state after); and on a
forecast's paths (`Paths`): `start_paths` (what it sets as they start), `scaled_paths` (what
it does to a block of their steps in the model's units) and `series_paths` (in the series'
units, after the layer put its offsets back).

Shapes: B_k series at a step, R of them adapting, L window, O targets; a forecast's paths: B
series, N paths each, H' steps, S of them in a block.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from model.filtering.predictive import Mixture
from model.series import trend as trend_model
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


@dataclass(eq=False)
class Start:
    """B series as they start from their histories (Layer.start), of a model of `target_dim`
    targets: the histories `rows` (T_i, F) and their season lengths `season` (B,); each
    history without the parts the corrections took out so far (`plain`, copies: the series'
    scaling and the model's first window read them), what the model's steps over the history
    take out of each value besides the layer's offsets (`taken` (T_i, O): a part whose numbers
    the state gets only once the history is filtered), the fields of the state set before the
    history is filtered (`fields`), whether the series' trend is kept (`trended`) and each
    correction's own numbers (`held`)."""

    rows: list[np.ndarray]
    season: np.ndarray
    target_dim: int
    plain: list[np.ndarray] = field(init=False)
    taken: list[np.ndarray] = field(init=False)
    fields: dict[str, np.ndarray] = field(default_factory=dict)
    trended: bool = False
    held: dict[Correction, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.plain = [r.copy() for r in self.rows]
        self.taken = [np.zeros((len(r), self.target_dim)) for r in self.rows]

    @functools.cached_property
    def fits(self) -> list[trend_model.Fitted]:
        """The damped trend fitted to each history (model/series/trend.py) as the corrections
        before the first to ask left it, once: the trend takes its sums out, the series' own
        law the alpha of its level."""
        return [trend_model.fit(r[:, : self.target_dim]) for r in self.plain]


@dataclass(eq=False)
class Paths:
    """A forecast's paths of B series, N each, over `total` steps (H'), as the layer moves
    them (Layer.paths): each series' steps ahead of its last value at each of the paths'
    steps `ahead` (B, H') (its pending steps first), its horizon growth `growth` (B,), the
    model's noise in series units `noise_sd` (B, 1, O), the offsets the paths do not carry
    (B, H', O) (Layer.offsets); then what the corrections set when the paths start: each
    step's spread factor `factors` (B, H', O) (ones until one sets them), whether the model's
    noise draws are wanted back (`noise`), and each correction's own numbers (`held`)."""

    batch: StateBatch
    n: int
    total: int
    ahead: np.ndarray
    growth: np.ndarray
    noise_sd: np.ndarray
    offsets: np.ndarray
    factors: np.ndarray
    noise: bool = False
    held: dict[Correction, Any] = field(default_factory=dict)
    #: the one-step shift of each series' mean the model takes (B, J, O) (Layer.model_mean)
    mean: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0), np.float32))


@dataclass(eq=False)
class Block:
    """S steps of a forecast's paths as the corrections move them: the paths x (S, B, N, O)
    (float64; the model's units, then the series'), their mean `centre` (S, B, 1, O) as the
    model drew them (the model's units), the paths' steps `steps` and the model's noise
    draws `eps` (S, B, N, O) of those steps (None where not wanted)."""

    x: np.ndarray
    centre: np.ndarray
    steps: range
    eps: np.ndarray | None = None

    @property
    def at(self) -> slice:
        return slice(self.steps.start, self.steps.stop)


def steps_of(a: np.ndarray, at: slice) -> np.ndarray:
    """Steps `at` of a per-series array (B, H, O) as (S, B, 1, O), beside paths (S, B, N, O)."""
    return a[:, at].swapaxes(0, 1)[:, :, None]


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

    def start(self, start: Start) -> None:
        """Take its part out of each history (`start.plain`, in place) and set what it needs
        before the model filters the histories."""
        return None

    def started(self, batch: StateBatch, start: Start) -> None:
        """Set its numbers in the states of the series once their histories were filtered."""
        return None

    def start_paths(self, paths: Paths) -> None:
        """Set what it needs of a forecast's paths as they start (in `paths`)."""
        return None

    def scaled_paths(self, paths: Paths, block: Block) -> None:
        """Move a block of the paths in the model's units (`block.x`, in place)."""
        return None

    def series_paths(self, paths: Paths, block: Block) -> None:
        """Move a block of the paths in the series' units (`block.x`, in place)."""
        return None
