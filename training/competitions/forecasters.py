"""The forecasters of the competitions' table on one task: the served model (and its ablation)
and statsforecast's peers, each declared the task's season and nothing else.

- The model forecasts as the service answers a stateless request (`Runtime.forecast_history`:
  each history filtered, the per-series layer fitted to it): its intervals at 20, 40, 60, 80
  and 95 % (each with the series' coverage correction) give the quantiles 0.1 ... 0.9 and the
  80 % and 95 % intervals; its point forecast is the median of its SAMPLES paths.
- The peers as fev runs them (fev's models/statsforecast): `StatsForecast.forecast` on the
  histories with the seasonal naive as fallback; quantile q from the interval at level
  |q - 0.5| x 200 (its lower bound below 0.5, its upper above), 0.5 the mean, which is the point
  forecast.

Shapes: N series, H horizon, Q quantile levels.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from model.runtime.runtime import Runtime
from training.competitions.data import Task
from training.competitions.scores import LEVELS, QUANTILES, Forecasts

SAMPLES = 1000  # sample paths of a model's forecast (the README's quickstart asks as many)
CHUNK = 200  # series of one call to the runtime
PEERS = {"AutoETS": "ETS", "AutoARIMA": "ARIMA", "AutoTheta": "Theta",
         "SeasonalNaive": "seasonal naive"}  # statsforecast's class -> the tables' name
SEED = 0


def _interval_levels() -> list[float]:
    """The interval levels (fractions) whose bounds are the quantiles and the reported
    intervals: 0.2, 0.4, 0.6, 0.8 and 0.95."""
    inner = {round(abs(q - 0.5) * 2, 6) for q in QUANTILES} - {0.0}
    return sorted(inner | set(LEVELS))


def _quantiles(bounds: Callable[[float], tuple[np.ndarray, np.ndarray]],
               middle: np.ndarray) -> np.ndarray:
    """(N, H, Q) from the interval bounds at each level and the 0.5 quantile `middle` (N, H)."""
    out = []
    for q in QUANTILES:
        level = round(abs(q - 0.5) * 2, 6)
        out.append(middle if level == 0 else bounds(level)[0 if q < 0.5 else 1])
    return np.stack(out, axis=-1)


def model_forecasts(
    runtime: Runtime, task: Task, samples: int = SAMPLES, particle_seed: int | None = None
) -> Forecasts:
    """The runtime's stateless forecasts of every series of `task` at its horizon. Each
    state's particles are seeded as the service seeds them (a hash of the history), or, given
    `particle_seed` k, the i-th series' by (k << 32) + i: the same forecasts drawn again from
    other particles, to tell a difference from their noise."""
    levels = _interval_levels()
    season = task.season if task.season > 1 else 0
    medians, bounds = [], {lv: ([], []) for lv in levels}  # type: ignore[var-annotated]
    for start in range(0, len(task.histories), CHUNK):
        chunk = [h[:, None] for h in task.histories[start : start + CHUNK]]
        seeds = None if particle_seed is None else [
            (particle_seed << 32) + start + i for i in range(len(chunk))]
        answers = runtime.forecast_history(
            chunk, task.horizon, levels, samples, seasons=[season] * len(chunk), seeds=seeds,
            seed=SEED,
        )
        for fc in answers:
            medians.append(fc.median[:, 0])
            for lv in levels:
                bounds[lv][0].append(fc.intervals[lv][0][:, 0])
                bounds[lv][1].append(fc.intervals[lv][1][:, 0])
    point = np.stack(medians)  # (N, H)
    stacked = {lv: (np.stack(lo), np.stack(hi)) for lv, (lo, hi) in bounds.items()}
    return Forecasts(_quantiles(stacked.__getitem__, point), point,
                     {lv: stacked[lv] for lv in LEVELS})


def peer_forecasts(peer: str, task: Task) -> Forecasts:
    """statsforecast's `peer` (a key of PEERS) on every series of `task`, as fev runs it."""
    import pandas as pd
    from statsforecast import StatsForecast
    from statsforecast import models as sf_models

    if peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}; valid: {', '.join(PEERS)}")
    model = getattr(sf_models, peer)(season_length=task.season)
    frame = pd.DataFrame({
        "unique_id": np.repeat(np.arange(len(task.histories)), [len(h) for h in task.histories]),
        "ds": np.concatenate([np.arange(len(h)) for h in task.histories]),
        "y": np.concatenate(task.histories),
    })
    forecaster = StatsForecast(models=[model], freq=1, n_jobs=1,
                               fallback_model=sf_models.SeasonalNaive(season_length=task.season))
    levels = _interval_levels()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        answer = forecaster.forecast(h=task.horizon, df=frame,
                                     level=[round(100 * lv) for lv in levels])
    answer = answer.sort_values(["unique_id", "ds"]).fillna(0.0)
    name = str(model)

    def column(suffix: str) -> np.ndarray:
        return answer[name + suffix].to_numpy().reshape(len(task.histories), task.horizon)

    def bounds(level: float) -> tuple[np.ndarray, np.ndarray]:
        pct = round(100 * level)
        return column(f"-lo-{pct}"), column(f"-hi-{pct}")

    point = column("")
    return Forecasts(_quantiles(bounds, point), point, {lv: bounds(lv) for lv in LEVELS})
