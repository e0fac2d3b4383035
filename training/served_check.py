"""After training on a user's table, the trained model against the model it must beat, both
served as the service serves them.

The last part of each series (its steps after 85 %: the test split of a time split, which
neither the training nor its early stopping saw) is absorbed one observation at a time by each
model through the runtime the service uses, each one-step forecast scored by its CRPS, and
forecasts of `horizon` steps are drawn from origins spread over it (training.quality.served),
so the figures are those a user would meet when serving the model, per-series layer included.
The reference is the model the run started from (`--init`, or the default model a table
fine-tunes), else the default model where the data's shape allows it. Each series' CRPS is
divided by its in-sample naive error; the ratio trained / reference per series is summarised
by its geometric mean, one-step and multistep, and the multistep 80 % intervals' coverage is
pooled over every origin of every series.

The trained model is kept where it helps: its multistep CRPS at most 1 - `min_gain` of the
reference's (forecasts are judged over horizons; a new model for less is not worth its
change), its one-step CRPS no worse, and its multistep coverage within COVERAGE_SLACK of 0.80
or no further from it than the reference's. Otherwise the reference is kept and `Verdict.why`
says which of the three failed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from model.runtime.runtime import InputError, Runtime
from training.datasets.windows import split_bounds
from training.quality import served
from training.quality.backtest import table_series
from training.quality.run import origins
from training.quality.scores import future, geometric_mean, naive_scale
from training.quality.suite import Series, SuiteConfig

SPLITS = (0.7, 0.15, 0.15)
MAX_SERIES = 40  # series measured, spread over the table
CHECK = SuiteConfig(origins=5, samples=300)
MIN_GAIN = 0.05  # the multistep CRPS a trained model must save to be kept
NOMINAL, COVERAGE_SLACK = 0.8, 0.05


@dataclass(frozen=True)
class Verdict:
    """The geometric means of trained / reference CRPS, one-step and multistep, over `n`
    series, each model's pooled multistep 80 % coverage, and whether the trained model is
    kept (module docstring)."""

    n: int
    one_step: float
    multi_step: float
    coverage: tuple[float, float] = (NOMINAL, NOMINAL)  # trained, reference
    min_gain: float = MIN_GAIN

    @property
    def why(self) -> str:
        """"" where the trained model is kept, else why not, in words."""
        trained, reference = (abs(c - NOMINAL) for c in self.coverage)
        if self.n == 0:
            return "no series could be measured"
        if not self.multi_step <= 1.0 - self.min_gain:
            return (f"it does not save {self.min_gain:.0%} of the multistep CRPS "
                    f"(--min-gain)")
        if self.one_step > 1.0:
            return "it forecasts one step ahead worse"
        if trained > max(COVERAGE_SLACK, reference):
            return f"its 80 % intervals cover {self.coverage[0]:.2f} over the horizon"
        return ""

    @property
    def keep_trained(self) -> bool:
        return not self.why


def check_series(
    path: Path, *, horizon: int, id_col: str, time_col: str, value_col: str | None,
    season_length: int | None,
) -> list[Series]:
    """The last part of each series of the table (at most MAX_SERIES, spread evenly): each
    series whole, evaluated after its validation part."""
    cfg = SuiteConfig(eval_frac=0.5)
    table = table_series(path, cfg, horizon=horizon, season_length=season_length, id_col=id_col,
                         time_col=time_col, value_col=value_col)
    keep = np.unique(np.linspace(0, len(table) - 1, min(MAX_SERIES, len(table))).astype(int))
    out = []
    for i in keep:
        s = table[i].series
        _, end_val = split_bounds(len(s.values), SPLITS)
        h = min(horizon, len(s.values) - end_val)
        if end_val >= max(2 * s.season, 8) and h >= 1:
            out.append(Series(s.name, s.kind, s.values, s.season, h, end_val))
    return out


def _scores(rt: Runtime, s: Series) -> tuple[float, float, np.ndarray]:
    """Scaled mean CRPS of one model on one series, one-step and multistep, and the counts
    (inside, observed) of its multistep 80 % intervals."""
    starts = origins(s, CHECK.origins)
    one, multi = served.model(rt, s, starts, CHECK.samples)
    scale = naive_scale(s.values[: s.eval_start], s.season)
    y = s.values[s.eval_start :]
    seen = np.isfinite(y)
    multi_seen = np.isfinite(multi.crps)
    one_step = float(np.mean(one.crps[seen])) / scale if seen.any() else math.nan
    multi_step = float(np.mean(multi.crps[multi_seen])) / scale if multi_seen.any() else math.nan
    truth = np.stack([future(s.values, int(o), s.horizon) for o in starts])
    lo, hi = multi.bounds[0.8]
    observed = np.isfinite(truth)
    inside = observed & (lo <= truth) & (truth <= hi)
    return one_step, multi_step, np.array([inside.sum(), observed.sum()])


def compare(
    trained: Runtime, reference: Runtime, series: list[Series],
    progress: Callable[[str], None] | None = None, min_gain: float = MIN_GAIN,
) -> Verdict:
    """Both models on every series; the verdict."""
    ones, multis, counts = [], [], np.zeros((2, 2))
    for i, s in enumerate(series, 1):
        try:
            t1, th, tc = _scores(trained, s)
            r1, rh, rc = _scores(reference, s)
        except InputError as err:
            if progress is not None:
                progress(f"[{i}/{len(series)}] {s.name}: not measured: {err}")
            continue
        ones.append(t1 / r1)
        multis.append(th / rh)
        counts += [tc, rc]
        if progress is not None:
            progress(f"[{i}/{len(series)}] {s.name}: CRPS trained / reference one-step "
                     f"{ones[-1]:.3f}, {s.horizon}-step {multis[-1]:.3f}")
    cover = counts[:, 0] / np.maximum(counts[:, 1], 1)
    return Verdict(len(ones), geometric_mean(ones), geometric_mean(multis),
                   (float(cover[0]), float(cover[1])), min_gain)
