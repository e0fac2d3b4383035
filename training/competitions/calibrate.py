"""The horizon calibration of a model: the growth g of its forecasts' spread over a horizon.

One step ahead, the per-series layer calibrates every model (its spread factor and its intervals'
miscoverage, model/series/spread.py and coverage.py). Many steps ahead it cannot: a series'
one-step errors say little of its errors six or eighteen steps on, and the paths of a network
trained on generated series spread more slowly than real series' errors do where a series' record
is short (on M1, the default model's 80 % intervals held 0.50-0.63 of the outcomes over the
horizon). The calibration is the model's own: a forecast's paths are scaled about their mean by
h^g at step h, g fading as min(1, length / t) for a series that has seen t values
(model/series/spread.series_growth), and g and length are fitted once per model on real series
held out from the benchmarks, at their competition's horizons, as the service forecasts them.

The fit: for each candidate (g, length) of GROWTHS x LENGTHS, the model's stateless forecasts
of every task (M1's yearly, quarterly and monthly series at 6, 8 and 18 steps:
training/competitions/data.py) scored by WQL; the candidate whose WQL relative to g = 0,
averaged over the tasks, is least is kept (a proper score: a wider law is kept only where the
outcomes are spread as widely). The record (g, length, the series, each candidate's scores) goes
into the artifact's manifest (model/artifacts/artifact.py).

Shapes: N series, H horizon.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from model.runtime.runtime import Runtime
from model.series.trend import ALPHA_VALUES
from training.competitions.data import FREQUENCIES, Task, load_task
from training.competitions.forecasters import model_forecasts
from training.competitions.scores import Scores, score

GROWTHS = (0.1, 0.15, 0.2, 0.25, 0.3, 0.4)  # the growths tried (beside 0, the model as trained)
# the record past which they fade: the values the layer's level needs before it fits its own
# alpha (model/series/trend.py). M1's series (9 to 132 values) cannot tell one length from
# another (0.2 fading past 25, 50 or 100 values, or never: WQL 0.993, 0.991, 0.990, 0.990 of
# the uncalibrated model's), and a benchmark must not choose it
LENGTHS = (float(ALPHA_VALUES),)
COMPETITION = "m1"  # the held-out series it is fitted on (never M3 or Tourism)

Candidate = tuple[float, float]  # (g, length)
NONE: Candidate = (0.0, math.inf)


def candidates(growths: Sequence[float] = GROWTHS,
               lengths: Sequence[float] = LENGTHS) -> list[Candidate]:
    """The model as trained first, then every (g, length)."""
    return [NONE] + [(float(g), float(n)) for g in growths for n in lengths]


def _name(c: Candidate) -> str:
    return f"{c[0]:.2f}" + ("" if math.isinf(c[1]) else f"/{c[1]:g}")


@dataclass(frozen=True)
class Fit:
    """The candidate kept, and each one's scores (one Scores per task)."""

    kept: Candidate
    tasks: list[str]
    scores: dict[Candidate, list[Scores]]

    def relative(self, c: Candidate) -> float:
        """The tasks' mean WQL at candidate `c` relative to the model as trained."""
        base = self.scores[NONE]
        return float(np.mean([s.wql / b.wql for s, b in zip(self.scores[c], base, strict=True)]))

    def record(self, every: int) -> dict[str, object]:
        """The manifest's calibration record (no growth_length where it never fades)."""
        out: dict[str, object] = {
            "horizon_growth": self.kept[0],
            "fitted_on": f"{COMPETITION} " + ", ".join(self.tasks)
            + ("" if every == 1 else f" (every {every}th series)"),
            "wql": {_name(c): [round(s.wql, 6) for s in v] for c, v in self.scores.items()},
            "coverage_80": {
                _name(c): [round(s.coverage[0.8], 4) for s in v] for c, v in self.scores.items()
            },
        }
        if not math.isinf(self.kept[1]):
            out["growth_length"] = self.kept[1]
        return out


def fit_growth(
    scores_at: Callable[[float, float], list[Scores]], tasks: Sequence[str],
    tried: Sequence[Candidate] | None = None, progress: Callable[[str], None] | None = None,
) -> Fit:
    """The candidate of `tried` (default: `candidates()`; its first the model as trained) with
    the least mean relative WQL of `scores_at(g, length)` (one Scores per task); ties go to the
    smaller growth, then the shorter length."""
    tried = candidates() if tried is None else list(tried)
    if not tried or tried[0] != NONE:
        raise ValueError("the candidates start with (0, inf), the model as trained")
    scores: dict[Candidate, list[Scores]] = {}
    for c in tried:
        scores[c] = scores_at(*c)
        if progress is not None:
            shown = ", ".join(f"{s.wql:.4f} ({s.coverage[0.8]:.2f})" for s in scores[c])
            progress(f"g {_name(c)}: WQL (80 % coverage) {shown}")
    fit = Fit(NONE, list(tasks), scores)
    best = min(scores, key=lambda c: (round(fit.relative(c), 9), c[0], c[1]))
    return Fit(best, list(tasks), scores)


def held_out_tasks(every: int = 1) -> list[Task]:
    """M1's tasks (every `every`-th series of each)."""
    return [load_task(COMPETITION, f).stratified(every) for f in FREQUENCIES[COMPETITION]]


def runtime_scores(
    runtime: Runtime, tasks: Sequence[Task]
) -> Callable[[float, float], list[Scores]]:
    """Scores of the runtime's forecasts of `tasks` with its paths' growth set to (g, length)."""

    def at(g: float, length: float) -> list[Scores]:
        runtime.forecaster.growth, runtime.forecaster.growth_length = g, length
        return [score(np.stack(t.futures), model_forecasts(runtime, t), t.histories, t.season)
                for t in tasks]

    return at
