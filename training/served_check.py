"""After training on a user's table, the trained model against the model it must beat, both
served as the service serves them.

The validation part of each series (its steps between 70 % and 85 % of its length, as the time
split cuts it) is absorbed one observation at a time by each model through the runtime the
service uses, each one-step forecast scored by its CRPS, and forecasts of `horizon` steps are
drawn from origins spread over it (training.quality.served), so the figures are those a user
would meet when serving the model, per-series layer included. The reference is the model the
run started from (`--init`, or the default model a table fine-tunes), else the default model
where the data's shape allows it. Each series' CRPS is divided by its in-sample naive error;
the ratio trained / reference per series is summarised by its geometric mean, one-step and
multistep, and the trained model is kept where the mean of the two is at most 1.
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
from training.quality.scores import geometric_mean, naive_scale
from training.quality.suite import Series, SuiteConfig

SPLITS = (0.7, 0.15, 0.15)
MAX_SERIES = 40  # series measured, spread over the table
CHECK = SuiteConfig(origins=3, samples=300)


@dataclass(frozen=True)
class Verdict:
    """The geometric means of trained / reference CRPS, one-step and multistep, over `n`
    series, and whether the trained model is kept."""

    n: int
    one_step: float
    multi_step: float

    @property
    def ratio(self) -> float:
        """The mean of the two ratios, geometrically (NaN where neither was measured)."""
        return geometric_mean([self.one_step, self.multi_step])

    @property
    def keep_trained(self) -> bool:
        return not self.ratio > 1.0


def validation_series(
    path: Path, *, horizon: int, id_col: str, time_col: str, value_col: str | None,
    season_length: int | None,
) -> list[Series]:
    """The validation part of each series of the table (at most MAX_SERIES, spread evenly):
    each series cut at the end of its validation part, which is its evaluation part."""
    cfg = SuiteConfig(eval_frac=0.5)
    table = table_series(path, cfg, horizon=horizon, season_length=season_length, id_col=id_col,
                         time_col=time_col, value_col=value_col)
    keep = np.unique(np.linspace(0, len(table) - 1, min(MAX_SERIES, len(table))).astype(int))
    out = []
    for i in keep:
        s = table[i].series
        end_train, end_val = split_bounds(len(s.values), SPLITS)
        h = min(horizon, end_val - end_train)
        if end_train >= max(2 * s.season, 8) and h >= 1:
            out.append(Series(s.name, s.kind, s.values[:end_val], s.season, h, end_train))
    return out


def _scores(rt: Runtime, s: Series) -> tuple[float, float]:
    """Scaled mean CRPS of one model on one series: one-step and multistep."""
    starts = origins(s, CHECK.origins)
    one, multi = served.model(rt, s, starts, CHECK.samples)
    scale = naive_scale(s.values[: s.eval_start], s.season)
    y = s.values[s.eval_start :]
    seen = np.isfinite(y)
    multi_seen = np.isfinite(multi.crps)
    one_step = float(np.mean(one.crps[seen])) / scale if seen.any() else math.nan
    multi_step = float(np.mean(multi.crps[multi_seen])) / scale if multi_seen.any() else math.nan
    return one_step, multi_step


def compare(
    trained: Runtime, reference: Runtime, series: list[Series],
    progress: Callable[[str], None] | None = None,
) -> Verdict:
    """Both models on every series; the verdict."""
    ones, multis = [], []
    for i, s in enumerate(series, 1):
        try:
            t1, th = _scores(trained, s)
            r1, rh = _scores(reference, s)
        except InputError as err:
            if progress is not None:
                progress(f"[{i}/{len(series)}] {s.name}: not measured: {err}")
            continue
        ones.append(t1 / r1)
        multis.append(th / rh)
        if progress is not None:
            progress(f"[{i}/{len(series)}] {s.name}: CRPS trained / reference one-step "
                     f"{ones[-1]:.3f}, {s.horizon}-step {multis[-1]:.3f}")
    return Verdict(len(ones), geometric_mean(ones), geometric_mean(multis))
