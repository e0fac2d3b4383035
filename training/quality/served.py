"""The served model on one series, through the runtime the service uses (model.runtime.runtime).

`Runtime.create` filters the history before the evaluation part (its last
`max_filter_steps` + 1 values: what the runtime filters of any longer history), then
`Runtime.update` absorbs the evaluation part in order. The runtime absorbs the observations of
one call one at a time and scores each against the one-step law issued before it, exactly as
the service does for a series fed one observation per request; the calls stop at each
multistep origin, where `Runtime.forecast` draws sample paths from the state of that moment.

The one-step median and CRPS are the runtime's, of the law it issued (exact for the mixture,
with the series' adapted observation scale; the intervals also with its coverage correction,
docs/adaptation.md).

Shapes: n evaluation points, K origins, H horizon, N samples.
"""

from __future__ import annotations

import numpy as np

from model.runtime.runtime import Runtime, UpdateResult
from training.quality.scores import (
    LEVELS,
    MultiStep,
    OneStep,
    future,
    sample_bounds,
    sample_crps,
)
from training.quality.suite import Series

FORECAST_SEED = 0


def _one_step(results: list[UpdateResult]) -> OneStep:
    """The runtime's answers for the n evaluation points as a OneStep."""

    def bound(level: float, side: int) -> np.ndarray:
        return np.array([float(r.intervals[level][side][0]) for r in results])

    median = np.array([float(r.median[0]) for r in results])
    crps = np.array([np.nan if r.crps is None else r.crps for r in results])
    return OneStep(median, {lv: (bound(lv, 0), bound(lv, 1)) for lv in LEVELS}, crps)


def model(
    runtime: Runtime, series: Series, origins: np.ndarray, samples: int
) -> tuple[OneStep, MultiStep]:
    """The model's one-step forecasts of the evaluation part, and its forecasts of
    `series.horizon` steps from each of `origins` (absolute indices, increasing)."""
    y, start, h = series.values, series.eval_start, series.horizon
    history = y[max(0, start - runtime.max_filter_steps - 1) : start, None]  # (T0, 1)
    season = series.season if series.season > 1 else 0  # a season length of 1 is none
    (state,) = runtime.create([history], seasons=[season])
    results: list[UpdateResult] = []
    paths = []
    at = start
    for stop in [*origins, len(y)]:
        if stop > at:
            levels = list(LEVELS)
            ((state, answered),) = runtime.update([state], [y[at:stop, None]], levels)
            results += answered
            at = stop
        if stop < len(y):
            (fc,) = runtime.forecast(
                [state], h, list(LEVELS), samples, return_samples=True, seed=FORECAST_SEED
            )
            assert fc.samples is not None
            paths.append(fc.samples[:, :, 0].T)  # (H, N)
    draws = np.stack(paths)  # (K, H, N)
    truth = np.stack([future(y, o, h) for o in origins])  # (K, H)
    multi = MultiStep(
        origins, np.median(draws, axis=-1), sample_bounds(draws), sample_crps(draws, truth)
    )
    return _one_step(results), multi
