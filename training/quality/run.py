"""One pass of `smct quality`: every series of the suite through the model, ETS and the
seasonal naive on the same evaluation points, scored alike (training.quality.scores).

Shapes: n evaluation points, K origins, H horizon.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from model.runtime.runtime import InputError, Runtime
from training.quality import peers, served
from training.quality.scores import (
    MultiStep,
    OneStep,
    future,
    last_values,
    multi_step_scores,
    naive_scale,
    one_step_scores,
)
from training.quality.suite import Series, SuiteConfig

log = logging.getLogger(__name__)
METHODS = ("model", "ETS", "naive")  # one-step; the multistep scores have model and ETS
SEASONS_BEFORE_WIDTH = 3  # seasons of updates before the width of a generated series counts


@dataclass(frozen=True)
class SeriesResult:
    """The scores of one series: one_step[method] and multi_step[method] (scores.py's keys),
    and what the figures draw."""

    series: Series
    scale: float
    ets_form: str
    one_step: dict[str, dict[str, float]]
    multi_step: dict[str, dict[str, float]]
    forecasts: dict[str, OneStep]
    fans: dict[str, MultiStep]
    seconds: float

    def ratio(self, kind: str = "one_step", method: str = "model") -> float:
        """CRPS of `method` over that of ETS, one-step or multi_step."""
        scores = self.one_step if kind == "one_step" else self.multi_step
        return scores[method]["crps"] / scores["ETS"]["crps"]


def origins(series: Series, count: int) -> np.ndarray:
    """Up to `count` multistep origins spread evenly over the evaluation part, each with a
    full horizon of values after it (K,) absolute indices, increasing."""
    last = len(series.values) - series.horizon
    if last < series.eval_start:
        return np.array([series.eval_start], dtype=np.int64)
    return np.unique(np.linspace(series.eval_start, last, count).round().astype(np.int64))


def evaluate_series(runtime: Runtime, series: Series, cfg: SuiteConfig) -> SeriesResult:
    """Score the model and its peers on one series."""
    began = time.perf_counter()
    y = series.values[series.eval_start :]
    scale = naive_scale(series.values[: series.eval_start], series.season)
    last = last_values(series.values, series.eval_start)
    starts = origins(series, cfg.origins)
    h = series.horizon
    truth = np.stack([future(series.values, o, h) for o in starts])  # (K, H)
    model_one, model_multi = served.model(runtime, series, starts, cfg.samples)
    ets_one, ets_multi, form = peers.ets(series, starts, cfg.ets_history)
    naive_one = peers.seasonal_naive(series)
    forecasts = {"model": model_one, "ETS": ets_one, "naive": naive_one}
    skip = SEASONS_BEFORE_WIDTH * series.season if series.oracle_width80 else 0
    return SeriesResult(
        series=series,
        scale=scale,
        ets_form=form,
        one_step={m: one_step_scores(f, y, last, scale, skip) for m, f in forecasts.items()},
        multi_step={
            "model": multi_step_scores(model_multi, truth, scale),
            "ETS": multi_step_scores(ets_multi, truth, scale),
        },
        forecasts=forecasts,
        fans={"model": model_multi, "ETS": ets_multi},
        seconds=time.perf_counter() - began,
    )


def evaluate_suite(
    runtime: Runtime,
    suite: list[Series],
    cfg: SuiteConfig,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[SeriesResult], dict[str, str]]:
    """Every series of the suite, in order, and the series the runtime refused (name: its
    message); `progress` is told of each series as it is done."""
    out, refused = [], {}
    for series in suite:
        try:
            result = evaluate_series(runtime, series, cfg)
        except InputError as err:
            refused[series.name] = str(err)
            line = f"{series.name}: refused by the runtime: {err}"
        else:
            out.append(result)
            line = (
                f"{series.name}: {series.n_eval} points, CRPS model/ETS {result.ratio():.3f} "
                f"({result.seconds:.1f} s)"
            )
        log.info(line)
        if progress is not None:
            progress(line)
    return out, refused
