"""The served model on one series, through the runtime the service uses (model.runtime.runtime).

`Runtime.create` filters the history before the evaluation part (its last
`max_filter_steps` + 1 values: what the runtime filters of any longer history), then
`Runtime.update` absorbs the evaluation part one value a call, each scored against the
one-step law issued before it and answered, as the service answers an update, with a forecast
of the suite's horizon that the series keeps and its later values score
(`Runtime.forecast_issued`, model/series/horizons.py: its calibration by horizon), from
ISSUED_SAMPLES paths (the service's 1,162 would triple the suite's time for bounds a little
less noisy). At each multistep origin the forecast answered is drawn from `samples` paths.
`issued=False` absorbs the values between origins in one call and answers none (a series
without the calibration by horizon).

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
ISSUED_SAMPLES = 200  # paths of the forecast that answers each update between origins


def _one_step(results: list[UpdateResult]) -> OneStep:
    """The runtime's answers for the n evaluation points as a OneStep."""

    def bound(level: float, side: int) -> np.ndarray:
        return np.array([float(r.intervals[level][side][0]) for r in results])

    median = np.array([float(r.median[0]) for r in results])
    crps = np.array([np.nan if r.crps is None else r.crps for r in results])
    return OneStep(median, {lv: (bound(lv, 0), bound(lv, 1)) for lv in LEVELS}, crps)


def model(
    runtime: Runtime, series: Series, origins: np.ndarray, samples: int, issued: bool = True
) -> tuple[OneStep, MultiStep]:
    """The model's one-step forecasts of the evaluation part, and its forecasts of
    `series.horizon` steps from each of `origins` (absolute indices, increasing)."""
    y, start, h = series.values, series.eval_start, series.horizon
    history = y[max(0, start - runtime.max_filter_steps - 1) : start, None]  # (T0, 1)
    season = series.season if series.season > 1 else 0  # a season length of 1 is none
    levels = list(LEVELS)
    (state,) = runtime.create([history], seasons=[season])
    results: list[UpdateResult] = []
    paths = []
    marks = {int(o) for o in origins}
    stops = range(start, len(y) + 1) if issued else [*origins, len(y)]
    at = start
    for stop in stops:
        if stop > at:
            ((state, answered),) = runtime.update([state], [y[at:stop, None]], levels)
            results += answered
            at = stop
        if stop >= len(y):
            break
        if stop in marks:
            fcs, kept = runtime.forecast_issued(
                [state], h, levels, samples, return_samples=True, seed=FORECAST_SEED
            )
            if issued:
                (state,) = kept
            (fc,) = fcs
            assert fc.samples is not None
            paths.append(fc.samples[:, :, 0].T)  # (H, N)
        elif issued and stop > start:  # (the history's PUT answers no forecast)
            _, (state,) = runtime.forecast_issued(
                [state], h, levels, ISSUED_SAMPLES, seed=FORECAST_SEED
            )
    draws = np.stack(paths)  # (K, H, N)
    truth = np.stack([future(y, o, h) for o in origins])  # (K, H)
    multi = MultiStep(
        origins, np.median(draws, axis=-1), sample_bounds(draws), sample_crps(draws, truth)
    )
    return _one_step(results), multi
